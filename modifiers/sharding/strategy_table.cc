#include "strategy_table.h"

namespace gt::sharding {
namespace {

// The strategies of one tensor, run on the first operand (the only one).
Result<Placement> SoftmaxRow(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  return Softmax(s, *in[0], meta);
}
Result<Placement> ReduceRow(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  return Reduce(s, *in[0], meta);
}
Result<Placement> SliceOrSelectRow(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  return SliceOrSelect(s, *in[0], meta);
}
Result<Placement> TriangleRow(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  return Triangle(s, *in[0], meta);
}
// layer_norm and its backward normalize the trailing attrs.axes = {dims}
// dims: pieces cut along a leading dim are normalized alone, as an
// elementwise op's are, so such an operand leads and the others are cut
// like it (a gradient cut through the normalized dims, as `g * weight` with
// the weight sharded under FSDP comes, included); with none, copies lead;
// else the rows are assembled whole.
Result<Placement> NormalizedRows(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const std::vector<int64_t>& axes = s.inst->attrs.axes;
  const int64_t first_normalized = static_cast<int64_t>(meta.shape.size()) - (axes.size() == 1 ? axes[0] : 0);
  const Tensor* lead = nullptr;
  for (const Tensor* t : in)
    if (!lead && t->placement.sharded() && t->placement.axis < first_normalized) lead = t;
  for (const Tensor* t : in)
    if (!lead && t->placement.replicated()) lead = t;
  return ElementwiseLedBy(s, in, meta, lead);
}
Result<Placement> MovementRow(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  if (in.size() != 1) return Whole(s, in, meta);
  return Movement(s, *in[0], meta);
}

}  // namespace

Strategy StrategyFor(Op op) {
  switch (op) {
    // elementwise (matching shards; a smaller operand broadcast)
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv:
    case Op::kPow:
    case Op::kGt:
    case Op::kLt:
    case Op::kGe:
    case Op::kLe:
    case Op::kEq:
    case Op::kRelu:
    case Op::kSigmoid:
    case Op::kTanh:
    case Op::kExp:
    case Op::kLog:
    case Op::kSqrt:
    case Op::kNeg:
    case Op::kAbs:
    case Op::kErf:
    case Op::kWhere:  // three operands (condition, a, b), broadcasting
    case Op::kGelu:
    case Op::kGeluBackward:  // {grad, x}, one shape
    case Op::kReluBackward:
    case Op::kClone:
    case Op::kCopyInto:  // a mutation changes its destination where it lives
    case Op::kMulInto:
    case Op::kAddInto:
    case Op::kFill:
      return &Elementwise;
    // an optimizer step: its parameter and state where they live, alike
    case Op::kAdamStep:
      return &FusedUpdate;
    // A @ B (row-, inner-, column-sharded, replicated)
    case Op::kMatmul:
      return &Matmul;
    // reduction over the sharded axis / over other axes
    case Op::kSum:
    case Op::kMean:
    case Op::kMax:
    case Op::kMin:
    case Op::kArgMax:  // over the sharded axis: whole (positions need the whole axis)
    case Op::kArgMin:
      return &ReduceRow;
    // transpose, unsqueeze, permute, squeeze, reshape; movement of a replicated tensor
    case Op::kReshape:
    case Op::kTranspose:
    case Op::kUnsqueeze:
    case Op::kSqueeze:
    case Op::kPermute:
      return &MovementRow;
    // normalized over trailing dims: pieces cut before them / whole rows
    case Op::kLayerNorm:
    case Op::kLayerNormBackward:
      return &NormalizedRows;
    // softmax / log_softmax along an unsharded axis / along the sharded axis
    case Op::kSoftmax:
    case Op::kLogSoftmax:
      return &SoftmaxRow;
    // slice, select along an unsharded axis / along the sharded axis
    case Op::kSlice:
    case Op::kSelect:
      return &SliceOrSelectRow;
    // cat along an unsharded axis of identically sharded operands
    case Op::kCat:
      return &Cat;
    // indexing by positions along a dim
    case Op::kIndexSelect:
      return &IndexSelect;
    case Op::kIndexAdd:
      return &IndexAdd;
    case Op::kGather:
    case Op::kScatterAdd:
      return &GatherOrScatter;
    // tril / triu: the diagonal moved by a shard's offset
    case Op::kTril:
    case Op::kTriu:
      return &TriangleRow;
    // anything else: operands assembled whole on one worker. The stage
    // handles all of these before a strategy could see them, except the
    // markers, which take no operand.
    case Op::kRedistribute:  // RunStrategy's, whatever the placements
    case Op::kInspect:
    case Op::kSettle:
    case Op::kFromBytes:
    case Op::kRandn:
    case Op::kZeros:
    case Op::kOnes:
    case Op::kRand:
    case Op::kArange:
    case Op::kFetch:
    case Op::kFree:
    case Op::kSync:
    case Op::kDropClient:
    case Op::kHotStart:
    case Op::kHotEnd:
    case Op::kDefineUnit:
    case Op::kRunUnit:
    case Op::kConfigure:
    case Op::kMembership:
    case Op::kBroadcast:
    case Op::kAllReduce:
    case Op::kAllGather:
    case Op::kReduceScatter:
    case Op::kCount:
    // losses over every element, and their gradients: the client sends them only
    // when its tensors are whole anyway (else their composite form)
    case Op::kCrossEntropy:
    case Op::kCrossEntropyBackward:
    case Op::kMseLoss:
    case Op::kMseLossBackward:
      return &Whole;
    // many operands reduced to one number: a pending sum of each worker's part
    case Op::kSumOfSquares:
      return &SumOfSquares;
  }
  return &Whole;  // not an Op
}

Result<Placement> RunStrategy(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  if (s.inst->op == Op::kRedistribute) return Redistribute(s, in, meta);
  for (const Tensor* t : in)  // the stage all-reduced those that CarriesPartial does not carry
    if (t->placement.partial()) return CarryPartial(s, in, meta);
  bool all_whole = true;
  for (const Tensor* t : in) all_whole = all_whole && t->placement.whole();
  if (all_whole || in.empty()) return Whole(s, in, meta);
  return StrategyFor(s.inst->op)(s, in, meta);
}

}  // namespace gt::sharding
