// Finding and loading plugin shared libraries (Boost.DLL).
//
// Loading a file checks, in order: it is a loadable shared library; it
// exports gt_plugin_abi_version; that version equals kPluginAbiVersion; it
// exports gt_plugin_descriptor; the descriptor is complete. Nothing from the
// plugin runs before the version check except the version function itself
// (and the library's static initialisers, which loading it runs).
//
// Loading a file also checks its option table: every option has a name,
// default, unit and doc, no name is declared twice, a numeric range is not
// empty, and each default is valid for its own spec.
//
// Search path: every directory in GT_PLUGIN_PATH (':'-separated); then
// <libdir>/gt/plugins, where <libdir> holds the libgt_core.so in use (so a
// copy installed under any prefix finds the plugins installed with it); then
// the configured install directory; then the build tree's plugin directory.
// A directory named twice is searched once, where it first appears. A plugin
// named "x" lives in a file gt_x.so.
//
// Thread-safety: the functions are safe to call from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gt/plugin.h"
#include "gt/status.h"

namespace gt {

struct LoadedPlugin {
  std::shared_ptr<void> library;  // keeps the shared library loaded
  const PluginDescriptor* descriptor = nullptr;
  std::string path;
};

std::vector<std::string> PluginSearchPath();

// Loads `path`. Errors name the file and the reason (for an ABI mismatch:
// both versions).
Result<LoadedPlugin> LoadPluginFile(const std::string& path);

// Finds and loads the plugin called `name` on the search path.
Result<LoadedPlugin> FindPlugin(std::string_view name);

struct PluginListing {
  std::string path;
  Result<LoadedPlugin> plugin;  // the load error for files that are not plugins
};
// Every gt_*.so on the search path, loaded for its descriptor only (no
// instance is created). A name found twice is listed where it is found first.
std::vector<PluginListing> ListPlugins();

// An object created by a plugin, holding the plugin's library loaded for as
// long as the object lives.
template <typename T>
class PluginInstance {
 public:
  PluginInstance() = default;
  PluginInstance(std::shared_ptr<void> library, std::unique_ptr<T> object)
      : library_(std::move(library)), object_(std::move(object)) {}
  PluginInstance(PluginInstance&&) = default;
  PluginInstance& operator=(PluginInstance&&) = default;
  ~PluginInstance() { object_.reset(); }  // before the library goes

  T* get() const { return object_.get(); }
  T* operator->() const { return object_.get(); }
  T& operator*() const { return *object_; }
  explicit operator bool() const { return object_ != nullptr; }

 private:
  std::shared_ptr<void> library_;  // declared first: destroyed last
  std::unique_ptr<T> object_;
};

// Calls the plugin's factory for its kind. Exceptions become PluginError.
Result<PluginInstance<Stage>> CreateStage(const LoadedPlugin& plugin, const StageContext& context);
Result<PluginInstance<Backend>> CreateBackend(const LoadedPlugin& plugin, const StageContext& context);

}  // namespace gt
