#include "mesh.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "gt/dtype.h"
#include "gt/layout.h"
#include "gt/op_attrs.h"
#include "ir/shape_inference.h"
#include "mesh_pieces.h"
#include "strategies.h"

namespace gt::sharding {
namespace {


bool IsElementwise(Op op) {
  const ShardRule rule = ShardRuleOf(op);  // the op table's
  return rule == ShardRule::kElementwise || rule == ShardRule::kFusedUpdate;
}

Result<Placement> MeshElementwise(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const bool mutates = KindOf(s.inst->op) == OpKind::kMutate;
  const Tensor* lead = nullptr;
  for (const Tensor* t : in)
    if (t->placement.mesh() && (!lead || ShardCount(t->placement) > ShardCount(lead->placement))) lead = t;
  if (mutates) lead = in[0];
  const Shape& out_shape = mutates ? lead->meta.shape : meta.shape;
  // The lead's axes in the result's dims (a lead of lower rank broadcasts up).
  const int64_t offset = static_cast<int64_t>(out_shape.size()) - static_cast<int64_t>(lead->meta.shape.size());
  Axes out_axes = lead->placement.mesh_axes;
  for (MeshAxis& m : out_axes)
    if (m.shard()) m.dim += offset;
  std::vector<Tensor> operands;
  for (const Tensor* t : in) {
    const Tensor on = OnMesh(s, *t, lead->placement);
    // Pending sums alike (MeshCarries) are added as they are.
    const bool carried = std::any_of(out_axes.begin(), out_axes.end(), [](const MeshAxis& m) { return m.partial(); });
    operands.push_back(carried ? on : Conform(s, on, AxesFor(out_axes, out_shape, t->meta.shape)));
  }
  if (mutates) {
    EachWorker(s, lead->placement, operands, false, s.inst->op);
    return MeshLike(lead->placement, out_axes);
  }
  return MeshLike(lead->placement, out_axes, EachWorker(s, lead->placement, operands, true, s.inst->op));
}

Result<Placement> MeshMatmul(Step& s, const std::vector<const Tensor*>& in) {
  const Placement& like = in[0]->placement.mesh() ? in[0]->placement : in[1]->placement;
  Tensor a = OnMesh(s, *in[0], like), b = OnMesh(s, *in[1], like);
  Axes ta = a.placement.mesh_axes, tb = b.placement.mesh_axes, out(ta.size());
  for (size_t x = 0; x < ta.size(); ++x) {
    if (ta[x] == ShardAxis(0)) {  // rows of A: B whole along this axis
      tb[x] = ReplicateAxis();
      out[x] = ShardAxis(0);
    } else if (tb[x] == ShardAxis(1)) {  // columns of B: A whole along this axis
      ta[x] = ReplicateAxis();
      out[x] = ShardAxis(1);
    } else if ((ta[x] == ShardAxis(1) || tb[x] == ShardAxis(0)) && !(x > 0 && out[0].partial())) {
      // the contracted dim (cut along one axis only): partial products
      ta[x] = ShardAxis(1);
      tb[x] = ShardAxis(0);
      out[x] = PartialAxis();
    } else {
      ta[x] = tb[x] = out[x] = ReplicateAxis();
    }
  }
  std::vector<Tensor> operands = {Conform(s, a, ta), Conform(s, b, tb)};
  return MeshLike(like, out, EachWorker(s, like, operands, true, Op::kMatmul));
}

// transpose / permute: each piece moved alike; a Shard dim goes where its dim goes.
Result<Placement> MeshMovement(Step& s, const Tensor& t) {
  const size_t rank = t.meta.shape.size();
  std::vector<int64_t> order(rank);  // order[new dim] = old dim
  for (size_t d = 0; d < rank; ++d) order[d] = static_cast<int64_t>(d);
  const std::vector<int64_t>& a = s.inst->attrs.axes;
  if (s.inst->op == Op::kPermute) {
    for (size_t d = 0; d < rank && d < a.size(); ++d) order[d] = Wrap(a[d], rank);
  } else {
    const int64_t d0 = a.empty() ? static_cast<int64_t>(rank) - 2 : Wrap(a[0], rank);
    const int64_t d1 = a.empty() ? static_cast<int64_t>(rank) - 1 : Wrap(a.at(1), rank);
    std::swap(order[static_cast<size_t>(d0)], order[static_cast<size_t>(d1)]);
  }
  Axes axes = t.placement.mesh_axes;
  for (MeshAxis& m : axes)
    if (m.shard()) m.dim = std::find(order.begin(), order.end(), m.dim) - order.begin();
  return MeshLike(t.placement, axes, EachWorker(s, t.placement, {t}, true, s.inst->op));
}

// Where a reshape to `to` puts dim `d` of `from` whole: the dim of `to` with
// as many elements before it and the same length (then each piece reshapes
// alone: the dims before, between and after the cut ones regroup among
// themselves); -1 for none.
int64_t ReshapedDim(const Shape& from, const Shape& to, int64_t d) {
  int64_t before = 1;
  for (int64_t i = 0; i < d; ++i) before *= from[static_cast<size_t>(i)];
  int64_t seen = 1;
  for (size_t j = 0; j < to.size(); seen *= to[j], ++j)
    if (seen == before && to[j] == from[static_cast<size_t>(d)]) return static_cast<int64_t>(j);
  return -1;
}

// The result's axes when every cut dim survives the reshape; nullopt if one does not.
std::optional<Axes> ReshapedAxes(const Tensor& t, const Shape& to) {
  Axes axes = t.placement.mesh_axes;
  for (MeshAxis& m : axes) {
    if (!m.shard()) continue;
    m.dim = ReshapedDim(t.meta.shape, to, m.dim);
    if (m.dim < 0) return std::nullopt;
  }
  return axes;
}

// reshape / unsqueeze / squeeze keeping every cut dim whole: each piece
// reshaped to its own part of the result's shape.
Result<Placement> MeshReshape(Step& s, const Tensor& t, const TensorMeta& meta) {
  const Axes axes = *ReshapedAxes(t, meta.shape);
  const Placement out = MeshLike(t.placement, axes);
  std::vector<TensorId> ids;
  for (size_t k = 0; k < t.placement.workers.size(); ++k) {
    Instruction piece;
    piece.op = Op::kReshape;
    piece.attrs.shape = LocalShape(meta.shape, out, k);
    piece.operands = {t.placement.ids[k]};
    ids.push_back(NewId(*s.client));
    piece.results = {ids.back()};
    EmitOn(s, t.placement.workers[k], std::move(piece));
  }
  return MeshLike(t.placement, axes, ids);
}

// slice / select along a dim no axis cuts: each piece alike (a select's
// dropped dim renumbers the cut ones after it).
Result<Placement> MeshSliceOrSelect(Step& s, const Tensor& t) {
  Axes axes = t.placement.mesh_axes;
  if (s.inst->op == Op::kSelect) {
    const int64_t dropped = Wrap(s.inst->attrs.axes.at(0), t.meta.shape.size());
    for (MeshAxis& m : axes)
      if (m.shard() && m.dim > dropped) --m.dim;
  }
  return MeshLike(t.placement, axes, EachWorker(s, t.placement, {t}, true, s.inst->op));
}

bool CutsDim(const Placement& p, int64_t dim) {
  return std::any_of(p.mesh_axes.begin(), p.mesh_axes.end(), [&](const MeshAxis& m) { return m.shard() && m.dim == dim; });
}

// sum / mean: over a Shard dim each piece's part is an addend (Partial());
// a mean's are divided by the whole count.
Result<Placement> MeshReduce(Step& s, const Tensor& t) {
  const Instruction& inst = *s.inst;
  Result<std::vector<int64_t>> reduced = NormalizeAxes(inst.attrs.axes, t.meta.shape.size());
  if (!reduced.ok()) return reduced.status();
  auto is_reduced = [&](int64_t d) { return std::find(reduced->begin(), reduced->end(), d) != reduced->end(); };
  Axes axes = t.placement.mesh_axes;
  bool over_shard = false;
  for (MeshAxis& m : axes) {
    if (!m.shard()) continue;
    if (is_reduced(m.dim)) {
      over_shard = true;
      m = PartialAxis();
    } else if (!inst.attrs.keepdims) {
      m.dim -= std::count_if(reduced->begin(), reduced->end(), [&](int64_t r) { return r < m.dim; });
    }
  }
  if (!over_shard || inst.op == Op::kSum)
    return MeshLike(t.placement, axes, EachWorker(s, t.placement, {t}, true, inst.op));
  double count = 1;
  for (int64_t d : *reduced) count *= static_cast<double>(t.meta.shape[static_cast<size_t>(d)]);
  std::vector<TensorId> sums = EachWorker(s, t.placement, {t}, true, Op::kSum);
  std::vector<TensorId> ids;
  for (size_t k = 0; k < sums.size(); ++k) {
    s.temporaries.emplace_back(t.placement.workers[k], sums[k]);
    Instruction scale = MakeScalarBinary(Op::kDiv, count, ScalarSide::kRight);
    scale.operands = {sums[k]};
    ids.push_back(NewId(*s.client));
    scale.results = {ids.back()};
    EmitOn(s, t.placement.workers[k], std::move(scale));
  }
  return MeshLike(t.placement, axes, ids);
}

// The mesh layout a redistribute names (gt/layout.h DecodeTarget), checked against x.
Result<Placement> MeshTarget(const Instruction& inst, const Tensor& x, const Workers& workers) {
  const std::string where = inst.Describe() + ": ";
  Result<layout::Layout> target = layout::DecodeTarget(inst.attrs.axes);
  if (!target.ok()) return InvalidArgument(where + target.status().message());
  Placement out;
  out.kind = Placement::Kind::kMesh;
  out.mesh_shape = target->mesh_shape;
  const size_t rank = x.meta.shape.size();
  for (size_t axis = 0; axis < 2; ++axis) {
    const layout::AxisPlacement& m = target->mesh_axes[axis];
    if (m.kind == layout::AxisKind::kReplicate) {
      out.mesh_axes.push_back(ReplicateAxis());
      continue;
    }
    const int64_t d = Wrap(m.dim, rank);
    if (d < 0 || d >= static_cast<int64_t>(rank))
      return InvalidArgument(where + "Shard(" + std::to_string(m.dim) + ") is out of range for a tensor of shape " +
                             ShapeToString(x.meta.shape));
    const int64_t length = x.meta.shape[static_cast<size_t>(d)], side = out.mesh_shape[axis];
    if (static_cast<int64_t>(ChunkSizes(length, static_cast<size_t>(side)).size()) != side)
      return InvalidArgument(where + "Shard(" + std::to_string(m.dim) + ") over mesh axis " + std::to_string(axis) +
                             " of " + std::to_string(side) + " workers: dim " + std::to_string(d) +
                             " of length " + std::to_string(length) + " does not give a piece to each (torch.chunk)");
    out.mesh_axes.push_back(ShardAxis(d));
  }
  if (out.mesh_axes[0].shard() && out.mesh_axes[0] == out.mesh_axes[1])
    return InvalidArgument(where + "both mesh axes cut dim " + std::to_string(out.mesh_axes[0].dim) +
                           ": that is one split over the flattened mesh (layout 1)");
  Result<std::vector<int>> members = LiveWorkerList(target->workers, 0, workers, where);
  if (!members.ok()) return members.status();
  out.workers = std::move(*members);
  return out;
}

}  // namespace

bool HasPartialAxis(const Placement& p) {
  return p.mesh() && std::any_of(p.mesh_axes.begin(), p.mesh_axes.end(), [](const MeshAxis& m) { return m.partial(); });
}

bool MeshRuns(const Instruction& inst, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  if (in.empty()) return false;
  if (inst.op == Op::kReshape || inst.op == Op::kUnsqueeze || inst.op == Op::kSqueeze)
    return in.size() == 1 && in[0]->placement.mesh() && ReshapedAxes(*in[0], meta.shape).has_value();
  const Op op = inst.op;
  if (op == Op::kAdamStep) {  // its state is written where it lives: laid out as the parameter
    for (size_t i : {size_t{2}, size_t{3}})
      if (in.size() != 4 || !SameLayout(in[0]->placement, in[i]->placement)) return false;
  }
  if (KindOf(op) == OpKind::kMutate) return in[0]->placement.mesh();
  if (IsElementwise(op)) return true;
  if (op == Op::kMatmul) return in.size() == 2 && in[0]->meta.shape.size() == 2 && in[1]->meta.shape.size() == 2;
  if (in.size() != 1 || !in[0]->placement.mesh()) return false;
  const size_t rank = in[0]->meta.shape.size();
  if (op == Op::kTranspose || op == Op::kPermute) return rank >= 2;  // a 0-d or 1-d transpose: the 1-D strategies
  if (op == Op::kSlice || op == Op::kSelect)
    return !inst.attrs.axes.empty() && !CutsDim(in[0]->placement, Wrap(inst.attrs.axes[0], rank));
  if (op == Op::kSum || op == Op::kMean) return true;
  return false;
}

bool MeshCarries(const Instruction& inst, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  switch (inst.op) {
    // (not views: a view of a pending sum would stop sharing data with it once either is summed)
    case Op::kClone: case Op::kNeg: case Op::kSum: case Op::kMean:
      return in.size() == 1;
    case Op::kRedistribute:  // to a mesh: reduce-scattered or all-reduced by the change itself
      return in.size() == 1 && !inst.attrs.axes.empty() && inst.attrs.axes[0] == kMeshLayout;
    case Op::kMul:
      return in.size() == 1 && inst.attrs.scalar_side != ScalarSide::kNone && std::isfinite(inst.attrs.scalar);
    case Op::kDiv:
      return in.size() == 1 && inst.attrs.scalar_side == ScalarSide::kRight && std::isfinite(inst.attrs.scalar) &&
             inst.attrs.scalar != 0;
    case Op::kAdd: case Op::kSub:
      return in.size() == 2 && inst.attrs.scalar_side == ScalarSide::kNone && in[0]->placement.mesh() &&
             SameLayout(in[0]->placement, in[1]->placement) && in[0]->meta.shape == meta.shape &&
             in[1]->meta.shape == meta.shape && in[0]->meta.dtype == in[1]->meta.dtype;
    default:
      return false;
  }
}

Result<Placement> MeshOp(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  switch (s.inst->op) {
    case Op::kMatmul: return MeshMatmul(s, in);
    case Op::kTranspose: case Op::kPermute: return MeshMovement(s, *in[0]);
    case Op::kSum: case Op::kMean: return MeshReduce(s, *in[0]);
    case Op::kReshape: case Op::kUnsqueeze: case Op::kSqueeze: return MeshReshape(s, *in[0], meta);
    case Op::kSlice: case Op::kSelect: return MeshSliceOrSelect(s, *in[0]);
    default: return MeshElementwise(s, in, meta);
  }
}

Result<Placement> MeshRedistribute(Step& s, const Tensor& x, const TensorMeta& meta) {
  if (s.inst->attrs.axes.empty() || s.inst->attrs.axes[0] != kMeshLayout) {  // from a mesh to a 1-D layout
    const Tensor copies = Unmesh(s, x);
    return Redistribute(s, {&copies}, meta);
  }
  Result<Placement> target = MeshTarget(*s.inst, x, *s.workers);
  if (!target.ok()) return target.status();
  const Tensor moved = Conform(s, OnMesh(s, x, *target), target->mesh_axes);
  // Each piece copied into a tensor of the result's own (x keeps its pieces).
  target->ids = EachWorker(s, *target, {moved}, true, Op::kClone);
  return target;
}

Result<Placement> MeshCreation(Step& s, const Config& config, const TensorMeta& meta) {
  Placement target;
  target.kind = Placement::Kind::kMesh;
  target.workers = config.workers;
  target.mesh_shape = config.mesh_shape;
  target.mesh_axes = config.mesh_axes;
  // A dim too short to give each worker of its axis a piece is copied along that axis instead
  // (as a 1-D split over fewer workers would leave some without one).
  for (size_t a = 0; a < target.mesh_axes.size(); ++a) {
    MeshAxis& m = target.mesh_axes[a];
    if (!m.shard()) continue;
    m.dim = Wrap(m.dim, meta.shape.size());
    const size_t n = AxisSize(target, a);
    if (ChunkSizes(meta.shape[static_cast<size_t>(m.dim)], n).size() != n) m = ReplicateAxis();
  }
  if (s.inst->op == Op::kZeros || s.inst->op == Op::kOnes) {  // each piece made where it lives
    for (size_t k = 0; k < target.workers.size(); ++k) {
      Instruction piece = *s.inst;
      piece.attrs.shape = LocalShape(meta.shape, target, k);
      target.ids.push_back(NewId(*s.client));
      piece.results = {target.ids.back()};
      EmitOn(s, target.workers[k], std::move(piece));
    }
    return target;
  }
  // Values that must match a one-worker run: made whole on the mesh's first worker, then
  // copied and cut, each piece a tensor of its own. A payload that cannot be the tensor is
  // refused here: made there, it would fail, and the copies would carry a stand-in.
  if (s.inst->op == Op::kFromBytes &&
      (s.inst->payload ? s.inst->payload->size() : 0) != static_cast<size_t>(NumElements(meta.shape)) * ElementSize(meta.dtype))
    return InvalidArgument(s.inst->Describe() + ": payload size does not match shape and dtype");
  Instruction whole = *s.inst;
  const TensorId id = NewId(*s.client);
  whole.results = {id};
  EmitOn(s, target.workers[0], std::move(whole));
  s.temporaries.emplace_back(target.workers[0], id);
  const Tensor made{meta, Placement{Placement::Kind::kWhole, {target.workers[0]}, {id}, 0, {}}};
  const Tensor moved = Conform(s, OnMesh(s, made, target), target.mesh_axes);
  target.ids = EachWorker(s, target, {moved}, true, Op::kClone);
  return target;
}

void SumMeshPartials(Step& s, Tensor& t) {
  if (!HasPartialAxis(t.placement)) return;  // summed already
  Tensor cur = t;
  for (size_t a = 0; a < cur.placement.mesh_axes.size(); ++a)
    if (cur.placement.mesh_axes[a].partial()) cur = GatherAxis(s, cur, a);
  Keep(s, cur.placement.ids);
  for (size_t k = 0; k < t.placement.workers.size(); ++k) s.temporaries.emplace_back(t.placement.workers[k], t.placement.ids[k]);
  t.placement = cur.placement;
}

namespace {
bool HasId(const std::vector<TensorId>& ids, TensorId id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }
}  // namespace

void MakeCopies(Step& s, Tensor& t) {
  const Placement old = t.placement;
  t.placement = Unmesh(s, t).placement;
  Keep(s, t.placement.ids);
  for (size_t k = 0; k < old.workers.size(); ++k)
    if (!HasId(t.placement.ids, old.ids[k])) s.temporaries.emplace_back(old.workers[k], old.ids[k]);
}

Tensor Unmesh(Step& s, const Tensor& t) {
  Tensor cur = t;
  for (size_t a = 0; a < cur.placement.mesh_axes.size(); ++a) cur = GatherAxis(s, cur, a);
  return Tensor{t.meta, Placement{Placement::Kind::kReplicated, t.placement.workers, cur.placement.ids, 0, {}}};
}

}  // namespace gt::sharding
