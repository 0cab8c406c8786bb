// The sharding stage's answers to kInspect (gt/op_attrs.h InspectMode): a
// tensor's layout, and the client's collective recording. Both come from
// this stage's own records, encoded by the layout codec (gt/layout.h) into
// the instruction, which goes on to the router: the dispatcher answers the
// client itself, with no worker involved.
#include "gt/layout.h"

#include "gt/op_attrs.h"
#include "sharding_stage.h"

namespace gt::sharding {
namespace {

layout::AxisPlacement AxisOf(const MeshAxis& m) {
  const layout::AxisKind kind = m.shard()     ? layout::AxisKind::kShard
                                : m.partial() ? layout::AxisKind::kPartial
                                              : layout::AxisKind::kReplicate;
  return layout::AxisPlacement{kind, m.dim};
}

layout::Kind LayoutKind(const Placement& p) {
  switch (p.kind) {
    case Placement::Kind::kWhole: return layout::Kind::kWhole;
    case Placement::Kind::kSharded: return layout::Kind::kSplit;
    case Placement::Kind::kReplicated: return layout::Kind::kCopies;
    case Placement::Kind::kPartial: return layout::Kind::kPendingSum;
    case Placement::Kind::kMesh: return layout::Kind::kOnMesh;
  }
  return layout::Kind::kWhole;
}

// What a layout query answers for `p`.
layout::Layout LayoutOf(const Placement& p) {
  layout::Layout out;
  out.kind = LayoutKind(p);
  out.axis = p.axis;
  out.workers.assign(p.workers.begin(), p.workers.end());
  if (p.sharded()) out.sizes = p.sizes;
  if (p.mesh()) {
    out.mesh_shape = p.mesh_shape;
    for (const MeshAxis& m : p.mesh_axes) out.mesh_axes.push_back(AxisOf(m));
  }
  return out;
}

}  // namespace

Status ShardingStage::Inspect(Client& c, Instruction&& inst, Emitter& out) {
  if (Status f = c.failed.CheckOperands(inst); !f.ok()) return f;
  Result<InspectMode> mode = ReadInspect(inst);
  if (!mode.ok()) return mode.status();
  switch (*mode) {
    case InspectMode::kLayout: return AnswerLayout(c, std::move(inst), out);
    case InspectMode::kStartRecording:  // no answer
      c.recording = true;
      c.collective_log.clear();
      c.collectives_dropped = 0;
      return Status::Ok();
    case InspectMode::kStopRecording:
      SetInspectAnswer(inst, layout::EncodeRecording(c.collective_log, c.collectives_dropped));
      c.recording = false;
      c.collective_log = {};  // its memory too
      c.collectives_dropped = 0;
      out.Emit(std::move(inst));
      return Status::Ok();
  }
  return Internal(inst.Describe() + ": unhandled inspect request");
}

Status ShardingStage::AnswerLayout(Client& c, Instruction&& inst, Emitter& out) {
  if (inst.operands.size() != 1) return InvalidArgument(inst.Describe() + ": expected one operand");
  auto it = c.tensors.find(inst.operands[0]);
  Placement p;
  if (it != c.tensors.end()) {
    p = it->second.placement;
    inst.operands.clear();  // answered from the record: the router has nothing to check
  } else {  // no record: whole on the client's worker, if it is there (the router checks that it is)
    if (c.default_worker < 0 || !workers_.IsLive(c.default_worker))
      return InvalidArgument(inst.Describe() + ": unknown tensor " + TensorName(inst.operands[0]));
    p = Placement{Placement::Kind::kWhole, {c.default_worker}, {inst.operands[0]}, 0, {}};
  }
  SetInspectAnswer(inst, layout::EncodeAnswer(LayoutOf(p)));
  out.Emit(std::move(inst));
  return Status::Ok();
}

}  // namespace gt::sharding
