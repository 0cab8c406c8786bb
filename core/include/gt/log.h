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
#include <string>
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

// ---- Warnings: always on, bounded per peer and in all ----------------------
//
// What a host says about a message it refused or a library's complaint
// (protobuf's "invalid UTF-8"), written whatever the switches say. A peer
// decides how often these happen, so they are bounded twice: each peer (the
// current WarningPeer) writes at most kWarningBurstPerPeer lines, then one
// more per kWarningPeerRefill; and all peers together at most
// kWarningBurst lines, then one a second. What is held back is counted
// (SuppressedLines, the hosts' gt_log_lines_suppressed_total) and said in
// one "... N lines suppressed" line at most once a minute.
inline constexpr int kWarningBurstPerPeer = 5;
inline constexpr int kWarningPeerRefillSeconds = 60;
inline constexpr int kWarningBurst = 50;
// Peers remembered at once; past it the oldest budgets are forgotten (the
// bound over all peers still holds).
inline constexpr size_t kWarningPeersTracked = 4096;

// Writes "gt:<source> <line>" to stderr unless the current peer's budget or
// the overall one is spent.
void Warn(std::string_view source, std::string_view line);

// While one lives, Warn calls on this thread are charged to `peer` (a key,
// an address, a routing id); outside any, to the peer "" (the host itself).
// REQUIRES: `peer` outlives this object.
class WarningPeer {
 public:
  explicit WarningPeer(std::string_view peer);
  ~WarningPeer();
  WarningPeer(const WarningPeer&) = delete;
  WarningPeer& operator=(const WarningPeer&) = delete;

 private:
  std::string_view previous_;
};

// Lines held back so far in this process, debug lines (kLinesPerSecond)
// and warnings alike.
int64_t SuppressedLines();

// Calls `on_suppressed(n)` for every n lines held back from now on, until
// the returned handle is destroyed (a host's metric counts them this way).
class SuppressedSink {
 public:
  using Callback = void (*)(void* context, int64_t lines);
  SuppressedSink(Callback callback, void* context);
  ~SuppressedSink();
  SuppressedSink(const SuppressedSink&) = delete;
  SuppressedSink& operator=(const SuppressedSink&) = delete;

 private:
  Callback callback_;
  void* context_;
};

// Sends protobuf's own log lines (a malformed message's "invalid UTF-8"
// from a peer) through Warn, source "protobuf". Idempotent; hosts call it
// when they start.
void RouteProtobufLog();

namespace detail {
// Writes prefix + line + "\n" in one write(2), control bytes of `line`
// escaped (\xNN): text from peers may hold newlines or escape sequences.
void WriteLine(std::string_view prefix, std::string_view line);
// Counts `n` held-back lines and tells the sinks.
void CountSuppressed(int64_t n);
}  // namespace detail

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
