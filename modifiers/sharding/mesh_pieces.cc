// The geometry of a 2-D mesh placement and the moves along one mesh axis
// (mesh_pieces.h).
#include "mesh_pieces.h"

#include <algorithm>

#include "mesh.h"
#include "strategies.h"

namespace gt::sharding {

MeshAxis ShardAxis(int64_t dim) { return MeshAxis{MeshAxis::Kind::kShard, dim}; }
MeshAxis ReplicateAxis() { return MeshAxis{}; }
MeshAxis PartialAxis() { return MeshAxis{MeshAxis::Kind::kPartial, 0}; }

// ---- geometry: worker k of a mesh is at (k / columns, k % columns) ----------

size_t Columns(const Placement& p) { return static_cast<size_t>(p.mesh_shape[1]); }
size_t AxisSize(const Placement& p, size_t axis) { return static_cast<size_t>(p.mesh_shape[axis]); }
size_t CoordOf(const Placement& p, size_t k, size_t axis) { return axis == 0 ? k / Columns(p) : k % Columns(p); }

// The groups along `axis`: the members of each vary only in their coordinate on it.
std::vector<std::vector<size_t>> Groups(const Placement& p, size_t axis) {
  const size_t rows = AxisSize(p, 0), columns = Columns(p);
  std::vector<std::vector<size_t>> out(axis == 0 ? columns : rows);
  for (size_t k = 0; k < rows * columns; ++k) out[axis == 0 ? k % columns : k / columns].push_back(k);
  return out;
}

// Where worker k's piece of dim `dim` starts and how long it is.
std::pair<int64_t, int64_t> PieceOf(const Shape& shape, const Placement& p, size_t k, size_t dim) {
  for (size_t a = 0; a < p.mesh_axes.size(); ++a) {
    const MeshAxis& m = p.mesh_axes[a];
    if (!m.shard() || static_cast<size_t>(m.dim) != dim) continue;
    const std::vector<int64_t> sizes = ChunkSizes(shape[dim], AxisSize(p, a));
    const size_t c = CoordOf(p, k, a);
    int64_t start = 0;
    for (size_t i = 0; i < c && i < sizes.size(); ++i) start += sizes[i];
    return {start, c < sizes.size() ? sizes[c] : 0};
  }
  return {0, shape[dim]};
}

Shape LocalShape(const Shape& shape, const Placement& p, size_t k) {
  Shape out = shape;
  for (size_t d = 0; d < shape.size(); ++d) out[d] = PieceOf(shape, p, k, d).second;
  return out;
}

Placement MeshLike(const Placement& like, Axes axes, std::vector<TensorId> ids) {
  Placement p;
  p.kind = Placement::Kind::kMesh;
  p.workers = like.workers;
  p.mesh_shape = like.mesh_shape;
  p.mesh_axes = std::move(axes);
  p.ids = std::move(ids);
  return p;
}

// The 1-D tensor a group along `axis` forms: its shape the piece the other
// axis leaves it, laid out over the group as `axis` says.
Tensor GroupTensor(const Tensor& t, size_t axis, const std::vector<size_t>& group) {
  const Placement& p = t.placement;
  Placement uncut = p;
  uncut.mesh_axes[axis] = ReplicateAxis();
  Tensor sub{TensorMeta{LocalShape(t.meta.shape, uncut, group[0]), t.meta.dtype}, Placement{}};
  sub.made_by = t.made_by;
  for (size_t k : group) {
    sub.placement.workers.push_back(p.workers[k]);
    sub.placement.ids.push_back(p.ids[k]);
  }
  const MeshAxis& m = p.mesh_axes[axis];
  if (m.shard()) {
    sub.placement.kind = Placement::Kind::kSharded;
    sub.placement.axis = m.dim;
    sub.placement.sizes = ChunkSizes(sub.meta.shape[static_cast<size_t>(m.dim)], group.size());
  } else {
    sub.placement.kind = m.partial() ? Placement::Kind::kPartial : Placement::Kind::kReplicated;
  }
  return sub;
}

// `t` with `axis` made Replicate(): all-gathered (Shard) or all-reduced
// (Partial) within each group along it. New pieces are temporaries.
Tensor GatherAxis(Step& s, const Tensor& t, size_t axis) {
  const MeshAxis m = t.placement.mesh_axes[axis];
  if (m.replicate()) return t;
  Tensor out = t;
  out.placement.mesh_axes[axis] = ReplicateAxis();
  for (const std::vector<size_t>& group : Groups(t.placement, axis)) {
    const Tensor sub = GroupTensor(t, axis, group);
    std::vector<TensorId> ids;
    if (m.shard()) {
      ids = CopiesOn(s, sub, sub.placement.workers);
    } else {
      ids = AllReduce(s, sub.placement, sub.placement.ids, sub.meta, 0, t.made_by);
      for (size_t r = 0; r < group.size(); ++r) s.temporaries.emplace_back(sub.placement.workers[r], ids[r]);
    }
    for (size_t r = 0; r < group.size(); ++r) out.placement.ids[group[r]] = ids[r];
  }
  return out;
}

// `t` (Partial() on `axis`) summed and cut along `dim` over `axis`: a
// reduce-scatter within each group (half the bytes of an all-reduce). New
// pieces are temporaries.
Tensor ReduceScatterAxis(Step& s, const Tensor& t, size_t axis, int64_t dim) {
  Tensor out = t;
  out.placement.mesh_axes[axis] = ShardAxis(dim);
  for (const std::vector<size_t>& group : Groups(t.placement, axis)) {
    const Tensor sub = GroupTensor(t, axis, group);
    Placement like = sub.placement;
    like.kind = Placement::Kind::kSharded;
    like.axis = dim;
    like.sizes = ChunkSizes(sub.meta.shape[static_cast<size_t>(dim)], group.size());
    const std::vector<TensorId> ids = ReduceScatter(s, sub, like);
    for (size_t r = 0; r < group.size(); ++r) {
      s.temporaries.emplace_back(sub.placement.workers[r], ids[r]);
      out.placement.ids[group[r]] = ids[r];
    }
  }
  return out;
}

// `t` (Replicate() on `axis`) cut along `dim` over `axis`: each worker
// slices its piece locally. New pieces are temporaries.
Tensor SliceAxis(Step& s, const Tensor& t, size_t axis, int64_t dim) {
  Tensor out = t;
  out.placement.mesh_axes[axis] = ShardAxis(dim);
  for (size_t k = 0; k < t.placement.workers.size(); ++k) {
    const auto [start, length] = PieceOf(t.meta.shape, out.placement, k, static_cast<size_t>(dim));
    Instruction slice;
    slice.op = Op::kSlice;
    slice.attrs.axes = {dim, start, start + length, 1};
    slice.operands = {t.placement.ids[k]};
    const TensorId id = NewId(*s.client);
    slice.results = {id};
    EmitOn(s, t.placement.workers[k], std::move(slice));
    s.temporaries.emplace_back(t.placement.workers[k], id);
    out.placement.ids[k] = id;
  }
  return out;
}

// `t` laid out as `target` says on the mesh `t` is on: gathered along every
// axis where it is cut otherwise, then sliced where the target cuts.
Tensor Conform(Step& s, const Tensor& t, const Axes& target) {
  Tensor cur = t;
  for (size_t a = 0; a < target.size(); ++a) {
    const MeshAxis& m = cur.placement.mesh_axes[a];
    if (m == target[a]) continue;
    // A pending sum cut where the other axis does not already cut: reduce-scattered.
    const bool scatter = m.partial() && target[a].shard() && !(cur.placement.mesh_axes[1 - a] == target[a]);
    cur = scatter ? ReduceScatterAxis(s, cur, a, target[a].dim) : GatherAxis(s, cur, a);
  }
  for (size_t a = 0; a < target.size(); ++a)
    if (target[a].shard() && cur.placement.mesh_axes[a].replicate()) cur = SliceAxis(s, cur, a, target[a].dim);
  return cur;
}

// `t` on the mesh of `like`: itself when it is there, else a copy on every
// mesh worker (Replicate() on each axis; temporaries).
Tensor OnMesh(Step& s, const Tensor& t, const Placement& like) {
  if (t.placement.mesh() && t.placement.workers == like.workers && t.placement.mesh_shape == like.mesh_shape) return t;
  const Tensor copies = t.placement.mesh() ? Unmesh(s, t) : t;
  return Tensor{t.meta, MeshLike(like, Axes(like.mesh_axes.size()), CopiesOn(s, copies, like.workers))};
}

// The lead's axes as another operand of an elementwise op sees them: a dim
// it broadcasts along (missing, or of size 1) stays whole there.
Axes AxesFor(const Axes& out_axes, const Shape& out_shape, const Shape& shape) {
  const int64_t offset = static_cast<int64_t>(out_shape.size()) - static_cast<int64_t>(shape.size());
  Axes axes = out_axes;
  for (MeshAxis& m : axes) {
    if (!m.shard()) continue;
    const int64_t d = m.dim - offset;
    m = d >= 0 && shape[static_cast<size_t>(d)] == out_shape[static_cast<size_t>(m.dim)] ? ShardAxis(d) : ReplicateAxis();
  }
  return axes;
}

// s.inst on every mesh worker k, its operands operands[i].placement.ids[k];
// the results (one per worker) when it makes one.
std::vector<TensorId> EachWorker(Step& s, const Placement& mesh, const std::vector<Tensor>& operands, bool makes,
                                 Op op) {
  std::vector<TensorId> ids;
  for (size_t k = 0; k < mesh.workers.size(); ++k) {
    Instruction piece;
    piece.op = op;
    if (op == s.inst->op || op == Op::kSum) piece.attrs = s.inst->attrs;  // else a clone of each piece
    for (const Tensor& t : operands) piece.operands.push_back(t.placement.ids[k]);
    piece.results.clear();
    if (makes) {
      ids.push_back(NewId(*s.client));
      piece.results = {ids.back()};
    }
    EmitOn(s, mesh.workers[k], std::move(piece));
  }
  return ids;
}

int ShardCount(const Placement& p) {
  return static_cast<int>(std::count_if(p.mesh_axes.begin(), p.mesh_axes.end(), [](const MeshAxis& m) { return m.shard(); }));
}

}  // namespace gt::sharding
