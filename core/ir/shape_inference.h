// Result shape and dtype of every op, computed without executing anything.
//
// The client runs this on every call so that a shape error is raised at the
// line that caused it, naming both shapes; the rules match PyTorch's.
#pragma once

#include <vector>

#include "gt/instruction.h"
#include "gt/status.h"

namespace gt {

struct TensorMeta {
  Shape shape;
  DType dtype = DType::kFloat32;
};

// Shape of broadcasting `a` with `b`, or InvalidArgument naming both.
Result<Shape> BroadcastShapes(const Shape& a, const Shape& b);

// Axes of a reduction over a tensor of `rank`: negative ones wrapped,
// range-checked and de-duplicated; empty `axes` means all.
Result<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, size_t rank);

// Metadata of the result of `inst` applied to `operands` (in order).
// REQUIRES: ProducesTensor(inst.op).
Result<TensorMeta> InferResult(const Instruction& inst, const std::vector<const TensorMeta*>& operands);

}  // namespace gt
