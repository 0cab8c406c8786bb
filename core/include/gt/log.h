// Debug logging: what each part of gt is doing, on stderr, when asked.
//
// One switch per part, read once from the environment when libgt_core loads:
//   GT_DEBUG_CLIENT, GT_DEBUG_DISPATCHER, GT_DEBUG_WORKER, GT_DEBUG_COMPILE
//   ("1", "true", "yes" or "on"), and GT_VERBOSE, which turns on all four.
// docs/DEBUGGING.md lists what each part prints.
//
// Off (the default) a call site costs one relaxed atomic load: GT_LOG does
// not evaluate its message unless the part is on. On, each part writes at
// most kLinesPerSecond lines a second; the rest are counted and reported as
// one "... K lines suppressed" line when the next second begins (or at exit).
//
// Usable from plugins (they link libgt_core); a plugin never reads the
// environment itself (options.h), this header does it for them.
//
// Thread-safety: every function is safe to call from any thread; one line is
// one write(2), so lines of different threads do not interleave.
#pragma once

#include <atomic>
#include <cstdint>
#include <sstream>
#include <string_view>

namespace gt::log {

// The parts that have a switch. kCount ends the enum.
enum class Component : uint8_t { kClient, kDispatcher, kWorker, kCompile, kCount };

// "client", "dispatcher", "worker", "compile".
std::string_view ComponentName(Component c);

// Lines a part may write per second before the rest are suppressed.
inline constexpr int kLinesPerSecond = 100;

namespace detail {
// Bit c set: component c is on. Set once at load from the environment.
extern std::atomic<uint32_t> enabled_mask;
}  // namespace detail

// Whether `c` logs. One relaxed load.
inline bool Enabled(Component c) {
  return (detail::enabled_mask.load(std::memory_order_relaxed) >> static_cast<unsigned>(c)) & 1u;
}

// Writes "gt:<part> +<seconds since load>s <line>\n" to stderr, subject to
// the rate limit. Does nothing when `c` is off. Prefer GT_LOG.
void Write(Component c, std::string_view line);

// Turns `c` on or off whatever the environment said (tests only).
void SetEnabledForTest(Component c, bool on);

}  // namespace gt::log

// GT_LOG(kWorker, "ran " << name << " in " << ms << " ms"): the message is a
// stream expression, formatted only when the part is on.
#define GT_LOG(component, ...)                                           \
  do {                                                                   \
    if (::gt::log::Enabled(::gt::log::Component::component)) {           \
      std::ostringstream gt_log_line_;                                   \
      gt_log_line_ << __VA_ARGS__;                                       \
      ::gt::log::Write(::gt::log::Component::component, gt_log_line_.str()); \
    }                                                                    \
  } while (false)
