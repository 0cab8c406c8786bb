// The plugin ABI: what a shared library exports to be a gt plugin.
//
// A plugin exports exactly two C symbols (use GT_PLUGIN below):
//   uint32_t gt_plugin_abi_version();                  -- checked first
//   const gt::PluginDescriptor* gt_plugin_descriptor(); -- read only if equal
// The host compares the ABI version before it reads the descriptor or creates
// anything, and refuses a mismatch naming the file and both versions.
// kPluginAbiVersion changes whenever any type in gt/*.h that crosses the
// plugin boundary changes layout or meaning. 3: Stage::Process and
// Emitter::Emit take the instruction as an rvalue reference. 4: OptionSpec
// names the environment variable that overrides an option (and the unused
// OptionValues::Has and OptionValueToString are gone). 5: Stage gains the
// virtual host_event_sink() (gt/host_event.h), which changes its vtable.
// 7: Backend gains the virtual ClientBytes() (gt/backend.h). 8: Emitter
// gains Tag() and Stage gains Restore() (gt/stage.h: a restarted dispatcher
// rebuilds a stage's placements), which change both vtables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "gt/backend.h"
#include "gt/options.h"
#include "gt/stage.h"
#include "gt/status.h"

#ifndef GT_PLUGIN_ABI_VERSION
#define GT_PLUGIN_ABI_VERSION 8
#endif

namespace gt {

inline constexpr uint32_t kPluginAbiVersion = GT_PLUGIN_ABI_VERSION;

enum class PluginKind : uint32_t { kModifier = 1, kBackend = 2 };
std::string_view PluginKindName(PluginKind kind);  // "modifier" | "backend"

// Bit mask of HostKind values a plugin may run in.
inline constexpr uint32_t HostBit(HostKind kind) { return 1u << static_cast<uint32_t>(kind); }
// Either server host. A stage that may also run in a client's pipeline adds
// HostBit(HostKind::kClient): it then sees one client's stream, before the
// dispatcher, with every instruction's `client` 0 and no worker placed.
inline constexpr uint32_t kAnyHost = HostBit(HostKind::kDispatcher) | HostBit(HostKind::kWorker);
inline constexpr uint32_t kEveryHost = kAnyHost | HostBit(HostKind::kClient);

struct PluginDescriptor {
  PluginKind kind;
  const char* name;         // what manifests write as `plugin:`
  const char* version;      // the plugin's own version, e.g. "1.0.0"
  const char* description;  // one line
  uint32_t hosts;           // HostBit() mask
  const OptionSpec* options;
  size_t option_count;
  // Exactly one of these is set, matching `kind`. Called with options already
  // validated against `options`.
  Result<std::unique_ptr<Stage>> (*create_stage)(const StageContext& context);
  Result<std::unique_ptr<Backend>> (*create_backend)(const StageContext& context);
};

}  // namespace gt

#define GT_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

// Exports `descriptor` (a gt::PluginDescriptor with static storage) as this
// library's plugin.
#define GT_PLUGIN(descriptor)                                                           \
  GT_PLUGIN_EXPORT uint32_t gt_plugin_abi_version() { return ::gt::kPluginAbiVersion; } \
  GT_PLUGIN_EXPORT const ::gt::PluginDescriptor* gt_plugin_descriptor() { return &(descriptor); }
