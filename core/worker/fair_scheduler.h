// The worker's scheduler: takes the decoded instructions of each BATCH into
// the fair queue (fair_queue.h) and runs them, one client's turn at a time,
// through the worker's pipeline, metering each client (client_meter.h).
//
// A turn serves one lane until it empties, its head must wait (a collective
// behind an older one), or it has run for kSlice; then the pipeline's
// EndBatch. A single instruction is never cut short, so another client
// waits for at most the instruction in progress plus what is left of the
// slice. The turn's measured time is charged to the lane.
//
// The compute quota (the dispatcher's limits.max_compute_seconds_per_minute,
// told in each ClientShare, host/fair_share_wire.h) is kept here, per worker: while a client used
// that much on this worker in the last minute (ComputeWindow), its turns
// refuse its computing instructions with resource_exhausted naming the
// limit (QuotaRefusal). Frees, syncs, fetches, markers and collectives are
// never refused (a collective's peers wait for it).
//
// Thread-safety: the pipeline thread only, except queued(), which any
// thread may read (the I/O thread puts it in heartbeats).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include <prometheus/registry.h>

#include "host/fair_share_wire.h"
#include "host/pipeline.h"
#include "gt/metrics.h"
#include "worker/client_meter.h"
#include "worker/compute_window.h"
#include "worker/fair_queue.h"

namespace gt {

class FairScheduler {
 public:
  // Long enough that a client's instructions run in runs (a turn costs a
  // clock reading per instruction and one EndBatch), short enough that a
  // light client behind a flood of tiny ops waits about a millisecond.
  static constexpr std::chrono::microseconds kSlice{2000};

  // REQUIRES: `pipeline` and `registry` outlive this object.
  // How a refused instruction is answered (the worker terminal records its
  // results as failed and the error for the client's next sync).
  using Refuse = std::function<void(const Instruction& inst, const Status& why)>;

  // REQUIRES: `pipeline` and `registry` outlive this object.
  FairScheduler(Pipeline& pipeline, prometheus::Registry& registry, const std::string& instance, Refuse refuse);

  // The dispatcher's word on a client: its weight, metrics label and
  // compute quota. REQUIRES: share.weight > 0 (SharesIn checked it).
  void SetShare(const ClientShare& share);
  // Queues `inst` behind its client's earlier instructions.
  void Push(Instruction&& inst);
  // Runs one client's turn, if any instruction can run.
  void RunTurn();
  // Where the bytes each client holds are read after its turns
  // (gt_worker_client_bytes_held); unset: not metered. Pipeline thread.
  using BytesHeld = std::function<uint64_t(ClientId client)>;
  void SetBytesHeld(BytesHeld bytes_held) { bytes_held_ = std::move(bytes_held); }
  // Tensor bytes a client moved in or out (metering only).
  void CountBytesMoved(ClientId client, uint64_t bytes) { meter_.AddBytesMoved(client, bytes); }

  bool empty() const { return queue_.empty(); }
  // Instructions of `client` waiting (a rejoining worker's inventory).
  size_t Waiting(ClientId client) const { return queue_.Waiting(client); }
  // Instructions waiting, as of the last Push or turn. Any thread.
  uint64_t queued() const { return queued_.load(std::memory_order_relaxed); }
  // The most instructions that waited at once since the last call (at least
  // those waiting now). The load a heartbeat reports: the instant count reads
  // zero whenever a busy client is between rounds, which sent new clients to
  // the busy worker. Any one thread (the heartbeat's).
  uint64_t TakePeakQueued();

 private:
  void Publish();
  // Refuses the computing instructions of `lane`'s turn (the others run).
  void RunRefusing(FairQueue::Lane& lane, double used);

  // A client's compute quota and what it used here in the last minute.
  struct Budget {
    double limit = 0;  // seconds per minute; 0: none
    ComputeWindow used;
  };

  Pipeline& pipeline_;
  FairQueue queue_;
  ClientMeter meter_;
  const std::string instance_;
  Refuse refuse_;
  BytesHeld bytes_held_;
  QuotaMetrics compute_quota_;
  std::unordered_map<ClientId, Budget> budgets_;  // clients with a quota only
  std::atomic<uint64_t> queued_{0};
  std::atomic<uint64_t> peak_queued_{0};
};

}  // namespace gt
