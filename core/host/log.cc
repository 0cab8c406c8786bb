#include "gt/log.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include "gt/settings.h"

namespace gt::log {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::array<const char*, static_cast<size_t>(Component::kCount)> kNames = {"client", "dispatcher", "worker",
                                                                                    "compile"};
// A bad value counts as off here: the client's first op and a service's
// start already failed on it (CheckSettings), naming it.
bool On(const char* name) {
  Result<bool> on = SwitchSetting(name);
  return on.ok() && *on;
}

uint32_t MaskFromEnvironment() {
  // In Component order.
  constexpr std::array<const char*, static_cast<size_t>(Component::kCount)> parts = {
      "GT_DEBUG_CLIENT", "GT_DEBUG_DISPATCHER", "GT_DEBUG_WORKER", "GT_DEBUG_COMPILE"};
  const bool verbose = On("GT_VERBOSE");
  uint32_t mask = 0;
  for (size_t c = 0; c < parts.size(); ++c)
    if (verbose || On(parts[c])) mask |= 1u << c;
  return mask;
}

// Per part: the current one-second window and what it has written.
struct Window {
  std::mutex mu;
  Clock::time_point start;  // GUARDED_BY(mu)
  int written = 0;          // GUARDED_BY(mu)
  int64_t suppressed = 0;   // GUARDED_BY(mu)
};

struct State {
  Clock::time_point loaded = Clock::now();
  std::array<Window, static_cast<size_t>(Component::kCount)> windows;
};

// Never destroyed: threads may log while the process exits.
State& state() {
  static State* s = new State;
  return *s;
}

void Emit(Component c, std::string_view line) {
  const double seconds = std::chrono::duration<double>(Clock::now() - state().loaded).count();
  char prefix[64];
  const int n = std::snprintf(prefix, sizeof prefix, "gt:%s +%.3fs ", kNames[static_cast<size_t>(c)], seconds);
  detail::WriteLine(std::string_view(prefix, n > 0 ? static_cast<size_t>(n) : 0), line);
}

void ReportSuppressed(Component c, Window& w) {  // REQUIRES: w.mu held
  if (w.suppressed == 0) return;
  Emit(c, "... " + std::to_string(w.suppressed) + " lines suppressed (at most " + std::to_string(kLinesPerSecond) +
              " a second)");
  w.suppressed = 0;
}

// Reports what the last window suppressed when the process exits.
struct FlushAtExit {
  FlushAtExit() { (void)state(); }  // the clock starts when libgt_core loads
  ~FlushAtExit() {
    for (size_t c = 0; c < state().windows.size(); ++c) {
      Window& w = state().windows[c];
      std::lock_guard<std::mutex> lock(w.mu);
      ReportSuppressed(static_cast<Component>(c), w);
    }
  }
} flush_at_exit;

}  // namespace

namespace detail {
std::atomic<uint32_t> enabled_mask{MaskFromEnvironment()};

void WriteLine(std::string_view prefix, std::string_view line) {
  std::string out(prefix);
  // One event, one line: text from peers (a worker's name, a library's
  // error) may hold newlines or escape sequences.
  for (char ch : line) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte >= 0x20 && byte != 0x7f) {
      out.push_back(ch);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out.append(escaped);
    }
  }
  out.push_back('\n');
  ssize_t ignored = ::write(STDERR_FILENO, out.data(), out.size());
  (void)ignored;
}
}  // namespace detail

std::string_view ComponentName(Component c) { return kNames[static_cast<size_t>(c)]; }

void Write(Component c, std::string_view line) {
  if (!Enabled(c)) return;
  Window& w = state().windows[static_cast<size_t>(c)];
  std::lock_guard<std::mutex> lock(w.mu);
  const Clock::time_point now = Clock::now();
  if (now - w.start >= std::chrono::seconds(1)) {
    ReportSuppressed(c, w);
    w.start = now;
    w.written = 0;
  }
  if (w.written >= kLinesPerSecond) {
    ++w.suppressed;
    detail::CountSuppressed(1);
    return;
  }
  ++w.written;
  Emit(c, line);
}

void SetEnabledForTest(Component c, bool on) {
  const uint32_t bit = 1u << static_cast<unsigned>(c);
  if (on) detail::enabled_mask.fetch_or(bit, std::memory_order_relaxed);
  else detail::enabled_mask.fetch_and(~bit, std::memory_order_relaxed);
}

}  // namespace gt::log
