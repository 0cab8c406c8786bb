// The sharding strategies: how one op on placed operands becomes
// per-worker instructions and collectives, and the placement of its
// result. Each strategy writes through a Step (step.h) and returns the
// result's placement with its ids filled in (for an op that makes no
// tensor, the placement it ran in, without ids), or an error for the
// client. The strategy table (strategy_table.h) picks one per op; the rows
// of the table in sharding.h name what each one does.
//
//   strategies.cc           Whole, Elementwise, Matmul, Reduce, Softmax, Cat
//   movement_strategies.cc  Movement (reshape, transpose, unsqueeze, squeeze,
//                           permute), SliceOrSelect, Redistribute
//   indexing_strategies.cc  IndexSelect, IndexAdd, GatherOrScatter, Triangle
//   creation.cc             Creation (creation ops in a scope with a config)
//   batch_strategies.cc     Batch (conv2d, pooling)
//
// REQUIRES (every strategy): `in` holds the op's operands in order, with
// records (none is an unrecorded tensor); `meta` is the result's inferred
// shape and dtype (empty for an op that makes no tensor).
// Thread-safety: free functions; all state is in the Step.
#pragma once

#include <cstdint>
#include <vector>

#include "bookkeeping.h"
#include "gt/status.h"
#include "placement.h"
#include "step.h"

namespace gt::sharding {

// Every operand assembled whole on one worker (the first operand's, or the
// first worker of its placement; with none, the client's worker); the op
// runs there. A mutation of a destination that is not whole is Elementwise.
Result<Placement> Whole(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
// Binary, unary and mutating ops: shard-local with the lead operand (the
// destination of a mutation, else the first sharded, else the first
// replicated one); the others cut like it or copied to its workers.
Result<Placement> Elementwise(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
// Elementwise with `lead` given: the result is laid out as `lead` is (cut,
// or copies), every other operand cut or copied to match; whole when `lead`
// is null or whole.
Result<Placement> ElementwiseLedBy(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta,
                                   const Tensor* lead);
// adam_step: parameter and optimizer state laid out alike, else an error.
Result<Placement> FusedUpdate(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
// A @ B by the placements of A and B (see sharding.h).
Result<Placement> Matmul(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
// Reductions: shard-local over other axes; over the sharded axis, local
// partials and an all-reduce (a mean: sum, then divided by the count).
Result<Placement> Reduce(Step& s, const Tensor& t, const TensorMeta& meta);
// softmax / log_softmax: shard-local along an unsharded dim; along the
// sharded one, all-reduces of the max and the sum, staying sharded.
Result<Placement> Softmax(Step& s, const Tensor& t, const TensorMeta& meta);
// sum_of_squares: each worker squares and sums what it holds (its pieces of
// cut operands, the whole ones on it, one copy of each copied one) in one
// instruction, and those sums stay a pending sum: nothing is gathered, and
// an operand named many times costs no more collectives than once.
Result<Placement> SumOfSquares(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
// Cat along a dim that is not cut: shard-local, operands cut like the first
// sharded one (replicas alike: on every replica).
Result<Placement> Cat(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
// Reshape, transpose, unsqueeze, squeeze and permute (see sharding.h).
Result<Placement> Movement(Step& s, const Tensor& t, const TensorMeta& meta);
// Slice and select (see sharding.h).
Result<Placement> SliceOrSelect(Step& s, const Tensor& t, const TensorMeta& meta);

// index_select, index_add, gather / scatter_add, tril / triu (see sharding.h).
Result<Placement> IndexSelect(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
Result<Placement> IndexAdd(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
Result<Placement> GatherOrScatter(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
Result<Placement> Triangle(Step& s, const Tensor& t, const TensorMeta& meta);

// conv2d, the poolings and their backwards (batch_strategies.cc): a 4-D
// input cut along dim 0 stays cut, weights copied to its workers; a conv's
// weight gradient is then a pending sum. Anything else: Whole.
Result<Placement> Batch(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);

// Pending sums carried through an op linear in them (CarriesPartial): the
// op on every member's addend, a pending sum again.
Result<Placement> CarryPartial(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
// True when `inst` on `in` keeps its pending-sum operands pending: a
// redistribute (which reduce-scatters or all-reduces them itself), a copy,
// a negation, a sum or mean over dims, a view (reshape, transpose, permute,
// unsqueeze, squeeze, slice, select: of each addend; the stage makes it again
// from the summed base when either is summed), a product or quotient by a
// finite nonzero number, a sum or difference of two pending sums alike (same
// workers, shape and dtype as the result).
bool CarriesPartial(const Instruction& inst, const std::vector<const Tensor*>& in, const TensorMeta& meta);
// redistribute: x copied into the layout the instruction names (gt/op.h),
// by the collectives that change needs (none when x is there already: each
// piece is copied where it lives). A split over fewer workers than named
// when the dim is short (torch.chunk); one piece, or one copy, is whole.
// Fails for a worker that is not live or named twice, an axis out of range,
// a dim of size 0 to split, or a layout that is none of the three.
Result<Placement> Redistribute(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
// A creation op (s.inst) placed by `config` (null: none applies): shards
// made on their workers (in place, from the split payload, or made whole
// and sliced), replicas, or whole on the client's worker. `meta` is the
// created tensor's. REQUIRES: `config` was checked (CheckConfig) against
// `meta`. Fails when a split payload does not match its shape.
Result<Placement> Creation(Step& s, const Config* config, const TensorMeta& meta);

// `dim` counted from the front (a negative one counts from the back).
inline int64_t Wrap(int64_t dim, size_t rank) { return dim < 0 ? dim + static_cast<int64_t>(rank) : dim; }

}  // namespace gt::sharding
