#include "shape_inference.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace gt {
namespace {

std::string Where(const Instruction& inst) { return std::string(OpName(inst.op)); }

Status ArityError(const Instruction& inst, size_t want, size_t got) {
  return InvalidArgument(Where(inst) + ": expects " + std::to_string(want) + " tensor operand(s), got " +
                         std::to_string(got));
}

Result<TensorMeta> InferCreate(const Instruction& inst) {
  for (int64_t d : inst.attrs.shape)
    if (d < 0) return InvalidArgument(Where(inst) + ": negative dimension in shape " + ShapeToString(inst.attrs.shape));
  if (inst.op == Op::kRandn && !IsFloatingPoint(inst.attrs.dtype))
    return InvalidArgument("randn: dtype must be floating point, got " + std::string(DTypeName(inst.attrs.dtype)));
  return TensorMeta{inst.attrs.shape, inst.attrs.dtype};
}

// Whether a scalar counts as a Python int. Must agree with how the torch
// backend reads a scalar (ScalarOf): integral, finite, not -0.0, within int64.
bool IsIntegral(double v) {
  return std::isfinite(v) && std::floor(v) == v && !(v == 0 && std::signbit(v)) && std::fabs(v) < 0x1p63;
}

DType ScalarResultType(DType tensor, double scalar) {
  if (IsFloatingPoint(tensor)) return tensor;
  if (!IsIntegral(scalar)) return DType::kFloat32;
  return tensor == DType::kBool ? DType::kInt64 : tensor;
}

int Category(DType t) { return t == DType::kBool ? 0 : IsFloatingPoint(t) ? 2 : 1; }

// PyTorch's rule: a 0-d tensor only decides the type when it is of a higher
// category (bool < integer < floating) than the tensor with dimensions.
DType BinaryResultType(const TensorMeta& a, const TensorMeta& b) {
  bool a_scalar = a.shape.empty(), b_scalar = b.shape.empty();
  if (a_scalar == b_scalar) return PromoteTypes(a.dtype, b.dtype);
  const TensorMeta& dim = a_scalar ? b : a;
  const TensorMeta& zero = a_scalar ? a : b;
  return Category(zero.dtype) > Category(dim.dtype) ? zero.dtype : dim.dtype;
}

Result<TensorMeta> InferBinary(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  TensorMeta out;
  if (inst.attrs.scalar_side != ScalarSide::kNone) {
    if (in.size() != 1) return ArityError(inst, 1, in.size());
    out = {in[0]->shape, ScalarResultType(in[0]->dtype, inst.attrs.scalar)};
  } else {
    if (in.size() != 2) return ArityError(inst, 2, in.size());
    Result<Shape> shape = BroadcastShapes(in[0]->shape, in[1]->shape);
    if (!shape.ok()) return InvalidArgument(Where(inst) + ": " + shape.status().message());
    out = {std::move(*shape), BinaryResultType(*in[0], *in[1])};
  }
  if (inst.op == Op::kDiv && !IsFloatingPoint(out.dtype)) out.dtype = DType::kFloat32;  // true division
  return out;
}

Result<TensorMeta> InferMatmul(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  if (in.size() != 2) return ArityError(inst, 2, in.size());
  Shape a = in[0]->shape, b = in[1]->shape;
  std::string both = ShapeToString(a) + " and " + ShapeToString(b);
  if (a.empty() || b.empty()) return InvalidArgument("matmul: both operands need at least 1 dimension, got " + both);
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  int64_t k_a = a.back(), k_b = b[b.size() - 2];
  if (k_a != k_b)
    return InvalidArgument("matmul: shapes " + both + " are not aligned (" + std::to_string(k_a) +
                           " != " + std::to_string(k_b) + ")");
  Shape batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  Result<Shape> batch = BroadcastShapes(batch_a, batch_b);
  if (!batch.ok()) return InvalidArgument("matmul: batch dimensions of " + both + " do not broadcast");
  Shape out = *batch;
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b.back());
  if (in[0]->dtype != in[1]->dtype)
    return InvalidArgument("matmul: operands must have the same dtype, got " + std::string(DTypeName(in[0]->dtype)) +
                           " and " + std::string(DTypeName(in[1]->dtype)));
  return TensorMeta{out, in[0]->dtype};
}

Result<TensorMeta> InferUnary(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  if (in.size() != 1) return ArityError(inst, 1, in.size());
  DType dtype = in[0]->dtype;
  bool keeps_type = inst.op == Op::kRelu || inst.op == Op::kNeg;
  if (!keeps_type && !IsFloatingPoint(dtype)) dtype = DType::kFloat32;
  if ((inst.op == Op::kNeg || inst.op == Op::kRelu) && dtype == DType::kBool)
    return InvalidArgument(Where(inst) + ": not defined for bool tensors");
  return TensorMeta{in[0]->shape, dtype};
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
  if (inst.op == Op::kMean && !IsFloatingPoint(dtype))
    return InvalidArgument("mean: needs a floating point tensor, got " + std::string(DTypeName(dtype)));
  if (inst.op == Op::kMax && NumElements(shape) == 0) return InvalidArgument("max: tensor of shape " + ShapeToString(shape) + " is empty");
  return TensorMeta{out, dtype};
}

Result<TensorMeta> InferReshape(const Instruction& inst, const TensorMeta& in) {
  Shape target = inst.attrs.shape;
  int64_t known = 1;
  int inferred = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (inferred >= 0) return InvalidArgument("reshape: only one dimension may be -1 in " + ShapeToString(target));
      inferred = static_cast<int>(i);
    } else if (target[i] < 0) {
      return InvalidArgument("reshape: invalid dimension in " + ShapeToString(target));
    } else {
      known *= target[i];
    }
  }
  int64_t total = NumElements(in.shape);
  std::string what = "reshape: cannot view " + ShapeToString(in.shape) + " (" + std::to_string(total) +
                     " elements) as " + ShapeToString(target);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0) return InvalidArgument(what);
    target[inferred] = total / known;
  } else if (known != total) {
    return InvalidArgument(what);
  }
  return TensorMeta{target, in.dtype};
}

Result<TensorMeta> InferTranspose(const Instruction& inst, const TensorMeta& in) {
  Shape out = in.shape;
  const auto& axes = inst.attrs.axes;
  if (axes.empty()) {
    if (out.size() >= 2) std::swap(out[out.size() - 1], out[out.size() - 2]);
    return TensorMeta{out, in.dtype};
  }
  if (axes.size() != 2) return InvalidArgument("transpose: expects two dims, got " + ShapeToString(axes));
  int64_t rank = static_cast<int64_t>(out.size());
  int64_t bound = std::max<int64_t>(rank, 1);  // a 0-d tensor accepts dims 0 and -1, as in PyTorch
  auto wrap = [bound](int64_t d) { return d < 0 ? d + bound : d; };
  int64_t d0 = wrap(axes[0]), d1 = wrap(axes[1]);
  if (d0 < 0 || d0 >= bound || d1 < 0 || d1 >= bound)
    return InvalidArgument("transpose: dims " + ShapeToString(axes) + " out of range for shape " + ShapeToString(in.shape));
  if (rank > 0) std::swap(out[d0], out[d1]);
  return TensorMeta{out, in.dtype};
}

}  // namespace

Result<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return InvalidArgument("shapes " + ShapeToString(a) + " and " + ShapeToString(b) + " cannot be broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Result<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, size_t rank) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (size_t d = 0; d < rank; ++d) out.push_back(static_cast<int64_t>(d));
    return out;
  }
  int64_t r = static_cast<int64_t>(rank);
  for (int64_t axis : axes) {
    int64_t a = axis < 0 ? axis + std::max<int64_t>(r, 1) : axis;  // a 0-d tensor takes 0 and -1, as in PyTorch
    if (a < 0 || a >= std::max<int64_t>(r, 1))
      return InvalidArgument("axis " + std::to_string(axis) + " is out of range for " + std::to_string(rank) + " dimensions");
    if (std::find(out.begin(), out.end(), a) != out.end())
      return InvalidArgument("axis " + std::to_string(axis) + " appears twice");
    out.push_back(a);
  }
  if (r == 0) out.clear();  // a 0-d tensor reduces over nothing
  return out;
}

Result<TensorMeta> InferResult(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  switch (KindOf(inst.op)) {
    case OpKind::kCreate: return InferCreate(inst);
    case OpKind::kBinary: return InferBinary(inst, in);
    case OpKind::kContract: return InferMatmul(inst, in);
    case OpKind::kUnary: return InferUnary(inst, in);
    case OpKind::kReduce: return InferReduce(inst, in);
    case OpKind::kMovement:
      if (in.size() != 1) return ArityError(inst, 1, in.size());
      return inst.op == Op::kReshape ? InferReshape(inst, *in[0]) : InferTranspose(inst, *in[0]);
    case OpKind::kControl: break;
  }
  return Internal(Where(inst) + " produces no tensor");
}

}  // namespace gt
