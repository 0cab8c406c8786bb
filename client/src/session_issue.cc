// The session's instruction stream: issuing ops (shape inference here, so a
// shape error is raised at the line that caused it), the client's own stages,
// the batch being filled and its sending, frees, inspects. Syncs and replies
// are in session_sync.cc; connection setup in session.cc.
#include "session.h"

#include <algorithm>
#include <limits>

#include "gt/log.h"
#include "gt/op_attrs.h"
#include "ir/codec.h"
#include "net/transport.h"

namespace gt::client_internal {
namespace {

// Instructions per message: large enough to amortize a message, small enough
// that workers start on a long stream before it is all queued.
constexpr int kBatchInstructions = 256;
// A program that never reads a result would grow the dispatcher's and the
// workers' queues without bound (and meet the dispatcher's max_inflight
// quota): past this many instructions without a sync the client waits for
// one, as backpressure. Far below the default quota, so that sharding's
// several instructions per op stay under it too.
constexpr int64_t kSyncWindow = 32768;
// At most this many tensors in one free (a run of frees is held until the next
// other instruction; this bounds one instruction's size).
constexpr size_t kFreesPerInstruction = 1024;
constexpr size_t kBatchPayloadBytes = 4 << 20;
// The first op since a sync point with at least this much work (RoughWork)
// is sent at once with what is queued before it, so that the worker, idle
// since that sync, starts on it while the client issues the rest: a
// training step that syncs every step otherwise sends everything at its
// sync, and the worker waits for the whole step to be issued. A million
// multiply-adds take 100 us or more of a core, far more than a message
// costs; later heavy ops wait for the batch as before (the worker has work
// then, and each message costs the client and the dispatcher CPU that a
// 2-core machine takes from the kernels).
constexpr int64_t kSendNowWork = int64_t{1} << 20;

// Roughly how many element operations `op` takes: a matmul's result
// elements times its inner dimension, any other op's largest operand or
// result. Only compared with kSendNowWork; saturates instead of overflowing.
int64_t RoughWork(const Instruction& inst, const std::vector<const TensorMeta*>& operands, const TensorMeta& result) {
  int64_t work = NumElements(result.shape);
  for (const TensorMeta* m : operands) work = std::max(work, NumElements(m->shape));
  if (inst.op == Op::kMatmul && !operands.empty() && !operands[0]->shape.empty() &&
      __builtin_mul_overflow(NumElements(result.shape), operands[0]->shape.back(), &work))
    work = std::numeric_limits<int64_t>::max();
  return work;
}

}  // namespace

std::shared_ptr<TensorRecord> Session::Issue(Instruction inst, const std::vector<const TensorRecord*>& operands) {
  std::vector<const TensorMeta*> metas;
  metas.reserve(operands.size());
  inst.operands.reserve(operands.size());
  for (const TensorRecord* r : operands) {
    if (r == nullptr) throw Error(Code::kInvalidArgument, std::string(OpName(inst.op)) + ": operand is an undefined tensor");
    metas.push_back(&r->meta);
    inst.operands.push_back(r->id);
  }
  Result<TensorMeta> meta = InferResult(inst, metas);
  if (!meta.ok()) throw Error(meta.status().code(), meta.status().message());
  const bool heavy = RoughWork(inst, metas, *meta) >= kSendNowWork;
  LoadEnvConfigOnce();
  Origin origin = NoteOrigin(inst.op, inst.signal);
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  auto record = std::make_shared<TensorRecord>();
  record->id = next_id_++;
  record->meta = std::move(*meta);
  inst.results = {record->id};
  inst.seq = next_seq_++;
  if (!origin.op.empty()) origins_[inst.seq] = std::move(origin);
  if (inst.op == Op::kRedistribute && !placing_) {
    // Its result has a placement record at the dispatcher: from now on every
    // op must reach the sharding stage as itself, not inside a unit.
    if (pipeline_) pipeline_->Drain();
    placing_ = true;
  }
  if (resume_) resume_->Made(record->id, record->meta, inst.seq);
  QueueLocked(std::move(inst));
  // (The client's own stages, when it runs them, decide what to send.)
  if (heavy && !sent_early_ && (!pipeline_ || placing_)) {
    SendBatchLocked();
    sent_early_ = true;
  }
  // Only once queued: a record dropped by a throw above must not free its
  // id (its destructor would take mu_, held here).
  record->session = shared_from_this();
  return record;
}

void Session::Mutate(Instruction inst, const std::vector<const TensorRecord*>& operands) {
  for (const TensorRecord* r : operands) {
    if (r == nullptr) throw Error(Code::kInvalidArgument, std::string(OpName(inst.op)) + ": undefined tensor");
    inst.operands.push_back(r->id);
  }
  if (inst.op == Op::kCopyInto || inst.op == Op::kMulInto || inst.op == Op::kAddInto) {
    const Shape& to = operands[0]->meta.shape;
    const Shape& from = operands[1]->meta.shape;
    Result<Shape> shape = BroadcastShapes(to, from);
    const char* what = inst.op == Op::kCopyInto ? "copy_: source" : inst.op == Op::kMulInto ? "mul_: factor" : "add_: addend";
    if (!shape.ok() || *shape != to)
      throw Error(Code::kInvalidArgument, std::string(what) + " of shape " + ShapeToString(from) +
                                              " does not broadcast to destination " + ShapeToString(to));
  }
  Origin origin = NoteOrigin(inst.op, inst.signal);
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  inst.seq = next_seq_++;
  if (!origin.op.empty()) origins_[inst.seq] = std::move(origin);
  QueueLocked(std::move(inst));
}

void Session::Marker(Op op, const std::string& signal) {
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  if (compile_scopes_eager_) return;
  if (op == Op::kHotStart) FlushLocked();
  // A compile scope: no sequence id.
  Instruction marker = MakeHotMarker(op, HotMarker{.required = compile_scopes_required_});
  marker.seq = next_seq_++;
  marker.signal = signal;
  QueueLocked(std::move(marker));
}

void Session::QueueLocked(Instruction&& inst) {
  QueueFreesLocked();
  if (unsynced_ >= kSyncWindow) SyncLocked(0, nullptr, /*keep_errors=*/true);
  if (pipeline_ && !placing_) pipeline_->Push(std::move(inst));
  else AppendLocked(inst);
  if (batch_.instructions_size() >= kBatchInstructions || payload_bytes_ >= kBatchPayloadBytes) SendBatchLocked();
}

void Session::AppendLocked(const Instruction& inst) {
  if (batch_.instructions_size() == 0) batch_.set_kind(wire::Envelope::BATCH);
  EncodeInstruction(inst, batch_.add_instructions(), &payloads_);
  if (resume_) resume_->Emitted(inst);
  if (inst.payload) payload_bytes_ += inst.payload->size();
  ++unsynced_;
}

void Session::QueueFreesLocked() {
  if (!pending_free_) return;
  Instruction run = std::move(*pending_free_);
  pending_free_.reset();
  QueueLocked(std::move(run));
}

void Session::FlushLocked() {
  QueueFreesLocked();
  if (pipeline_) pipeline_->Drain();
  SendBatchLocked();
}

void Session::SendBatchLocked() {
  if (batch_.instructions_size() == 0) return;
  const int instructions = batch_.instructions_size();
  Result<size_t> sent(0);
  if (resume_) {  // kept until a sync answers it; the copy sent is the one kept
    resume_->Keep(std::move(batch_), std::move(payloads_));
    batch_ = wire::Envelope();
    payloads_.clear();
    sent = SendEnvelope(*socket_, "", resume_->Last().envelope, resume_->Last().frames);
  } else {
    sent = SendEnvelope(*socket_, "", batch_, payloads_);
    batch_.Clear();
    payloads_.clear();
  }
  GT_LOG(kClient, "sent a batch of " << instructions << " instructions ("
                                     << (sent.ok() ? std::to_string(*sent) + " bytes" : sent.status().ToString()) << ")");
  payload_bytes_ = 0;
  if (sent.ok()) return;
  if (watch_) {
    watch_->Drain();
    // A resumed session has had this batch sent again, with those before it.
    if (Status s = watch_->Check(ConnectionWatch::Clock::now()); !s.ok()) return ConnectionLostLocked(s);
  }
  throw Error(sent.status().code(), "gt: cannot reach the dispatcher: " + sent.status().message());
}

void Session::Free(TensorId id) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_ || closed_) return;
    if (resume_) resume_->Freed(id);
    if (pending_free_ && pending_free_->operands.size() < kFreesPerInstruction) {
      pending_free_->operands.push_back(id);
      return;
    }
    QueueFreesLocked();
    pending_free_ = MakeFree(0, next_seq_++, {id});
  } catch (...) {
    // A free that cannot be sent is reclaimed when the session ends.
  }
}

void Session::SettleTogether(const std::vector<const TensorRecord*>& tensors) {
  if (tensors.size() < 2) return;  // one alone is summed when it is first needed, just as well
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  if (!placing_) return;
  Instruction settle;
  settle.op = Op::kSettle;
  for (const TensorRecord* t : tensors) settle.operands.push_back(t->id);
  settle.seq = next_seq_++;
  QueueLocked(std::move(settle));
}

bool Session::Places() {
  std::lock_guard<std::mutex> lock(mu_);
  return placing_;
}

FetchedData Session::Inspect(Instruction inst, const TensorRecord* operand) {
  if (operand) inst.operands = {operand->id};
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  inst.seq = next_seq_++;
  const uint64_t seq = inst.seq;
  const Result<InspectMode> request = ReadInspect(inst);
  const bool start = request.ok() && *request == InspectMode::kStartRecording;
  if (pipeline_) pipeline_->Drain();
  if (start) {
    origins_.clear();
    recording_ = true;
  }
  QueueLocked(std::move(inst));
  FetchedData data;
  if (start) return data;
  if (request.ok() && *request == InspectMode::kStopRecording) recording_ = false;
  SyncLocked(seq, &data);
  return data;
}

Session::Origin Session::OriginOf(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = origins_.find(seq);
  return it == origins_.end() ? Origin{} : it->second;
}

void Session::SetSourceHook(std::function<std::string()> hook) {
  std::lock_guard<std::mutex> lock(hook_mu_);
  source_hook_ = std::move(hook);
}

Session::Origin Session::NoteOrigin(Op op, const std::string& signal) {
  if (!recording_.load(std::memory_order_relaxed)) return {};
  Origin origin{std::string(OpName(op)), signal, "", client_internal::InBackward()};
  std::function<std::string()> hook;
  {
    std::lock_guard<std::mutex> lock(hook_mu_);
    hook = source_hook_;
  }
  try {
    if (hook) origin.source = hook();
  } catch (...) {  // a report without its source line rather than a failed op
  }
  return origin;
}

}  // namespace gt::client_internal
