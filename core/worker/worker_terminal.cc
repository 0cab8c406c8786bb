#include "worker/worker_terminal.h"

#include <chrono>
#include <iostream>
#include <optional>

#include "gt/log.h"
#include "gt/op_attrs.h"
#include "gt/unit.h"
#include "ir/codec.h"

namespace gt {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

Status WorkerTerminal::CheckSupportsEveryOp(const std::string& what) const {
  std::string missing;
  for (size_t i = 0; i < static_cast<size_t>(Op::kCount); ++i) {
    const Op op = static_cast<Op>(i);
    if (OpReachesBackend(op) && !backend_->Supports(op)) missing += (missing.empty() ? "" : ", ") + std::string(OpName(op));
  }
  if (missing.empty()) return Status::Ok();
  return Unimplemented(what + " lacks ops a worker must run: " + missing);
}

Status WorkerTerminal::Accept(Instruction inst) {
  // A client reads metrics after its sync points: they must include its work.
  if (inst.op == Op::kSync || inst.op == Op::kFetch) PublishMetrics();
  if (inst.op == Op::kSync) return AcknowledgeSync(inst);
  if (inst.op == Op::kDropClient) {
    failed_.erase(inst.client);
    failed_collectives_.erase(inst.client);
    errors_.erase(inst.client);
    return backend_->Execute(inst, *this);
  }
  FailedTensors& failed = failed_[inst.client];
  if (inst.op == Op::kFree) return FreeSkippingFailed(inst, failed);
  // A use of what a failed op should have made fails too, naming that op
  // (its results inherit it: the error names the root cause).
  if (std::optional<FailedTensors::Use> use = failed.FindFailedOperand(inst)) {
    failed.RecordResults(inst, use->failed_seq);
    if (inst.op == Op::kRunUnit) ReleaseConsumed(inst, failed);
    // The other members of a collective are waiting for this one: the
    // backend takes part with a stand-in for the missing operand. Not when
    // what failed first was a collective: its group broke (a member was
    // lost), the others fail alike, and forming it again would wait on a
    // member that is gone.
    if (KindOf(inst.op) == OpKind::kCollective && !failed_collectives_[inst.client].count(use->failed_seq))
      (void)backend_->Execute(inst, *this);
    return FailedTensors::UseError(inst, *use);
  }
  Clock::time_point start = Clock::now();
  Status status = backend_->Execute(inst, *this);
  const double seconds = SecondsSince(start);
  op_seconds_[static_cast<size_t>(inst.op)].Observe(seconds);
  GT_LOG(kWorker, host_id_ << ": ran " << OpName(inst.op) << " #" << inst.seq << " of client " << inst.client << " in "
                           << seconds * 1e3 << " ms" << (status.ok() ? "" : " (failed)"));
  if (!status.ok()) {
    failed.RecordResults(inst, inst.seq);
    if (KindOf(inst.op) == OpKind::kCollective) failed_collectives_[inst.client].insert(inst.seq);
    // Whatever refused it (a quota, a mismatched interface, an unknown
    // unit), the client and the dispatcher have forgotten its inputs: kept
    // here, they would be held for good and escape the client's quotas.
    if (inst.op == Op::kRunUnit) ReleaseConsumed(inst, failed);
  }
  if (events_ && events_->enabled()) RecordDone(inst, seconds, status);
  return status;
}

// Gauges, and the backend times gathered since the last call.
void WorkerTerminal::PublishMetrics() {
  BackendStats stats = backend_->Stats();
  metrics_.live_tensors.Set(static_cast<double>(stats.live_tensors));
  metrics_.resident_bytes.Set(static_cast<double>(stats.resident_bytes));
  for (size_t op = 0; op < op_seconds_.size(); ++op) op_seconds_[op].FlushTo(metrics_.OpSeconds(static_cast<Op>(op)));
}

void WorkerTerminal::SendData(const Instruction& request, DType dtype, const Shape& shape, BlobPtr bytes) {
  wire::Envelope env;
  env.set_kind(wire::Envelope::DATA);
  env.set_client(request.client);
  env.set_seq(request.seq);
  if (!request.operands.empty()) env.set_tensor(request.operands[0]);
  env.set_dtype(static_cast<uint32_t>(dtype));
  env.mutable_shape()->Add(shape.begin(), shape.end());
  reply_(env, {std::move(bytes)});
}

// A kRunUnit that cannot run still frees the operands it would have freed
// (the dispatcher has forgotten them already).
void WorkerTerminal::ReleaseConsumed(const Instruction& run, FailedTensors& failed) {
  (void)FreeSkippingFailed(MakeFree(run.client, run.seq, ConsumedOperands(run)), failed);
}

// WORKER_DONE (gt/host_event.h): the backend ran `inst` in `seconds`.
void WorkerTerminal::RecordDone(const Instruction& inst, double seconds, const Status& status) {
  const std::string peer = "client " + std::to_string(inst.client);
  const std::string detail = status.ok() ? "status=ok" : "status=failed " + status.ToString();
  HostEvent event{HostEventKind::kWorkerDone, peer, &inst};
  event.seconds = seconds;
  event.detail = detail;
  events_->Emit(event);
}

Status WorkerTerminal::FreeSkippingFailed(const Instruction& inst, FailedTensors& failed) {
  // The common case, nothing of the client's failed: the free goes as it came, uncopied.
  if (failed.empty()) return backend_->Execute(inst, *this);
  Instruction live = inst;
  live.operands.clear();
  for (TensorId id : inst.operands)
    if (!failed.Forget(id)) live.operands.push_back(id);
  if (live.operands.empty()) return Status::Ok();
  return backend_->Execute(live, *this);
}

Status WorkerTerminal::AcknowledgeSync(const Instruction& inst) {
  wire::Envelope ack;
  ack.set_kind(wire::Envelope::SYNC_ACK);
  ack.set_client(inst.client);
  ack.set_sync_id(SyncId(inst));
  if (auto it = errors_.find(inst.client); it != errors_.end()) {
    for (auto& e : it->second) *ack.add_errors() = std::move(e);
    errors_.erase(it);
  }
  reply_(ack, {});
  acknowledged_sync_ = true;
  return Status::Ok();
}

void WorkerTerminal::Refuse(const Instruction& inst, const Status& why) {
  FailedTensors& failed = failed_[inst.client];
  failed.RecordResults(inst, inst.seq);
  if (inst.op == Op::kRunUnit) ReleaseConsumed(inst, failed);
  RecordError(RefOf(inst), why);
}

void WorkerTerminal::RecordError(const OpRef& ref, const Status& status) {
  GT_LOG(kWorker, host_id_ << ": error " << status.ToString());
  if (ref.client == 0) {  // not about any client's instruction (e.g. a stage's end of batch)
    std::cerr << "worker " << host_id_ << ": " << status.ToString() << "\n";
    return;
  }
  errors_[ref.client].push_back(MakeOpError(ref, status, host_id_));
}

}  // namespace gt
