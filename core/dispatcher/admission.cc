#include "dispatcher/admission.h"

#include <string>

#include "gt/instruction_errors.h"
#include "gt/op_attrs.h"
#include "gt/unit.h"

namespace gt {
namespace {

// Held back by the quotas they would never help to keep.
bool Refusable(Op op) {
  switch (op) {
    case Op::kFree:
    case Op::kSync:
    case Op::kHotStart:
    case Op::kHotEnd:
    case Op::kConfigure:
      return false;
    default:
      return true;
  }
}

// Past this many syncs on their way to the router, the oldest marks go:
// a flood of syncs cannot grow the books without bound.
constexpr size_t kMaxSyncMarks = 4096;

}  // namespace

Status Admission::Admit(ClientState& c, const Instruction& inst) {
  Status s = CheckSender(inst);
  if (s.ok()) s = CheckQuota(c, inst);
  if (!s.ok()) {
    c.failed.RecordResults(inst, inst.seq);
    return s;
  }
  Count(c, inst);
  return Status::Ok();
}

// The dispatcher's own kDropClient and kMembership (which would tell the
// stages which workers live, or name lost tensors), collectives (the
// sharding stage's, naming a rendezvous the workers connect to), a worker of
// its choosing, and hot sequence ids on markers (those are the hotpath
// stage's; a client marks compile scopes with id 0, and the compile stage
// replays a region marked with an id by ops and wiring alone).
Status Admission::CheckSender(const Instruction& inst) {
  if (!ClientMaySend(inst.op)) return InvalidArgument(std::string(OpName(inst.op)) + " is reserved for the dispatcher");
  if (inst.worker >= 0) return Invalid(inst, "a client may not place instructions on workers");
  if ((inst.op == Op::kHotStart || inst.op == Op::kHotEnd) && MarksHotSequence(inst))
    return Invalid(inst, "a client's markers carry no sequence id");
  if (inst.op == Op::kDefineUnit && inst.payload) return CheckUnitBody(inst);
  return CheckArity(inst);
}

// The counts the stages index without looking (a tensor op's result, a
// mutation's destination and source, what a fetch reads): found wrong by the
// dispatcher fuzzer, they read past the end of a list in the sharding stage.
Status Admission::CheckArity(const Instruction& inst) {
  if (ProducesTensor(inst.op) && inst.results.size() != 1)
    return Invalid(inst, "expected exactly one result id, got " +
                           std::to_string(inst.results.size()));
  const bool pair = inst.op == Op::kCopyInto || inst.op == Op::kMulInto || inst.op == Op::kAddInto;
  const size_t operands = pair ? 2 : inst.op == Op::kAdamStep ? 4 : 1;
  const bool fixed = pair || inst.op == Op::kFill || inst.op == Op::kFetch ||
                     inst.op == Op::kAdamStep || inst.op == Op::kRedistribute;
  if (inst.op == Op::kSettle && !inst.results.empty())
    return Invalid(inst, "settle makes no tensor");
  if (KindOf(inst.op) == OpKind::kMutate && !inst.results.empty())
    return Invalid(inst, std::string(OpName(inst.op)) + " changes its first operand and makes no tensor");
  if (inst.op == Op::kInspect && !inst.results.empty())
    return Invalid(inst, "inspect makes no tensor");
  if (inst.op == Op::kInspect) {
    Result<InspectMode> mode = ReadInspect(inst);
    if (!mode.ok()) return mode.status();
    const bool layout = *mode == InspectMode::kLayout;
    if (inst.operands.size() != (layout ? 1u : 0u))
      return Invalid(inst, "inspect " + std::to_string(static_cast<int>(*mode)) + " takes " +
                               (layout ? "one operand" : "no operand"));
    // The answer is the dispatcher's to set (gt/op_attrs.h): never a client's.
    if (InspectAnswer(inst)) return Invalid(inst, "an inspect carries no payload");
  }
  if (fixed && inst.operands.size() != operands)
    return Invalid(inst, "expected " + std::to_string(operands) + " operand(s), got " +
                           std::to_string(inst.operands.size()));
  return Status::Ok();
}

// A unit's body runs on a worker as it stands: the same rules, per body
// instruction (a malformed template is left to the router's error).
Status Admission::CheckUnitBody(const Instruction& define) {
  Result<UnitTemplate> unit = DecodeUnit(*define.payload);
  if (!unit.ok()) return Status::Ok();
  for (const Instruction& body : unit->body)
    if (!ClientMaySend(body.op) || body.worker >= 0)
      return Invalid(define, "its body holds " + body.Describe() +
                             ", which a client may not send");
  return Status::Ok();
}

// One client may not hold the workers' memory or queues for everyone: past
// a quota its instructions are refused until it frees tensors or syncs.
Status Admission::CheckQuota(const ClientState& c, const Instruction& inst) const {
  if (!Refusable(inst.op)) return Status::Ok();
  const int64_t inflight = static_cast<int64_t>(c.admitted - c.answered);
  if (limits_.max_inflight > 0 && inflight >= limits_.max_inflight) {
    if (inflight_quota_.refusals) inflight_quota_.refusals->Increment();
    return QuotaRefusal(inst, "has " + std::to_string(inflight) + " instructions in flight",
                        "its limit (limits.max_inflight = " + std::to_string(limits_.max_inflight) + ")",
                        "wait for a result (a sync point) first");
  }
  const int64_t live = static_cast<int64_t>(c.live.size() + inst.results.size());
  if (limits_.max_live_tensors > 0 && live > limits_.max_live_tensors) {
    if (live_quota_.refusals) live_quota_.refusals->Increment();
    return QuotaRefusal(inst, "would hold " + std::to_string(live) + " tensors on the workers",
                        "over its limit (limits.max_live_tensors = " + std::to_string(limits_.max_live_tensors) + ")",
                        "free some first");
  }
  return Status::Ok();
}

void Admission::Count(ClientState& c, const Instruction& inst) {
  ++c.admitted;
  if (inst.op == Op::kSync) {
    if (c.admitted_before_sync.size() == kMaxSyncMarks) c.admitted_before_sync.pop_front();
    c.admitted_before_sync.emplace_back(inst.seq, c.admitted);
  }
  if (inst.op == Op::kFree)
    for (TensorId id : inst.operands) c.live.erase(id);
  if (inst.op == Op::kRunUnit)
    for (TensorId id : ConsumedOperands(inst)) c.live.erase(id);
  c.live.insert(inst.results.begin(), inst.results.end());
}

}  // namespace gt
