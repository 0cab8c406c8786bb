// gt::log::Warn and what counts held-back lines (gt/log.h): budgets per peer
// and over all peers, so that no peer decides how much a host writes.
#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <chrono>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gt/log.h"

namespace gt::log {
namespace {

using Clock = std::chrono::steady_clock;

// A token bucket: `tokens` lines may go now; one more every `refill`.
struct Budget {
  double tokens;
  Clock::time_point updated;

  bool Take(Clock::time_point now, double burst, std::chrono::duration<double> refill) {
    tokens = std::min(burst, tokens + (now - updated) / refill);
    updated = now;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  }
};

struct PeerBudgets {
  std::mutex mu;
  Budget overall{kWarningBurst, Clock::now()};                 // GUARDED_BY(mu)
  std::list<std::string> order;                                // GUARDED_BY(mu): least recently seen first
  std::unordered_map<std::string, std::pair<Budget, std::list<std::string>::iterator>> peers;  // GUARDED_BY(mu)
  int64_t held_back = 0;                                       // GUARDED_BY(mu): since the last report
  Clock::time_point reported = Clock::now();                   // GUARDED_BY(mu)

  Budget& For(const std::string& peer, Clock::time_point now) {
    auto it = peers.find(peer);
    if (it != peers.end()) {
      order.splice(order.end(), order, it->second.second);
      return it->second.first;
    }
    if (peers.size() >= kWarningPeersTracked) {
      peers.erase(order.front());
      order.pop_front();
    }
    order.push_back(peer);
    return peers.emplace(peer, std::make_pair(Budget{kWarningBurstPerPeer, now}, std::prev(order.end())))
        .first->second.first;
  }
};

// Never destroyed: threads may warn while the process exits.
PeerBudgets& budgets() {
  static auto* b = new PeerBudgets;
  return *b;
}

struct Sinks {
  std::mutex mu;
  std::vector<std::pair<SuppressedSink::Callback, void*>> list;  // GUARDED_BY(mu)
  std::atomic<int64_t> total{0};
};

Sinks& sinks() {
  static auto* s = new Sinks;
  return *s;
}

thread_local std::string_view current_peer;

void ReportHeldBack(PeerBudgets& b, Clock::time_point now) {  // REQUIRES: b.mu held
  if (b.held_back == 0 || now - b.reported < std::chrono::seconds(60)) return;
  detail::WriteLine("gt:log ", "... " + std::to_string(b.held_back) +
                                   " warnings suppressed in the last minute (gt_log_lines_suppressed_total)");
  b.held_back = 0;
  b.reported = now;
}

void ProtobufToWarn(google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
  if (level == google::protobuf::LOGLEVEL_FATAL) {  // protobuf aborts after this: say it whatever the budget
    detail::WriteLine("gt:protobuf FATAL ", std::string(file) + ":" + std::to_string(line) + ": " + message);
    return;
  }
  Warn("protobuf", message);
}

}  // namespace

void Warn(std::string_view source, std::string_view line) {
  PeerBudgets& b = budgets();
  const Clock::time_point now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(b.mu);
    ReportHeldBack(b, now);
    const bool peer_may = b.For(std::string(current_peer), now)
                              .Take(now, kWarningBurstPerPeer, std::chrono::seconds(kWarningPeerRefillSeconds));
    if (!peer_may || !b.overall.Take(now, kWarningBurst, std::chrono::seconds(1))) {
      ++b.held_back;
      detail::CountSuppressed(1);
      return;
    }
  }
  std::string prefix = "gt:" + std::string(source) + " ";
  if (!current_peer.empty()) prefix += "(peer " + std::string(current_peer) + ") ";
  detail::WriteLine(prefix, line);
}

WarningPeer::WarningPeer(std::string_view peer) : previous_(current_peer) { current_peer = peer; }
WarningPeer::~WarningPeer() { current_peer = previous_; }

int64_t SuppressedLines() { return sinks().total.load(std::memory_order_relaxed); }

SuppressedSink::SuppressedSink(Callback callback, void* context) : callback_(callback), context_(context) {
  std::lock_guard<std::mutex> lock(sinks().mu);
  sinks().list.emplace_back(callback_, context_);
}

SuppressedSink::~SuppressedSink() {
  std::lock_guard<std::mutex> lock(sinks().mu);
  auto& list = sinks().list;
  list.erase(std::find(list.begin(), list.end(), std::make_pair(callback_, context_)));
}

void RouteProtobufLog() {
  static std::once_flag once;
  std::call_once(once, [] { google::protobuf::SetLogHandler(&ProtobufToWarn); });
}

namespace detail {
void CountSuppressed(int64_t n) {
  Sinks& s = sinks();
  s.total.fetch_add(n, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(s.mu);
  for (const auto& [callback, context] : s.list) callback(context, n);
}
}  // namespace detail

}  // namespace gt::log
