// Shape and dtype rules of the reductions: sum, mean, max, min, argmax /
// argmin, sum_of_squares and the fused losses.
#include "ir/shape_rules.h"

#include <set>

#include "gt/op_attrs.h"

namespace gt::shape_rules {

// argmax / argmin: one dim or none (the flattened tensor), int64 positions.
Result<TensorMeta> InferArgReduce(const Instruction& inst, const TensorMeta& in) {
  const std::string name(OpName(inst.op));
  if (NumElements(in.shape) == 0) return InvalidArgument(name + ": tensor of shape " + ShapeToString(in.shape) + " is empty");
  if (inst.attrs.axes.empty()) return TensorMeta{{}, DType::kInt64};
  if (inst.attrs.axes.size() != 1)
    return InvalidArgument(name + ": takes one dim or none, got " + std::to_string(inst.attrs.axes.size()));
  Result<std::vector<int64_t>> axes = NormalizeAxes(inst.attrs.axes, in.shape.size());
  if (!axes.ok()) return InvalidArgument(Where(inst) + ": " + axes.status().message());
  Shape out;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (static_cast<int64_t>(d) != (*axes)[0]) out.push_back(in.shape[d]);
    else if (inst.attrs.keepdims) out.push_back(1);
  }
  return TensorMeta{out, DType::kInt64};
}

Result<TensorMeta> InferReduce(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  if (in.size() != 1) return ArityError(inst, 1, in.size());
  const Shape& shape = in[0]->shape;
  Result<std::vector<int64_t>> axes = NormalizeAxes(inst.attrs.axes, shape.size());
  if (!axes.ok()) return InvalidArgument(Where(inst) + ": " + axes.status().message());
  std::set<int64_t> reduced(axes->begin(), axes->end());
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced.count(static_cast<int64_t>(d))) out.push_back(shape[d]);
    else if (inst.attrs.keepdims) out.push_back(1);
  }
  DType dtype = in[0]->dtype;
  if (inst.op == Op::kSum && !IsFloatingPoint(dtype)) dtype = DType::kInt64;
  if ((inst.op == Op::kMean || inst.op == Op::kVar) && !IsFloatingPoint(dtype))
    return InvalidArgument(Where(inst) + ": needs a floating point tensor, got " + std::string(DTypeName(dtype)));
  if ((inst.op == Op::kMax || inst.op == Op::kMin) && NumElements(shape) == 0) return InvalidArgument("max: tensor of shape " + ShapeToString(shape) + " is empty");
  return TensorMeta{out, dtype};
}

// Every operand floating and of one dtype: the 0-d result is in it.
Result<TensorMeta> InferSumOfSquares(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  if (in.empty()) return InvalidArgument(Where(inst) + ": expects at least one operand");
  if (!inst.attrs.axes.empty() || inst.attrs.keepdims)
    return InvalidArgument(Where(inst) + ": sums over every element; it takes no axes or keepdims");
  for (const TensorMeta* t : in) {
    if (!IsFloatingPoint(t->dtype))
      return InvalidArgument(Where(inst) + ": expects floating-point operands, got " + std::string(DTypeName(t->dtype)));
    if (t->dtype != in[0]->dtype)
      return InvalidArgument(Where(inst) + ": expects operands of one dtype, got " + std::string(DTypeName(in[0]->dtype)) +
                             " and " + std::string(DTypeName(t->dtype)));
  }
  return TensorMeta{{}, in[0]->dtype};
}

// {logits [N, C] floating, targets [N] int32/int64[, grad 0-d first for the
// backward]}, ignore_index an integer: the loss (0-d) or the logits' gradient.
Result<TensorMeta> InferCrossEntropy(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  const bool backward = inst.op == Op::kCrossEntropyBackward;
  if (in.size() != (backward ? 3u : 2u)) return ArityError(inst, backward ? 3 : 2, in.size());
  const TensorMeta& logits = *in[backward ? 1 : 0];
  const TensorMeta& targets = *in[backward ? 2 : 1];
  if (logits.shape.size() != 2 || !IsFloatingPoint(logits.dtype))
    return InvalidArgument(Where(inst) + ": expects floating-point logits (batch, classes), got " +
                           ShapeToString(logits.shape) + " " + std::string(DTypeName(logits.dtype)));
  if (targets.shape.size() != 1 || targets.shape[0] != logits.shape[0] ||
      (targets.dtype != DType::kInt64 && targets.dtype != DType::kInt32))
    return InvalidArgument(Where(inst) + ": expects int32/int64 class targets (batch) for logits " +
                           ShapeToString(logits.shape) + ", got " + ShapeToString(targets.shape) + " " +
                           std::string(DTypeName(targets.dtype)));
  if (!IgnoreIndex(inst))
    return InvalidArgument(Where(inst) + ": ignore_index must be an integer, got " + std::to_string(inst.attrs.scalar));
  if (!backward) return TensorMeta{{}, logits.dtype};
  if (!in[0]->shape.empty() || in[0]->dtype != logits.dtype)
    return InvalidArgument(Where(inst) + ": expects a 0-d gradient of the logits' dtype, got " +
                           ShapeToString(in[0]->shape) + " " + std::string(DTypeName(in[0]->dtype)));
  return logits;
}

// {input, target} of one shape and floating dtype[, grad 0-d first for the
// backward]: the loss (0-d) or the input's gradient.
Result<TensorMeta> InferMseLoss(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  const bool backward = inst.op == Op::kMseLossBackward;
  if (in.size() != (backward ? 3u : 2u)) return ArityError(inst, backward ? 3 : 2, in.size());
  const TensorMeta& input = *in[backward ? 1 : 0];
  const TensorMeta& target = *in[backward ? 2 : 1];
  if (input.shape != target.shape || input.dtype != target.dtype || !IsFloatingPoint(input.dtype))
    return InvalidArgument(Where(inst) + ": expects an input and a target of one shape and floating dtype, got " +
                           ShapeToString(input.shape) + " " + std::string(DTypeName(input.dtype)) + " and " +
                           ShapeToString(target.shape) + " " + std::string(DTypeName(target.dtype)));
  if (inst.attrs.scalar_side != ScalarSide::kNone)
    return InvalidArgument(Where(inst) + ": takes no scalar operand");
  if (!backward) return TensorMeta{{}, input.dtype};
  if (!in[0]->shape.empty() || in[0]->dtype != input.dtype)
    return InvalidArgument(Where(inst) + ": expects a 0-d gradient of the input's dtype, got " +
                           ShapeToString(in[0]->shape) + " " + std::string(DTypeName(in[0]->dtype)));
  return input;
}

}  // namespace gt::shape_rules
