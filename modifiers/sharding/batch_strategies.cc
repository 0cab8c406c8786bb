// The strategy of ops computed sample by sample (ShardRule kBatch: conv2d,
// the poolings and their backwards): a batch cut along dim 0 stays cut,
// each worker running its own samples with the weights copied to it, as
// data parallelism does; the weight's gradient is each worker's share of
// the sum, a pending sum all-reduced when (and if) its value is needed.
#include <algorithm>

#include "strategies.h"

namespace gt::sharding {
namespace {

// How many leading operands hold samples along dim 0: the input of a
// forward op; the gradient and the input of a backward.
size_t BatchOperands(Op op) { return KindOf(op) == OpKind::kBinary ? 2 : 1; }

bool CutAlongBatch(const Tensor& t) { return t.placement.sharded() && t.placement.axis == 0 && t.meta.shape.size() == 4; }

}  // namespace

Result<Placement> Batch(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const size_t samples = std::min(BatchOperands(s.inst->op), in.size());
  const Tensor* lead = nullptr;
  for (size_t i = 0; i < samples; ++i)
    if (!lead && CutAlongBatch(*in[i])) lead = in[i];
  if (!lead) return Whole(s, in, meta);
  const Placement& p = lead->placement;
  std::vector<std::vector<TensorId>> pieces;  // per operand, per member
  for (size_t i = 0; i < in.size(); ++i)
    pieces.push_back(i < samples ? ShardLike(s, *in[i], 0, p) : CopiesOn(s, *in[i], p.workers));
  Placement out = p;
  out.ids.clear();
  for (size_t r = 0; r < p.workers.size(); ++r) {
    Instruction piece = *s.inst;
    for (size_t i = 0; i < in.size(); ++i) piece.operands[i] = pieces[i][r];
    const TensorId id = NewId(*s.client);
    piece.results = {id};
    EmitOn(s, p.workers[r], std::move(piece));
    out.ids.push_back(id);
  }
  const bool weight_grad = s.inst->op == Op::kConv2dBackward && s.inst->attrs.scalar == 1;
  if (weight_grad) {
    const auto kind = p.workers.size() == 1 ? Placement::Kind::kReplicated : Placement::Kind::kPartial;
    return Placement{kind, p.workers, std::move(out.ids), 0, {}};
  }
  // Samples keep their rows; every other dim is the result's own.
  return out;
}

}  // namespace gt::sharding
