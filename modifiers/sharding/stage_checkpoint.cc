// The sharding stage's part of a distributed checkpoint (gt/checkpoint_plan.h):
// a client's kCheckpointWrite / kCheckpointRead has its paths resolved under
// the operator's checkpoint_root, and each piece's plan lines go to the
// worker that holds the piece, naming the piece itself. The workers then
// write or read their own pieces in parallel; no tensor byte passes through
// the dispatcher.
#include <map>
#include <string_view>

#include "gt/checkpoint_plan.h"
#include "sharding_stage.h"

namespace gt::sharding {
namespace {

Status Refuse(const Instruction& inst, const std::string& why) {
  return InvalidArgument(inst.Describe() + ": " + why);
}

// A read fills its piece in place and a write sends it; the metadata comes alone.
Status CheckVerbs(const Instruction& inst, const checkpoint::Plan& plan) {
  using Kind = checkpoint::PlanLine::Kind;
  if (inst.operands.empty()) {
    if (plan.lines.size() != 1 || plan.lines[0].kind != Kind::kMetadata)
      return Refuse(inst, "without a tensor, a checkpoint op's plan is one metadata line");
    return Status::Ok();
  }
  const Kind want = inst.op == Op::kCheckpointWrite ? Kind::kWrite : Kind::kRead;
  for (const checkpoint::PlanLine& line : plan.lines)
    if (line.kind != want) return Refuse(inst, "its plan mixes verbs (" + line.path + ")");
  return Status::Ok();
}

BlobPtr PlanBlob(const checkpoint::Plan& plan) {
  const std::string text = checkpoint::FormatPlan(plan);
  return CopyToBlob(text.data(), text.size());
}

}  // namespace

Status ShardingStage::Checkpoint(Client& c, Instruction&& inst, Emitter& out) {
  if (Status f = c.failed.CheckOperands(inst); !f.ok()) return f;
  if (inst.operands.size() > 1 || !inst.results.empty())
    return Refuse(inst, "a checkpoint op takes at most one tensor and makes none");
  if (!inst.payload) return Refuse(inst, "carries no checkpoint plan");
  Result<checkpoint::Plan> plan = checkpoint::ParsePlan(
      std::string_view(reinterpret_cast<const char*>(inst.payload->data()), inst.payload->size()));
  if (!plan.ok()) return Refuse(inst, plan.status().message());
  if (Status s = CheckVerbs(inst, *plan); !s.ok()) return s;
  for (checkpoint::PlanLine& line : plan->lines) {
    Result<std::string> path = checkpoint::ResolveUnder(checkpoint_root_, line.path);
    if (!path.ok()) return Refuse(inst, path.status().message());
    line.path = std::move(*path);
  }
  if (inst.operands.empty()) {  // the metadata: written or read by the client's worker
    inst.payload = PlanBlob(*plan);
    inst.worker = workers_.DefaultFor(c);
    out.Emit(std::move(inst));
    return Status::Ok();
  }
  Placement p{Placement::Kind::kWhole, {workers_.DefaultFor(c)}, {inst.operands[0]}, 0, {}};
  auto it = c.tensors.find(inst.operands[0]);
  if (it != c.tensors.end()) {
    if (it->second.placement.partial() || HasPartialAxis(it->second.placement))
      return Refuse(inst, "its tensor is a pending sum: settle it first");
    p = it->second.placement;
    if (inst.op == Op::kCheckpointRead) it->second.constant.reset();  // written behind the record's back
  }
  std::map<int64_t, checkpoint::Plan> by_piece;
  for (checkpoint::PlanLine& line : plan->lines) {
    if (line.piece >= static_cast<int64_t>(p.workers.size()))
      return Refuse(inst, "piece " + std::to_string(line.piece) + " of a tensor in " +
                              std::to_string(p.workers.size()) + " piece(s)");
    by_piece[line.piece].lines.push_back(std::move(line));
  }
  Step s = StepFor(c, inst, out);
  for (auto& [piece, lines] : by_piece) {
    Instruction one;
    one.op = inst.op;
    one.operands = {p.ids[static_cast<size_t>(piece)]};
    one.payload = PlanBlob(lines);
    EmitOn(s, p.workers[static_cast<size_t>(piece)], std::move(one));
  }
  return Status::Ok();
}

}  // namespace gt::sharding
