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

// By the op's ShardRule (gt/ops.def); every rule is listed, so a rule added
// there and forgotten here fails to compile (-Wswitch).
Strategy StrategyFor(Op op) {
  switch (ShardRuleOf(op)) {
    // elementwise (matching shards; a smaller operand broadcast); a mutation
    // changes its destination where it lives
    case ShardRule::kElementwise: return &Elementwise;
    // an optimizer step: its parameter and state where they live, alike
    case ShardRule::kFusedUpdate: return &FusedUpdate;
    // A @ B (row-, inner-, column-sharded, replicated)
    case ShardRule::kMatmul: return &Matmul;
    // reduction over the sharded axis / over other axes (argmax / argmin over
    // the sharded axis: whole, positions need the whole axis)
    case ShardRule::kReduce: return &ReduceRow;
    // transpose, unsqueeze, permute, squeeze, reshape; movement of a replicated tensor
    case ShardRule::kMovement: return &MovementRow;
    // normalized over trailing dims: pieces cut before them / whole rows
    case ShardRule::kNormalizedRows: return &NormalizedRows;
    // softmax / log_softmax along an unsharded axis / along the sharded axis
    case ShardRule::kSoftmax: return &SoftmaxRow;
    // slice, select along an unsharded axis / along the sharded axis
    case ShardRule::kSliceOrSelect: return &SliceOrSelectRow;
    // cat along an unsharded axis of identically sharded operands
    case ShardRule::kCat: return &Cat;
    // indexing by positions along a dim
    case ShardRule::kSelectByIndex: return &IndexSelect;
    case ShardRule::kAddByIndex: return &IndexAdd;
    case ShardRule::kGatherOrScatter: return &GatherOrScatter;
    // tril / triu: the diagonal moved by a shard's offset
    case ShardRule::kTriangle: return &TriangleRow;
    // many operands reduced to one number: a pending sum of each worker's part
    case ShardRule::kSumOfSquares: return &SumOfSquares;
    // computed per sample: a batch cut along dim 0 stays cut, weights copied
    case ShardRule::kBatch: return &Batch;
    // anything else: operands assembled whole on one worker. The stage
    // handles creation, control ops, collectives and redistribute before a
    // strategy could see them (the markers take no operand); the losses come
    // only when the client's tensors are whole anyway.
    case ShardRule::kWhole: return &Whole;
  }
  return &Whole;  // not a rule
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
