// The dispatcher's per-peer outboxes: every message it sends leaves through
// here, onto its ROUTER socket, counted in the host metrics and recorded as
// a host event.
//
// Each peer's queue on the socket holds kQueueMessages messages. A worker's
// fills only in a burst its I/O thread has not drained yet: the message is
// held here, in order, and SendHeld() sends it when there is room. A client
// that leaves kQueueMessages replies unread reads none: it is marked unread
// (TakeUnread, for the dispatcher to drop after this pass), and nothing
// more is queued for it. Unbounded, a peer that never reads (a raw client
// sending STATS or fetches) would grow the shared dispatcher's memory until
// the machine killed it.
//
// Thread-safety: the thread that owns the socket (the dispatcher's Run()).
#pragma once

#include <cstddef>
#include <deque>
#include <string_view>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <zmq.hpp>

#include "dispatcher/client_table.h"
#include "dispatcher/dispatcher_events.h"
#include "dispatcher/worker_registry.h"
#include "gt/status.h"
#include "host/host_metrics.h"
#include "net/peer_sender.h"
#include "wire.pb.h"

namespace gt {

// Why a peer's session ended when it said BYE: a goodbye is not reported as
// a loss.
inline constexpr std::string_view kGoodbye = "said goodbye";

class PeerOutbox final : public PeerSender {
 public:
  // Messages queued toward one peer before it counts as not reading
  // (ZeroMQ's own default): the socket's send high-water mark. A client
  // that reads holds at most one sync's replies.
  static constexpr int kQueueMessages = 1000;

  // REQUIRES: every argument outlives this object; `socket` is a ROUTER
  // with router_mandatory set and sndhwm == kQueueMessages.
  PeerOutbox(zmq::socket_t& socket, std::string host_id, HostMetrics& metrics, const WorkerRegistry& workers,
             ClientTable& clients, const DispatcherEvents& events)
      : socket_(socket), host_id_(std::move(host_id)), metrics_(metrics), workers_(workers), clients_(clients),
        events_(events) {}

  // PeerSender. True when the message was sent or is held for a worker;
  // false when its peer is gone or is a client whose queue is full.
  bool Send(const std::string& route, const wire::Envelope& env, const std::vector<BlobPtr>& frames) override;

  // An ERROR envelope carrying `status` to the peer at `route` (none for an
  // empty route).
  void SendError(const std::string& route, const Status& status);
  // A message from `route` this dispatcher refuses: counted as malformed,
  // and the peer told why, naming this dispatcher.
  void Reject(const std::string& route, const Status& status);

  // Sends each held queue in order, until one is full again.
  void SendHeld();
  bool has_held() const { return !held_.empty(); }
  // Drops what is held for `route` (its worker is lost).
  void Forget(const std::string& route) { held_.erase(route); }
  bool has_unread() const { return !unread_.empty(); }
  // The clients marked unread since the last call.
  std::unordered_set<ClientId> TakeUnread() { return std::exchange(unread_, {}); }

 private:
  struct HeldMessage {
    wire::Envelope env;
    std::vector<BlobPtr> frames;
  };

  void CountSent(const std::string& route, const wire::Envelope& env, size_t bytes);
  bool QueueFull(const std::string& route, const wire::Envelope& env, const std::vector<BlobPtr>& frames);

  zmq::socket_t& socket_;
  const std::string host_id_;
  HostMetrics& metrics_;
  const WorkerRegistry& workers_;
  ClientTable& clients_;
  const DispatcherEvents& events_;
  std::unordered_map<std::string, std::deque<HeldMessage>> held_;  // by route: to workers whose queue was full
  std::unordered_set<ClientId> unread_;  // clients whose queue was full in this pass
};

}  // namespace gt
