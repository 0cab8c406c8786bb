// The worker's terminal: where each instruction that passed the worker's
// stages is run, by the backend plugin, on the pipeline thread.
//
// It keeps, per client namespace, the tensors that a failed op should have
// made (a later use fails naming that op), the collectives that failed here
// (their groups broke), and the errors waiting for the client's next kSync,
// which it acknowledges with a SYNC_ACK carrying them. The backend answers
// fetches through this object (ReplySink): DATA messages on the work
// connection.
//
// Thread-safety: none; the pipeline thread only (the thread that owns the
// work connection).
#pragma once

#include <array>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gt/backend.h"
#include "gt/failed_tensors.h"
#include "gt/instruction.h"
#include "host/host_events.h"
#include "host/host_metrics.h"
#include "host/pipeline.h"
#include "host/plugin_loader.h"
#include "wire.pb.h"

namespace gt {

class WorkerTerminal final : public Terminal, public ReplySink {
 public:
  // Sends a reply to the dispatcher on the work connection.
  using Reply = std::function<void(const wire::Envelope& env, const std::vector<BlobPtr>& frames)>;

  // REQUIRES: `metrics` outlives this object.
  WorkerTerminal(std::string host_id, PluginInstance<Backend> backend, HostMetrics& metrics)
      : host_id_(std::move(host_id)), backend_(std::move(backend)), metrics_(metrics) {}

  // OK when the backend implements every op a worker's terminal can receive
  // (OpReachesBackend); else Unimplemented naming the ops it lacks, which
  // it would fail for every client at run time. `what` names the manifest
  // and plugin in the message.
  Status CheckSupportsEveryOp(const std::string& what) const;

  // Where replies go, and the stages' host event sinks. REQUIRES: called
  // before the first Accept; `events` outlives this object.
  void Connect(Reply reply, const HostEvents* events) {
    reply_ = std::move(reply);
    events_ = events;
  }

  // Terminal.
  Status Accept(Instruction inst) override;
  void EndBatch() override { PublishMetrics(); }

  // ReplySink: a DATA message for `request`'s client.
  void SendData(const Instruction& request, DType dtype, const Shape& shape, BlobPtr bytes) override;

  // An error of client `ref.client`'s instruction, sent with the
  // acknowledgement of its next sync (logged when it names no client). The
  // pipeline's error sink.
  void RecordError(const OpRef& ref, const Status& status);

  // Answers `inst` with `why` without running it (a quota refused it): its
  // results are recorded as failed (a later use names it), a kRunUnit's
  // consumed operands are freed, and the error waits for the next sync.
  void Refuse(const Instruction& inst, const Status& why);

  // What the backend holds for `client` (Backend::ClientBytes).
  uint64_t ClientBytes(ClientId client) const { return backend_->ClientBytes(client); }

  // Whether a sync was acknowledged since the last call: the client's next
  // batch is probably near.
  bool TakeAcknowledgedSync() { return std::exchange(acknowledged_sync_, false); }

  // Every tensor the backend holds (a rejoining worker's inventory).
  std::vector<HeldTensor> Held() const { return backend_->Held(); }

 private:
  void PublishMetrics();
  void ReleaseConsumed(const Instruction& run, FailedTensors& failed);
  void RecordDone(const Instruction& inst, double seconds, const Status& status);
  Status FreeSkippingFailed(const Instruction& inst, FailedTensors& failed);
  Status AcknowledgeSync(const Instruction& inst);

  const std::string host_id_;
  PluginInstance<Backend> backend_;
  HostMetrics& metrics_;
  Reply reply_;
  const HostEvents* events_ = nullptr;
  bool acknowledged_sync_ = false;
  // Backend times not yet in gt_backend_op_seconds (added with the gauges).
  std::array<HistogramTally, static_cast<size_t>(Op::kCount)> op_seconds_;
  // Per client namespace: what failed, the seqs of collectives that failed
  // here (their groups broke), and the errors until the next sync.
  std::unordered_map<ClientId, FailedTensors> failed_;
  std::unordered_map<ClientId, std::unordered_set<uint64_t>> failed_collectives_;
  std::unordered_map<ClientId, std::vector<wire::OpError>> errors_;
};

}  // namespace gt
