// The pieces mesh.cc builds its ops and changes of layout from: the
// geometry of a 2-D mesh placement (worker k at row k / columns, column
// k % columns; the groups along an axis; each worker's piece) and the moves
// along one mesh axis (gather, reduce-scatter, local slice), into which a
// change of a whole per-axis layout (Conform) decomposes. Internal to the
// sharding runtime: only mesh.cc and mesh_pieces.cc include it.
//
// Thread-safety: free functions; all state is in the Step.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "placement.h"
#include "step.h"

namespace gt::sharding {

using Axes = std::vector<MeshAxis>;

MeshAxis ShardAxis(int64_t dim);
MeshAxis ReplicateAxis();
MeshAxis PartialAxis();

// ---- geometry: worker k of a mesh is at (k / columns, k % columns) ----------
// REQUIRES for every function taking a Placement: p.mesh().

size_t Columns(const Placement& p);
size_t AxisSize(const Placement& p, size_t axis);
size_t CoordOf(const Placement& p, size_t k, size_t axis);
// The groups along `axis`: the members of each vary only in their coordinate on it.
std::vector<std::vector<size_t>> Groups(const Placement& p, size_t axis);
// Where worker k's piece of dim `dim` starts and how long it is.
std::pair<int64_t, int64_t> PieceOf(const Shape& shape, const Placement& p, size_t k, size_t dim);
// Worker k's piece of a tensor of `shape` laid out as `p`.
Shape LocalShape(const Shape& shape, const Placement& p, size_t k);
// A mesh placement on `like`'s mesh with `axes` (and `ids`, one per worker).
Placement MeshLike(const Placement& like, Axes axes, std::vector<TensorId> ids = {});

// ---- moves along one mesh axis, and whole layouts -----------------------------

// The 1-D tensor a group along `axis` forms: its shape the piece the other
// axis leaves it, laid out over the group as `axis` says.
Tensor GroupTensor(const Tensor& t, size_t axis, const std::vector<size_t>& group);
// `t` with `axis` made Replicate(): all-gathered (Shard) or all-reduced
// (Partial) within each group along it. New pieces are temporaries.
Tensor GatherAxis(Step& s, const Tensor& t, size_t axis);
// `t` (Partial() on `axis`) summed and cut along `dim` over `axis`: a
// reduce-scatter within each group (half the bytes of an all-reduce). New
// pieces are temporaries.
Tensor ReduceScatterAxis(Step& s, const Tensor& t, size_t axis, int64_t dim);
// `t` (Replicate() on `axis`) cut along `dim` over `axis`: each worker
// slices its piece locally. New pieces are temporaries.
Tensor SliceAxis(Step& s, const Tensor& t, size_t axis, int64_t dim);
// `t` laid out as `target` says on the mesh `t` is on: gathered along every
// axis where it is cut otherwise, then sliced where the target cuts.
Tensor Conform(Step& s, const Tensor& t, const Axes& target);
// `t` on the mesh of `like`: itself when it is there, else a copy on every
// mesh worker (Replicate() on each axis; temporaries).
Tensor OnMesh(Step& s, const Tensor& t, const Placement& like);
// The lead's axes as another operand of an elementwise op sees them: a dim
// it broadcasts along (missing, or of size 1) stays whole there.
Axes AxesFor(const Axes& out_axes, const Shape& out_shape, const Shape& shape);
// s.inst on every mesh worker k, its operands operands[i].placement.ids[k];
// the results (one per worker) when it makes one.
std::vector<TensorId> EachWorker(Step& s, const Placement& mesh, const std::vector<Tensor>& operands, bool makes,
                                 Op op);
// How many of p's mesh axes are Shard().
int ShardCount(const Placement& p);

}  // namespace gt::sharding
