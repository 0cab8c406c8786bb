// The closed operation set of gt.
//
// Every op is one row of gt/ops.def, the op table: its wire number, name,
// kind, arity and the rule families the rest of gt reads (shape and dtype,
// autograd, sharding strategy, compiled-unit symbol). The Op enum and
// GetOpInfo() are made from it; code that treats ops alike asks the table
// (ShapeRuleOf, GradRuleOf, ShardRuleOf, ...) instead of listing ops, and
// only per-op code that is genuinely specific (a kernel, a gradient formula,
// a Tensor method) names an op. Adding an op: docs/ADDING_AN_OP.md.
// Switches over a rule family list every value with no `default:`, so
// -Wswitch (an error: gt builds with -Werror) flags a family one forgets.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gt {

enum class OpKind : uint8_t { kCreate, kBinary, kContract, kUnary, kReduce, kMovement, kMutate, kControl, kCollective };

// Which shape and dtype rule (ir/shape_inference.cc) gives an op's result;
// the torch backend routes its kernels by it too. kNone: no tensor result.
enum class ShapeRule : uint8_t {
  kNone,
  kCreate,
  kBinary,        // broadcasting; result type by DTypeRule
  kWhere,         // three operands broadcast (or two and a scalar)
  kMatmul,
  kUnary,         // one operand, its shape; result type by DTypeRule
  kTriangle,      // tril / triu: rank >= 2, one diagonal
  kGradPair,      // a fused backward {grad, x}
  kRedistribute,  // a copy laid out anew; the shape and dtype stated
  kReduce,        // axes and keepdims
  kArgReduce,     // one dim or none, int64 positions
  kSumOfSquares,
  kCrossEntropy,  // the loss and its backward
  kMseLoss,       // the loss and its backward
  kMovement,      // one operand: reshape, transpose, ..., select
  kCat,
  kIndexVector,   // a 1-D index along a dim (index_select, index_add)
  kIndexTensor,   // an index of the tensor's rank (gather, scatter_add)
  kConv,          // conv2d and its backward
  kPool,          // the 2-D poolings and their backwards
};

// The result type of a kUnary or kBinary rule.
enum class DTypeRule : uint8_t {
  kPromoted,  // the operands' promoted type (a unary op's: its operand's)
  kFloating,  // as kPromoted, an integer or bool one made float32
  kBool,      // a mask
};

// kNone: no gradient (the autograd never records the op). Else the op has
// a formula (client/src/grad_formulas.cc), and this says which values of the
// forward op it reads, which must not have changed in place since.
enum class GradRule : uint8_t {
  kNone,
  kShapes,          // shapes only
  kInput,           // input 0
  kOutput,          // the output
  kInputAndOutput,  // input 0 and the output
  kIndex,           // input 1 (an index)
  kOperands,        // inputs 0 and 1
  kCustom,          // depends on the scalar side and on which inputs need a gradient
};

// The sharding stage's strategy for an op whose operands are placed
// (modifiers/sharding/strategy_table.cc).
enum class ShardRule : uint8_t {
  kWhole,  // operands assembled whole on one worker
  kElementwise,
  kFusedUpdate,
  kMatmul,
  kReduce,
  kMovement,
  kNormalizedRows,
  kSoftmax,
  kSliceOrSelect,
  kCat,
  kSelectByIndex,
  kAddByIndex,
  kGatherOrScatter,
  kTriangle,
  kSumOfSquares,
  kBatch,  // samples along dim 0 each computed alone; the other operands (weights) copied
};

// Who may send an op to the dispatcher. The dispatcher admits from a client
// connection only kClientOrHost ops, checked once before any stage sees them.
enum class Sender : uint8_t {
  kClientOrHost,
  kHostOnly,  // made by the dispatcher and its stages (membership, collectives, client drops)
};

// The flags column of gt/ops.def.
inline constexpr uint8_t kHostOnly = 1;  // Sender::kHostOnly
inline constexpr uint8_t kView = 2;      // the result is a view of operand 0 (an ATen view)
inline constexpr uint8_t kGrows = 4;     // the result may hold more bytes than its operands
// The arity column where the count of tensor operands varies.
inline constexpr int8_t kVariadic = -1;

namespace op_table {
// The wire numbers of ops.def's rows, in row order.
inline constexpr uint16_t kWires[] = {
#define GT_OP(op, wire, ...) wire,
#include "gt/ops.def"
#undef GT_OP
};
inline constexpr size_t kRows = sizeof(kWires) / sizeof(kWires[0]);
// True when the wire numbers are 0..kRows-1, each once: arrays indexed by
// op (metrics, the table itself) and the decoder's range check rely on it.
constexpr bool WiresDense() {
  for (size_t w = 0; w < kRows; ++w) {
    size_t seen = 0;
    for (uint16_t x : kWires) seen += x == w;
    if (seen != 1) return false;
  }
  return true;
}
static_assert(WiresDense(), "ops.def: wire numbers must be 0..n-1, each used once (a new op takes the next)");
}  // namespace op_table

enum class Op : uint16_t {
#define GT_OP(op, wire, ...) op = wire,
#include "gt/ops.def"
#undef GT_OP
  kCount = op_table::kRows,
};


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

struct OpInfo {
  Op op;
  std::string_view name;  // stable, lower-case; used in logs, metrics labels, errors
  OpKind kind;
  int8_t arity;           // tensor operands of the plain form; kVariadic
  ShapeRule shape;
  DTypeRule dtype;
  GradRule grad;
  ShardRule shard;
  uint8_t flags;          // kHostOnly, kView, kGrows
  const char* aten;       // "aten::add", or null: no 1:1 TorchScript operator
  Sender sender() const { return (flags & kHostOnly) ? Sender::kHostOnly : Sender::kClientOrHost; }
};

// REQUIRES: op < Op::kCount.
const OpInfo& GetOpInfo(Op op);
// False for the ops no backend receives: kSync (the worker answers it), and
// kConfigure and kMembership (for the dispatcher's stages only). Hot markers
// do reach a backend when no compile stage consumed them (it ignores them).
bool OpReachesBackend(Op op);
inline std::string_view OpName(Op op) { return GetOpInfo(op).name; }
inline OpKind KindOf(Op op) { return GetOpInfo(op).kind; }
inline bool ClientMaySend(Op op) { return GetOpInfo(op).sender() == Sender::kClientOrHost; }
inline ShapeRule ShapeRuleOf(Op op) { return GetOpInfo(op).shape; }
inline GradRule GradRuleOf(Op op) { return GetOpInfo(op).grad; }
inline ShardRule ShardRuleOf(Op op) { return GetOpInfo(op).shard; }
inline bool HasOpFlag(Op op, uint8_t flag) { return (GetOpInfo(op).flags & flag) != 0; }
// True for ops the autograd records (GradRule other than kNone).
inline bool Differentiable(Op op) { return GradRuleOf(op) != GradRule::kNone; }
// Inverse of OpName.
std::optional<Op> ParseOp(std::string_view name);
// True for ops that yield one tensor result (kRunUnit yields several and is a
// control op: see gt/unit.h).
inline bool ProducesTensor(Op op) { return KindOf(op) != OpKind::kControl && KindOf(op) != OpKind::kMutate; }

}  // namespace gt
