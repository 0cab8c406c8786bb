// Tensors on a 2-D mesh with a placement per mesh axis (Placement::kMesh,
// placement.h): the ops that run there piece by piece, and the changes of
// layout to and from the 1-D layouts every other strategy works on. DTensor's
// propagation, per mesh axis:
//
//   Op                                   on a mesh
//   elementwise (the table's Elementwise  laid out as the lead (a mutation's destination,
//     row, adam_step)                      else the mesh operand with most Shard axes);
//                                          every other operand gathered along an axis
//                                          where it is cut otherwise, sliced locally where
//                                          it is a copy (a 1-D operand: copied onto every
//                                          mesh worker first)
//   matmul of two matrices               per axis: A Shard(0) -> Shard(0), B gathered;
//                                          B Shard(1) -> Shard(1), A gathered;
//                                          A Shard(1) or B Shard(0) -> Partial(), the
//                                          other sliced to match; both copies -> copies
//   transpose, permute (2+ dims)         local, the Shard dims renumbered
//   slice, select along an uncut dim     local (a select renumbers the cut dims after it)
//   reshape, unsqueeze, squeeze keeping  each piece reshaped to its part of the result
//     every cut dim whole (as many         (the dims around the cut ones regroup)
//     elements before it, same length)
//   sum, mean                            over a Shard dim: local, Partial(); else local
//   clone, neg, sum, mean, product or    a Partial() axis stays pending (each addend);
//     quotient by a number, sum or         a view sums it first (so that it shares data
//     difference of two laid out alike     with the summed tensor)
//   any other use of a Partial() axis    all-reduced within each group along it, once
//                                          (the record says Replicate() from then on)
//   anything else                        the mesh operands gathered into a copy on every
//                                          mesh worker (replicated), then the 1-D strategies;
//                                          for a view (a slice along a cut dim, say) the
//                                          operand's record itself becomes those copies, so
//                                          that writes through the view reach it
//   redistribute to a mesh layout        per axis: a Partial() axis to Shard(d) reduce-
//                                          scattered, to Replicate() all-reduced; a Shard
//                                          axis gathered where the target differs;
//                                          then sliced locally (from a 1-D layout: copies
//                                          on every mesh worker first); from a mesh to a
//                                          1-D layout: gathered into copies first
//
// Every worker holds a non-empty piece: a Shard(d) axis of n workers needs
// dim d to give n pieces under torch.chunk (the redistribute that makes the
// layout checks it; the ops above keep the lengths of the dims they cut).
//
// Thread-safety: free functions; all state is in the Step.
#pragma once

#include <vector>

#include "gt/layout.h"
#include "gt/status.h"
#include "placement.h"
#include "step.h"

namespace gt::sharding {

// The redistribute layout code (attrs.axes[0]) of a mesh target, whose
// encoding gt/layout.h (EncodeTarget, DecodeTarget) owns.
inline constexpr int64_t kMeshLayout = static_cast<int64_t>(layout::Kind::kOnMesh);

// True when `inst` runs piece by piece on its mesh operands (MeshOp); false
// when they are to be gathered into copies first (Unmesh).
bool MeshRuns(const Instruction& inst, const std::vector<const Tensor*>& in, const TensorMeta& meta);
// True when `inst` keeps its mesh operands' Partial() axes pending.
bool MeshCarries(const Instruction& inst, const std::vector<const Tensor*>& in, const TensorMeta& meta);
// s.inst on the mesh (REQUIRES: MeshRuns; no Partial() axis unless MeshCarries).
Result<Placement> MeshOp(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
// redistribute when its target or its operand is on a mesh (REQUIRES: x has
// no Partial() axis unless the target is a mesh layout): checks the target,
// then moves x there.
Result<Placement> MeshRedistribute(Step& s, const Tensor& x, const TensorMeta& meta);

// A creation op (s.inst) in a scope whose config is a mesh layout
// (REQUIRES: CheckConfig passed for `meta`): zeros and ones made piece by
// piece where they live; anything else made whole on the mesh's first
// worker, then copied and cut, each piece a tensor of its own. A Shard dim
// too short to give each worker of its axis a piece is copied along that
// axis instead.
Result<Placement> MeshCreation(Step& s, const Config& config, const TensorMeta& meta);

// `t`'s Partial() axes all-reduced (REQUIRES: t.placement.mesh()): its record
// changes; the addends are freed when the step ends.
void SumMeshPartials(Step& s, Tensor& t);
bool HasPartialAxis(const Placement& p);
// `t`'s record (REQUIRES: t.placement.mesh()) changed to a copy on each of
// its mesh workers (replicated), its pieces freed when the step ends: a view
// the mesh cannot make piece by piece is then a view of those copies.
void MakeCopies(Step& s, Tensor& t);
// `t` (REQUIRES: t.placement.mesh()) as a copy on each of its mesh workers:
// a replicated tensor whose pieces are temporaries of `s`.
Tensor Unmesh(Step& s, const Tensor& t);

}  // namespace gt::sharding
