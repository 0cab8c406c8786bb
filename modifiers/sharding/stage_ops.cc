// The sharding stage's ops (sharding_stage.h): creation, and every other op
// of a client with configs, on a 2-D mesh (mesh.h) or through the strategy
// table (strategy_table.h); ops on tensors without a record.
#include <algorithm>
#include <optional>
#include <vector>

#include "gt/op_attrs.h"
#include "sharding.h"
#include "sharding_stage.h"
#include "strategies.h"
#include "strategy_table.h"

namespace gt::sharding {
namespace {

// True when `inst` writes an operand on a mesh (a mutation's destination,
// adam_step's state too) that the mesh cannot run it on piece by piece.
bool WritesMesh(const Instruction& inst, const std::vector<const Tensor*>& in) {
  if (KindOf(inst.op) != OpKind::kMutate || in.empty()) return false;
  if (in[0]->placement.mesh()) return true;
  return inst.op == Op::kAdamStep && in.size() == 4 && (in[2]->placement.mesh() || in[3]->placement.mesh());
}

// Ops whose result a worker makes as a view of operand 0 (the op table's kView).
bool IsView(Op op) { return HasOpFlag(op, kView); }

// The records of `inst`'s operands; nullptr for one without (a tensor made
// before the client's first config).
std::vector<const Tensor*> Records(Client& c, const Instruction& inst) {
  std::vector<const Tensor*> in;
  for (TensorId id : inst.operands) {
    auto it = c.tensors.find(id);
    in.push_back(it == c.tensors.end() ? nullptr : &it->second);
  }
  return in;
}

// The shape and dtype of what `inst` makes (empty when it makes nothing);
// on failure its results are recorded as failed.
Result<TensorMeta> ResultMeta(Client& c, const Instruction& inst, const std::vector<const Tensor*>& in) {
  if (!ProducesTensor(inst.op)) return TensorMeta{};
  std::vector<const TensorMeta*> metas;
  for (const Tensor* t : in) metas.push_back(&t->meta);
  Result<TensorMeta> m = InferResult(inst, metas);
  if (!m.ok())
    for (TensorId r : inst.results) c.failed.Record(r, inst.seq);
  return m;
}

// Whether `inst` takes part in a 2-D mesh layout (mesh.h): a mesh operand,
// or a redistribute to a mesh.
bool TouchesMesh(const Instruction& inst, const std::vector<const Tensor*>& in) {
  if (inst.op == Op::kRedistribute && !inst.attrs.axes.empty() && inst.attrs.axes[0] == kMeshLayout) return true;
  return std::any_of(in.begin(), in.end(), [](const Tensor* t) { return t->placement.mesh(); });
}

// The record of what `inst` made, laid out as `placed`.
void RecordResult(Client& c, const Instruction& inst, const std::vector<const Tensor*>& in, TensorMeta meta,
                  Placement placed) {
  Tensor& made = c.tensors[inst.results.at(0)] = Tensor{std::move(meta), std::move(placed)};
  if (IsView(inst.op) && made.placement.mesh() && in[0]->placement.mesh()) {  // for MakeFamilyCopies
    made.view_of = in[0]->view_of;
    made.view_of.push_back(inst);
  }
  if (!made.placement.partial() && !HasPartialAxis(made.placement)) return;
  // Carried through a linear op, it keeps the op that made its addends.
  made.made_by = inst.seq;
  if (IsView(inst.op) && made.placement.partial()) {  // a view of a view keeps the first base and every op from it
    made.view_of = in[0]->view_of;
    made.view_of.push_back(inst);
  }
  for (const Tensor* t : in)
    if ((t->placement.partial() || HasPartialAxis(t->placement)) && t->made_by) {
      made.made_by = t->made_by;
      break;
    }
}

}  // namespace

// ---- ops -------------------------------------------------------------------

Status ShardingStage::Create(Client& c, Instruction inst, Emitter& out) {
  Result<TensorMeta> meta = InferResult(inst, {});
  if (!meta.ok()) return meta.status();
  const TensorId result = inst.results.at(0);
  auto config = inst.signal.empty() ? c.configs.end() : c.configs.find(inst.signal);
  Step s = StepFor(c, inst, out);
  // Auto-sharding: no config applies, so axis 0 over every live worker when it divides, else replicated.
  Config automatic;
  const size_t live = workers_.live().size();
  if (config == c.configs.end() && auto_shard_ && live > 1) {
    const Shape& shape = meta->shape;
    automatic.sharded = !shape.empty() && shape[0] % static_cast<int64_t>(live) == 0 && shape[0] > 0;
    automatic.replicated = !automatic.sharded;
  }
  const Config* chosen = config != c.configs.end() ? &config->second
                         : automatic.sharded || automatic.replicated ? &automatic
                                                                     : nullptr;
  if (chosen) {
    if (Status st = CheckConfig(inst.signal, *chosen, workers_, &meta->shape); !st.ok()) {
      c.failed.Record(result, inst.seq);
      return st;
    }
  }
  Config flat;  // a mesh layout whose axes cut the same dim (Shard(0) and Shard(-2), say) is one split over the mesh
  if (chosen && !chosen->mesh_shape.empty() && chosen->mesh_axes[0].shard() && chosen->mesh_axes[1].shard() &&
      Wrap(chosen->mesh_axes[0].dim, meta->shape.size()) == Wrap(chosen->mesh_axes[1].dim, meta->shape.size())) {
    flat.sharded = true;
    flat.axis = chosen->mesh_axes[0].dim;
    flat.workers = chosen->workers;
    chosen = &flat;
  }
  const bool on_mesh = chosen && !chosen->mesh_shape.empty() && !meta->shape.empty();  // a scalar is placed whole
  Result<Placement> p = on_mesh ? MeshCreation(s, *chosen, *meta)
                                : Creation(s, chosen && !chosen->mesh_shape.empty() ? nullptr : chosen, *meta);
  if (!p.ok()) {  // a later use names this op, not an unknown tensor
    FreeTemporaries(s);
    c.failed.Record(result, inst.seq);
    return p.status();
  }
  Explain(s, {}, *p);
  FreeTemporaries(s);
  c.tensors[result] = Tensor{*meta, std::move(*p)};
  if (!on_mesh && (inst.op == Op::kZeros || inst.op == Op::kOnes)) c.tensors[result].constant = inst.op;
  return Status::Ok();
}


void ShardingStage::Adopt(Step& s, Tensor& x) {
  // The worker's redistribute kernel refuses an operand whose shape or dtype
  // is not the one stated; a copy that was never made stands in with the
  // stated shape in any collective, so no member waits or mismatches sizes.
  const int worker = x.placement.workers[0];
  Instruction check;
  check.op = Op::kRedistribute;
  check.attrs.axes = {0, 0, worker};
  check.attrs.shape = x.meta.shape;
  check.attrs.dtype = x.meta.dtype;
  check.operands = {x.placement.ids[0]};
  const TensorId copy = NewId(*s.client);
  check.results = {copy};
  EmitOn(s, worker, std::move(check));
  s.temporaries.emplace_back(worker, copy);
  x.placement.ids = {copy};
}

// A tensor stops being a constant when it may be written: as the destination
// of a write (whether or not it succeeds), as an operand of a unit, or when
// it is viewed (a view shares its data: a write through it writes the base).
void ShardingStage::ForgetConstants(Client& c, const Instruction& inst) {
  const Op op = inst.op;
  const bool views = IsView(op);
  const bool writes = KindOf(op) == OpKind::kMutate && op != Op::kAdamStep;  // operand 0 only
  if (!views && !writes && op != Op::kRunUnit && op != Op::kAdamStep) return;
  for (size_t i = 0; i < inst.operands.size() && (i == 0 || !writes); ++i) {
    auto it = c.tensors.find(inst.operands[i]);
    if (it != c.tensors.end()) it->second.constant.reset();
  }
}

Status ShardingStage::Compute(Client& c, Instruction inst, Emitter& out) {
  if (Status f = c.failed.CheckOperands(inst); !f.ok()) {
    for (TensorId r : inst.results) c.failed.RecordIfAbsent(r, inst.seq);
    return f;
  }
  std::vector<const Tensor*> in = Records(c, inst);
  ForgetConstants(c, inst);
  // A tensor from before the client's first config takes part, for this op
  // only, as the client describes it (Adopt: checked on its worker first).
  std::optional<Tensor> adopted;
  if (std::find(in.begin(), in.end(), nullptr) != in.end()) {
    if (inst.op != Op::kRedistribute) return Unrecorded(c, std::move(inst), in, out);
    Result<Tensor> whole = Adoptable(c, inst);
    if (!whole.ok()) return whole.status();
    adopted = std::move(*whole);
    in[0] = &*adopted;
  }
  Result<TensorMeta> meta = ResultMeta(c, inst, in);
  if (!meta.ok()) return meta.status();
  Step s = StepFor(c, inst, out);
  if (adopted) Adopt(s, *adopted);
  const bool pending = std::any_of(in.begin(), in.end(), [](const Tensor* t) { return t->placement.partial(); });
  if (pending && !CarriesPartial(inst, in, *meta)) Settle(c, s, inst);
  std::vector<Tensor> unmeshed, moved;  // `in` may point into them
  std::optional<Result<Placement>> placed;
  if (TouchesMesh(inst, in)) placed = ComputeOnMesh(c, s, inst, in, *meta, unmeshed);
  if (!placed) {
    Status forwarded = Status::Ok();
    placed = PlaceOnWorkers(c, s, inst, in, *meta, moved, forwarded, out);
    if (!placed) return forwarded;  // sent on as it is
  }
  if (!placed->ok()) {
    FreeTemporaries(s);
    for (TensorId r : inst.results) c.failed.Record(r, inst.seq);
    return placed->status();
  }
  Explain(s, in, **placed);
  FreeTemporaries(s);
  if (ProducesTensor(inst.op)) RecordResult(c, inst, in, std::move(*meta), std::move(**placed));
  return Status::Ok();
}

Result<Tensor> ShardingStage::Adoptable(Client& c, const Instruction& redistribute) {
  if (c.default_worker < 0 || !workers_.IsLive(c.default_worker)) {
    c.failed.Record(redistribute.results.at(0), redistribute.seq);
    return InvalidArgument(redistribute.Describe() + ": unknown tensor " + TensorName(redistribute.operands[0]));
  }
  return Tensor{TensorMeta{redistribute.attrs.shape, redistribute.attrs.dtype},
                Placement{Placement::Kind::kWhole, {c.default_worker}, {redistribute.operands[0]}, 0, {}}};
}

std::optional<Result<Placement>> ShardingStage::ComputeOnMesh(Client& c, Step& s, const Instruction& inst,
                                                              std::vector<const Tensor*>& in, const TensorMeta& meta,
                                                              std::vector<Tensor>& unmeshed) {
  if (!MeshCarries(inst, in, meta)) SettleMesh(c, s, inst);
  // An optimizer's state on the mesh, its parameter copies since a view made it so: the state
  // becomes copies alike (the 1-D update then runs where each lives).
  if (inst.op == Op::kAdamStep && in.size() == 4 && in[0]->placement.replicated())
    for (size_t i : {size_t{2}, size_t{3}})
      if (in[i]->placement.mesh() && in[i]->placement.workers == in[0]->placement.workers)
        MakeFamilyCopies(c, s, inst.operands[i]);
  if (inst.op == Op::kRedistribute) return MeshRedistribute(s, *in[0], meta);
  if (MeshRuns(inst, in, meta)) return MeshOp(s, in, meta);
  if (WritesMesh(inst, in))  // never into copies made for the op: the write would be lost
    return InvalidArgument(inst.Describe() + ": it writes a tensor on a mesh (" + in[0]->placement.ToString() +
                           ") with operands laid out unlike it (a parameter and its optimizer state must be "
                           "laid out alike)");
  if (IsView(inst.op)) {  // a view shares its operand's data: the records themselves become copies
    for (TensorId id : inst.operands) {
      auto it = c.tensors.find(id);
      if (it != c.tensors.end() && it->second.placement.mesh()) MakeFamilyCopies(c, s, id);
    }
    return std::nullopt;
  }
  unmeshed.reserve(in.size());  // `in` points into it
  for (const Tensor*& t : in) {
    if (!t->placement.mesh()) continue;
    unmeshed.push_back(Unmesh(s, *t));
    t = &unmeshed.back();
  }
  return std::nullopt;
}

std::optional<Result<Placement>> ShardingStage::PlaceOnWorkers(Client& c, Step& s, Instruction& inst,
                                                               std::vector<const Tensor*>& in, TensorMeta& meta,
                                                               std::vector<Tensor>& moved, Status& forwarded,
                                                               Emitter& out) {
  // Inside a scope whose config names workers the op runs on them: operands
  // living elsewhere are moved in first (pipeline stages, backward signals).
  auto config = inst.signal.empty() ? c.configs.end() : c.configs.find(inst.signal);
  const bool redistribute = inst.op == Op::kRedistribute;  // its target is its own, not the scope's
  if (!redistribute && config != c.configs.end() && (config->second.sharded || config->second.replicated)) {
    moved.reserve(in.size());  // `in` points into it
    if (Status st = CheckConfig(inst.signal, config->second, workers_, nullptr); !st.ok()) return st;
    const bool mutate = KindOf(inst.op) == OpKind::kMutate;
    for (size_t i = mutate ? 1 : 0; i < in.size(); ++i) {
      std::optional<Tensor> m = MoveInto(s, *in[i], config->second);
      if (!m) continue;
      moved.push_back(std::move(*m));
      in[i] = &moved.back();
    }
  }
  bool all_whole = true;
  for (const Tensor* t : in) all_whole = all_whole && t->placement.whole();
  if (all_whole && moved.empty() && !in.empty() && !explain_ && !redistribute) {
    const int worker = in[0]->placement.workers[0];
    bool together = true;
    for (const Tensor* t : in) together = together && t->placement.workers[0] == worker;
    // Nothing to assemble: the op itself goes to their worker, uncopied.
    if (together) {
      forwarded = Forward(c, std::move(inst), worker, std::move(meta), out);
      return std::nullopt;
    }
  }
  // The strategy table (strategy_table.h) picks how the op runs on its operands' placements.
  return RunStrategy(s, in, meta);
}

Status ShardingStage::Forward(Client& c, Instruction&& inst, int worker, TensorMeta meta, Emitter& out) {
  if (ProducesTensor(inst.op)) {
    const TensorId result = inst.results.at(0);
    c.tensors[result] = Tensor{std::move(meta), Placement{Placement::Kind::kWhole, {worker}, {result}, 0, {}}};
  }
  inst.worker = worker;
  out.Emit(std::move(inst));
  return Status::Ok();
}

Status ShardingStage::Unrecorded(Client& c, Instruction inst, const std::vector<const Tensor*>& in, Emitter& out) {
  const int worker = c.default_worker;
  if (worker < 0 || !workers_.IsLive(worker)) {  // it never made a tensor, or they are gone: the router names it
    out.Emit(std::move(inst));
    return Status::Ok();
  }
  const Instruction original = inst;
  Step s = StepFor(c, original, out);
  Settle(c, s, original);
  // An optimizer step writes its state too: none of it may be a copy.
  if (inst.op == Op::kAdamStep) {
    for (size_t i : {size_t{0}, size_t{2}, size_t{3}})
      if (in[i] && !(in[i]->placement.whole() && in[i]->placement.workers[0] == worker))
        return FailedPrecondition(inst.Describe() + ": " + TensorName(inst.operands[i]) + " is " +
                                  in[i]->placement.ToString() + ", the others whole on worker " +
                                  std::to_string(worker) + "; a parameter and its optimizer state must be laid out alike");
  }
  if (KindOf(inst.op) == OpKind::kMutate && in[0] &&
      !(in[0]->placement.whole() && in[0]->placement.workers[0] == worker)) {
    for (size_t i = 1; i < in.size(); ++i)
      if (!in[i])
        return FailedPrecondition(inst.Describe() + ": cannot write " + TensorName(inst.operands[i]) +
                                  " (made before this client's first signal config; its shape is not known to the "
                                  "sharding stage) into a tensor that is " + in[0]->placement.ToString());
  }
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i]) inst.operands[i] = WholeOn(s, *in[i], worker);
  EmitOn(s, worker, std::move(inst));
  Explain(s, in, Placement{Placement::Kind::kWhole, {worker}, {}, 0, {}});
  FreeTemporaries(s);
  return Status::Ok();
}

}  // namespace gt::sharding
