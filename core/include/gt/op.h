// The closed operation set of gt.
//
// Every instruction names one Op. Adding an op means: a value here, a row in
// kOpTable (core/ir/types.cc, checked against kCount at compile time), a
// shape rule in shape_inference.cc, an autograd rule, a kernel in each
// backend, a sharding strategy, and a case in the conformance test
// (tests/conformance_test.cc). The compiler lists the places: the per-op
// switch of each (InferResult, Differentiable, the torch backend's Dispatch
// and Compute, the sharding stage's StrategyFor) names every op with no
// `default:`, so -Wswitch (an error: gt builds with -Werror) flags an op one
// of them forgets. Helpers below those switches serve one kind of op and may
// end in a default that fails loudly.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gt {

enum class Op : uint16_t {
  // Creation: no operands, one result.
  kFromBytes = 0,  // payload bytes + shape + dtype
  kRandn,          // shape, dtype, seed (0: backend's generator)
  kZeros,
  kOnes,
  kRand,    // uniform [0, 1); shape, dtype, seed
  kArange,  // attrs.numbers = {start, end, step}; dtype
  // Elementwise binary: (a, b) or (a, scalar) / (scalar, a); broadcasting.
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kGt,  // comparisons yield a bool mask, as PyTorch's
  kLt,
  kGe,
  kLe,
  kEq,
  // Contraction.
  kMatmul,
  // Elementwise unary.
  kRelu,
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kSqrt,
  kNeg,
  kAbs,
  kClone,
  kSoftmax,     // axes = {dim}
  kLogSoftmax,  // axes = {dim}
  // Reductions: axes (empty = all), keepdims.
  kSum,
  kMean,
  kMax,
  kMin,
  // Movement.
  kReshape,    // shape (may hold one -1)
  kTranspose,  // axes = {dim0, dim1}; empty = swap the last two
  kUnsqueeze,  // axes = {dim}
  kSqueeze,    // axes = {dim}; empty = every dimension of size 1
  kPermute,    // axes = the new order of dimensions
  kSlice,      // axes = {dim, start, stop, step}; start/stop already clamped, step > 0
  kSelect,     // axes = {dim, index}; removes dim
  kCat,        // operands concatenated along axes = {dim}
  // Mutation: no result; operands[0] is changed in place.
  kCopyInto,  // operands = {destination, source}; source broadcast and cast to destination
  kFill,      // operands = {destination}; every element set to attrs.scalar
  // Control: produce no tensor.
  kFetch,       // send operand's bytes back to the client
  kFree,        // forget operands
  kSync,        // barrier; carries attrs.sync_id
  kDropClient,  // free every tensor of the instruction's client
  // Hot paths and compiled units (see gt/unit.h). Control ops: they produce no
  // tensor of their own kind; a backend ignores the markers.
  kHotStart,    // marker: a sequence starts; attrs.seed = signature id (0: a compile scope
                // opened by the client), attrs.axes = {length} (empty when not known)
  kHotEnd,      // marker: the sequence kHotStart opened ends; same attributes
  kDefineUnit,  // payload = EncodeUnit(template); attrs.seed = unit key
  kRunUnit,     // attrs.seed = unit key; operands = the unit's inputs; results = its
                // outputs (UnitInterface order); attrs.axes = indexes of the operands it frees
  // Signals and sharding. kConfigure and kMembership are control ops that
  // only the dispatcher's stages see; the collectives run on a worker
  // together with the other members of their group (see "Collectives" below).
  kConfigure,   // client -> dispatcher: the config of signal `signal` (see below)
  kMembership,  // dispatcher -> its own stages: live worker indexes in attrs.shape
  kBroadcast,   // collective: the root's operand, copied to every member
  kAllReduce,   // collective: elementwise sum (scalar 0), max (1) or min (2) over members
  kAllGather,   // collective: the members' pieces concatenated along a dim
  // Index reductions (after the rest so that older ops keep their numbers):
  // axes = {dim} (keepdims applies) or empty (over the flattened tensor: a
  // 0-d result); the result is int64 positions of the first maximum/minimum.
  kArgMax,
  kArgMin,
  // A transformer's building blocks (after the rest, likewise):
  kErf,    // elementwise error function (a floating result), for the exact GELU
  kWhere,  // elementwise choice, broadcasting: operands {cond, a, b} give cond ? a : b
           // (cond: bool or a mask, nonzero is true; the result type a's and b's
           // promoted); scalar_side kLeft: operands {cond, b}, a = attrs.scalar;
           // kRight: operands {cond, a}, b = attrs.scalar (promoted as a binary
           // op's scalar: an integer tensor and 0.5 give float32)
  kTril,   // axes = {diagonal}: the elements above that diagonal of the last two
           // dims set to zero (rank >= 2)
  kTriu,   // axes = {diagonal}: the elements below it set to zero
  // Indexing, axes = {dim}; an index is int32 or int64, its values in range
  // (else the worker's error). Each "add" op makes a new tensor (as PyTorch's
  // out-of-place forms); repeated positions accumulate.
  kIndexSelect,  // operands {x, index (1-D)}: x's slices at index along dim
  kIndexAdd,     // operands {base, index (1-D), source}: base + source's slices added at index
  kGather,       // operands {x, index (x's rank)}: out[..i..] = x[..index[..i..]..] along dim
  kScatterAdd,   // operands {base, index, source}: base + source added at index along dim
  // One Adam / AdamW update of a parameter in place (a mutation of operands
  // 0, 2 and 3, as PyTorch's single-tensor AdamW): operands {param, grad,
  // exp_avg, exp_avg_sq}, one floating dtype and shape; attrs.numbers =
  // {lr, beta1, beta2, eps, weight_decay, bias_correction1,
  // bias_correction2}; attrs.keepdims: weight decay decoupled (AdamW).
  kAdamStep,
  // Placement (gt/distributed.h; after the rest, likewise).
  kRedistribute,  // operands {x}: a copy of x laid out as attrs.axes = {layout, axis,
                  // worker...} says (layout 0: whole on the one worker, -1 for x's first, 1: split along
                  // axis over the workers as torch.chunk, 2: a copy on each worker; 4: on a
                  // 2-D mesh, {4, rows, columns, kind_0, dim_0, kind_1, dim_1, worker...}
                  // with rows * columns workers row-major and per mesh axis kind 1 Shard(dim)
                  // or 2 Replicate(), DTensor's placements);
                  // attrs.shape / attrs.dtype = x's, as the client knows them (the
                  // dispatcher may not: a tensor made before the client's first config).
                  // The sharding stage performs it; a backend without one copies x.
  kInspect,       // control, answered like a fetch (one int64 vector, the op's seq) by the
                  // dispatcher's sharding stage: attrs.seed = 1: operands {x}, x's layout
                  // {layout, axis, n, worker_1..n, size_1..n} (sizes along axis when split;
                  // layout 3: a pending sum; 4: on a 2-D mesh, then {rows, columns,
                  // kind_0, dim_0, kind_1, dim_1}, kind 3 a pending sum along the axis);
                  // 2: start recording the client's collectives (no answer); 3: the
                  // recorded collectives, then stop: {entries, dropped (past the stage's
                  // cap)}, then per collective {seq, origin, op, reduce, bytes, n,
                  // member_1..n} (origin: the seq of the op that made a pending sum
                  // it reduces; else seq).
                  // Without a sharding stage the worker refuses it.
  kReduceScatter,  // collective: the members' tensors summed, member r keeping piece r along a dim
  // Fused forms of composites a transformer runs many times (forward and
  // backward one kernel each instead of five to twenty elementwise ops).
  kGelu,               // x * Phi(x), the exact erf form (PyTorch's default); a floating result
  kGeluBackward,       // operands {grad, x}, one shape and floating dtype: grad * d gelu(x) / dx
  kLayerNorm,          // (x - mean) / sqrt(var + eps) over the last attrs.axes = {dims} dims
                       // (biased variance), attrs.scalar = eps; no weight or bias (ops of
                       // their own); a floating result
  kLayerNormBackward,  // operands {grad, x}, one shape and floating dtype; attrs as kLayerNorm's:
                       // the gradient of kLayerNorm(x) with respect to x
  // Control, no result and no answer: the pending sums (DTensor's Partial)
  // among the operands are summed now, those on the same workers with one
  // dtype in one all-reduce (DDP's gradient bucketing; the optimizers and
  // clip_grad_norm_ send it for their gradients). Operands that are no
  // pending sum are left as they are; a backend without a sharding stage has
  // none and does nothing.
  kSettle,
  // clip_grad_norm_'s two steps, one op each: the norm over every gradient,
  // then each gradient scaled in place (after the rest, likewise).
  kMulInto,       // mutation: operands {destination, factor}; factor broadcast and cast to
                  // the destination, which is multiplied by it in place (Tensor.mul_)
  kSumOfSquares,  // operands {t_1, ..., t_n}, n >= 1, one floating dtype: a 0-d tensor of
                  // that dtype, the sum of the squares of every element of every operand
                  // (their squared 2-norm taken together)
  // SGD's update and `+=` / `-=` / Tensor.add_(other, alpha), one op where
  // they were a product, a sum and a copy_into with two fresh tensors.
  kAddInto,       // mutation: operands {destination, addend}; scalar = alpha: the
                  // destination += alpha * addend in place, the addend broadcast to the
                  // destination's shape and of its dtype (Tensor.add_(other, alpha=))
  kReluBackward,  // operands {grad, x}, one shape and floating dtype: grad where x > 0, else 0
                  // (ATen's threshold_backward; one kernel for the mask and the product)
  // cross_entropy with integer class targets, one op each way where it was
  // about 25 small ones (masks, log_softmax, gather, sums, scatter_add).
  // scalar = ignore_index (integral): rows whose target it is count for nothing.
  kCrossEntropy,          // operands {logits [N, C] floating, targets [N] int32/int64}: a 0-d tensor of
                          // the logits' dtype, the mean over the rows not ignored of
                          // -log_softmax(logits)[i, targets[i]] (NaN when every row is ignored)
  kCrossEntropyBackward,  // operands {grad 0-d, logits, targets} as above: the logits' gradient
                          // [N, C], grad * (softmax(logits) - one_hot(targets)) / rows not ignored,
                          // zero in the ignored rows
  // mse_loss, one op each way where it was a difference, a square and a mean
  // forward and about eight small ops backward.
  kMseLoss,          // operands {input, target}, one shape and floating dtype: the 0-d mean of
                     // (input - target)^2, in that dtype
  kMseLossBackward,  // operands {grad 0-d, input, target} as above: the input's gradient,
                     // grad * 2 * (input - target) / elements (the target's is its negation)
  kCount
};

enum class OpKind : uint8_t { kCreate, kBinary, kContract, kUnary, kReduce, kMovement, kMutate, kControl, kCollective };

// kConfigure: signal = the signal's name; attrs.axes = {shard axis} (empty:
// no shard); attrs.shape = the shard's worker indexes (empty: every live
// worker); attrs.keepdims = replicated; attrs.seed = 1 for compile: true;
// payload = the backward signal's name (none: no backward signal);
// attrs.scalar = 1: forget the signal's config instead.
//
// Collectives: one instruction per member, each sent to its member's worker
// (Instruction::worker) with one result there. attrs.numbers = the group's
// worker indexes in rank order (the same on every member); attrs.axes[0] =
// this member's rank; payload = the rendezvous store's "host:port#G", G the
// worker membership's generation (a group of the same workers in a newer
// generation is formed anew: a worker may have been replaced). Members
// execute a group's collectives in the same order (the dispatcher emits them
// together), so the bytes go worker to worker and never through the
// dispatcher.
//   kBroadcast: axes = {rank, root rank}; operands = {tensor} on the root,
//               none elsewhere; attrs.shape/dtype = the tensor's.
//   kAllReduce: axes = {rank}; operands = {local tensor}; attrs.scalar = op.
//   kReduceScatter: axes = {rank, dim, size_0, ..., size_n-1}: every member's
//               operand has the whole shape (attrs.shape); member r's result
//               is the sum's piece r, size_r along dim.
//   kAllGather: axes = {rank, dim, size_0, ..., size_n-1}: every member's
//               piece size along dim (pieces may differ in that dim only).

// Who may send an op to the dispatcher. The dispatcher admits from a client
// connection only kClientOrHost ops, checked once before any stage sees them.
enum class Sender : uint8_t {
  kClientOrHost,
  kHostOnly,  // made by the dispatcher and its stages (membership, collectives, client drops)
};

struct OpInfo {
  Op op;
  std::string_view name;  // stable, lower-case; used in logs, metrics labels, errors
  OpKind kind;
  Sender sender = Sender::kClientOrHost;
};

// REQUIRES: op < Op::kCount.
const OpInfo& GetOpInfo(Op op);
// False for the ops no backend receives: kSync (the worker answers it), and
// kConfigure and kMembership (for the dispatcher's stages only). Hot markers
// do reach a backend when no compile stage consumed them (it ignores them).
bool OpReachesBackend(Op op);
inline std::string_view OpName(Op op) { return GetOpInfo(op).name; }
inline OpKind KindOf(Op op) { return GetOpInfo(op).kind; }
inline bool ClientMaySend(Op op) { return GetOpInfo(op).sender == Sender::kClientOrHost; }
// Inverse of OpName.
std::optional<Op> ParseOp(std::string_view name);
// True for ops that yield one tensor result (kRunUnit yields several and is a
// control op: see gt/unit.h).
inline bool ProducesTensor(Op op) { return KindOf(op) != OpKind::kControl && KindOf(op) != OpKind::kMutate; }

}  // namespace gt
