// Sync points: a client's kSync is answered (SYNC_DONE) once every worker
// that received the client's instructions since its previous sync has
// acknowledged it, carrying every error of those instructions; a worker
// lost meanwhile counts as an answer with an `unavailable` error. Answers go
// out in the order the client asked.
//
// Thread-safety: owned by the dispatcher's thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dispatcher/client_table.h"
#include "net/peer_sender.h"
#include "dispatcher/worker_registry.h"

namespace gt {

class SyncTracker {
 public:
  // `host_id` names the dispatcher in the errors it adds.
  SyncTracker(WorkerRegistry& workers, PeerSender& sender, std::string host_id)
      : workers_(workers), sender_(sender), host_id_(std::move(host_id)) {}

  // Sends `sync` to every live worker `c` touched since its last sync and
  // waits for them (answers at once when there are none).
  void Begin(ClientState& c, const Instruction& sync);
  // Worker `w` acknowledged one of `c`'s syncs.
  void OnAck(ClientState& c, size_t w, const wire::Envelope& ack);
  // Worker `w` will never answer: the first of `c`'s syncs waiting on it
  // fails with `message` (the others with a short note), or, when none
  // waits and `report_anyway`, the next one does.
  void OnWorkerLost(ClientState& c, size_t w, const std::string& message, bool report_anyway);
  // Sends `c` an answer the dispatcher makes itself (an inspect's, from
  // the router): it leaves at once, so it reaches the client before the
  // answer to any sync the client sent after the query, as a worker's DATA
  // does.
  void Reply(ClientState& c, const wire::Envelope& env, const std::vector<BlobPtr>& frames) {
    (void)sender_.Send(c.route, env, frames);
  }
  // Whether a sync began or was answered since the last call: a reply, or
  // the client's next batch, is then probably near (Dispatcher's busy wait).
  bool TakeActivity() { return std::exchange(active_, false); }

 private:
  void CompleteReady(ClientState& c);

  WorkerRegistry& workers_;
  PeerSender& sender_;
  std::string host_id_;
  bool active_ = false;
};

}  // namespace gt
