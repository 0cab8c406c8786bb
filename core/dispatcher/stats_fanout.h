// A client's STATS request: the dispatcher's own metrics snapshot plus one
// from every live worker, gathered by asking the workers and answering the
// client when the last one replies, a worker is lost, or the request's
// deadline passes (those workers are listed as missing), so that a dead or
// slow worker delays the answer by a bounded time, never forever.
// (wire.proto, "Stats".)
//
// Thread-safety: owned by the dispatcher's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "net/peer_sender.h"
#include "dispatcher/worker_registry.h"

namespace gt {

class StatsFanout {
 public:
  using Clock = std::chrono::steady_clock;
  // The dispatcher's own snapshot, taken when a request arrives.
  using OwnSnapshot = std::function<wire::HostSnapshot()>;

  // How long a request waits for workers when the client names no timeout,
  // and the most it may name.
  static constexpr uint32_t kDefaultTimeoutMs = 2000;
  static constexpr uint32_t kMaxTimeoutMs = 60000;

  StatsFanout(WorkerRegistry& workers, PeerSender& sender, OwnSnapshot own)
      : workers_(workers), sender_(sender), own_(std::move(own)) {}

  // A client's STATS request arrived under `client_route`.
  void Begin(const std::string& client_route, const wire::Envelope& request);
  // Worker `w`'s STATS_REPLY.
  void OnReply(size_t w, const wire::Envelope& reply);
  // Worker `w` will not answer.
  void OnWorkerLost(size_t w);
  // Answers the requests whose deadline has passed.
  void Expire(Clock::time_point now);

 private:
  struct Pending {
    std::string client_route;
    std::set<size_t> waiting;  // worker indexes that have not answered
    Clock::time_point deadline;
    wire::Envelope reply;                          // STATS_REPLY: own snapshot, missing workers
    std::map<size_t, wire::HostSnapshot> answers;  // by worker index: replied in registration order
  };
  using Iterator = std::map<uint64_t, Pending>::iterator;
  Iterator Answer(Iterator it);

  WorkerRegistry& workers_;
  PeerSender& sender_;
  OwnSnapshot own_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Pending> pending_;  // by the request id sent to workers
};

}  // namespace gt
