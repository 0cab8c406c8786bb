// Shape and dtype rules of creation, elementwise (unary, binary, where),
// matmul, the fused backwards and redistribute (gt/ops.def's ShapeRule).
#include "ir/shape_rules.h"

#include <cmath>

namespace gt::shape_rules {

namespace {

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

// layer_norm's attrs.axes = {dims}: 1..rank trailing dims, and eps >= 0.
Status CheckNormalizedDims(const Instruction& inst, const TensorMeta& x) {
  const std::vector<int64_t>& axes = inst.attrs.axes;
  if (axes.size() != 1 || axes[0] < 1 || axes[0] > static_cast<int64_t>(x.shape.size()))
    return InvalidArgument(Where(inst) + ": expects the number of trailing dims to normalize (1.." +
                           std::to_string(x.shape.size()) + "), got " + ShapeToString(axes));
  if (!(inst.attrs.scalar >= 0)) return InvalidArgument(Where(inst) + ": eps must be >= 0, got " + std::to_string(inst.attrs.scalar));
  return Status::Ok();
}

Result<TensorMeta> InferArange(const Instruction& inst) {
  const auto& n = inst.attrs.numbers;
  if (n.size() != 3) return InvalidArgument("arange: expects {start, end, step}");
  double start = n[0], end = n[1], step = n[2];
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    return InvalidArgument("arange: step must be non-zero and bounds finite");
  if ((end - start) / step < 0)
    return InvalidArgument("arange: upper bound and step have inconsistent signs");
  // Compared before the cast: {0, 1e300, 1e-300} counts past int64 (to inf).
  const double length = std::ceil((end - start) / step);
  if (!(length < 0x1p63)) return InvalidArgument("arange: more elements than int64 can count");
  return TensorMeta{{static_cast<int64_t>(length)}, inst.attrs.dtype};
}

}  // namespace

Result<TensorMeta> InferCreate(const Instruction& inst) {
  for (int64_t d : inst.attrs.shape)
    if (d < 0) return InvalidArgument(Where(inst) + ": negative dimension in shape " + ShapeToString(inst.attrs.shape));
  if ((inst.op == Op::kRandn || inst.op == Op::kRand) && !IsFloatingPoint(inst.attrs.dtype))
    return InvalidArgument(Where(inst) + ": dtype must be floating point, got " + std::string(DTypeName(inst.attrs.dtype)));
  if (inst.op == Op::kArange) return InferArange(inst);
  return TensorMeta{inst.attrs.shape, inst.attrs.dtype};
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
  const DTypeRule rule = GetOpInfo(inst.op).dtype;
  if (rule == DTypeRule::kFloating && !IsFloatingPoint(out.dtype)) out.dtype = DType::kFloat32;  // true division
  if (rule == DTypeRule::kBool) out.dtype = DType::kBool;  // comparisons, as PyTorch's
  if (inst.op == Op::kPow && out.dtype == DType::kBool) return InvalidArgument("pow: not defined for bool tensors");
  // PyTorch refuses it at the call; let through, the worker would fail it at
  // the next sync, far from the line (and after `b -= 1` was refused already).
  if (inst.op == Op::kSub && (in[0]->dtype == DType::kBool || (in.size() == 2 && in[1]->dtype == DType::kBool)))
    return InvalidArgument("sub: subtraction with a bool tensor is not supported; to invert a mask, use ~");
  return out;
}

// A fused backward, {grad, x}: one shape, one floating dtype; the result is
// x's gradient, alike.
Result<TensorMeta> InferGradPair(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  if (in.size() != 2) return ArityError(inst, 2, in.size());
  const TensorMeta& grad = *in[0];
  const TensorMeta& x = *in[1];
  if (grad.shape != x.shape || grad.dtype != x.dtype || !IsFloatingPoint(x.dtype))
    return InvalidArgument(Where(inst) + ": expects a gradient and an input of one shape and floating dtype, got " +
                           ShapeToString(grad.shape) + " " + std::string(DTypeName(grad.dtype)) + " and " + ShapeToString(x.shape) +
                           " " + std::string(DTypeName(x.dtype)));
  if (inst.op == Op::kLayerNormBackward) {
    if (Status s = CheckNormalizedDims(inst, x); !s.ok()) return s;
  }
  return x;
}

// where(cond, a, b): the three broadcast together; the type is a's and b's
// promoted (a scalar's as a binary op's).
Result<TensorMeta> InferWhere(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  const size_t want = inst.attrs.scalar_side == ScalarSide::kNone ? 3 : 2;
  if (in.size() != want) return ArityError(inst, want, in.size());
  Shape shape = in[0]->shape;
  for (size_t i = 1; i < in.size(); ++i) {
    Result<Shape> both = BroadcastShapes(shape, in[i]->shape);
    if (!both.ok()) return InvalidArgument(Where(inst) + ": " + both.status().message());
    shape = std::move(*both);
  }
  // A scalar is promoted as a binary op's is (where(c, int64, 0.5) is float32).
  const DType dtype =
      in.size() == 3 ? BinaryResultType(*in[1], *in[2]) : ScalarResultType(in[1]->dtype, inst.attrs.scalar);
  return TensorMeta{std::move(shape), dtype};
}

Result<TensorMeta> InferMatmul(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  if (in.size() != 2) return ArityError(inst, 2, in.size());
  Shape a = in[0]->shape, b = in[1]->shape;
  // Messages are built only on an error: every matmul of every client passes here.
  auto both = [&in] { return ShapeToString(in[0]->shape) + " and " + ShapeToString(in[1]->shape); };
  if (a.empty() || b.empty()) return InvalidArgument("matmul: both operands need at least 1 dimension, got " + both());
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  int64_t k_a = a.back(), k_b = b[b.size() - 2];
  if (k_a != k_b)
    return InvalidArgument("matmul: shapes " + both() + " are not aligned (" + std::to_string(k_a) +
                           " != " + std::to_string(k_b) + ")");
  Shape batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  Result<Shape> batch = BroadcastShapes(batch_a, batch_b);
  if (!batch.ok()) return InvalidArgument("matmul: batch dimensions of " + both() + " do not broadcast");
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
  if (inst.op == Op::kSoftmax || inst.op == Op::kLogSoftmax) {
    if (inst.attrs.axes.size() != 1) return InvalidArgument(Where(inst) + ": expects one dim");
    Result<std::vector<int64_t>> dim = NormalizeAxes(inst.attrs.axes, in[0]->shape.size());
    if (!dim.ok()) return InvalidArgument(Where(inst) + ": " + dim.status().message());
  }
  if (inst.op == Op::kLayerNorm) {
    if (Status s = CheckNormalizedDims(inst, *in[0]); !s.ok()) return s;
  }
  if (GetOpInfo(inst.op).dtype == DTypeRule::kFloating && !IsFloatingPoint(dtype)) dtype = DType::kFloat32;
  if ((inst.op == Op::kNeg || inst.op == Op::kRelu || inst.op == Op::kAbs) && dtype == DType::kBool)
    return InvalidArgument(Where(inst) + ": not defined for bool tensors");
  return TensorMeta{in[0]->shape, dtype};
}

// tril / triu: one diagonal, at least 2 dims; the operand's shape and type.
Result<TensorMeta> InferTriangle(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  if (in.size() != 1) return ArityError(inst, 1, in.size());
  if (inst.attrs.axes.size() != 1) return InvalidArgument(Where(inst) + ": expects one diagonal");
  if (in[0]->shape.size() < 2)
    return InvalidArgument(Where(inst) + ": needs at least 2 dimensions, got " + ShapeToString(in[0]->shape));
  return *in[0];
}

// redistribute: a copy, laid out anew. The client states the operand's shape
// and dtype (the sharding stage may have no record of them): they must hold.
Result<TensorMeta> InferRedistribute(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  if (in.size() != 1) return ArityError(inst, 1, in.size());
  if (inst.attrs.shape != in[0]->shape || inst.attrs.dtype != in[0]->dtype)
    return InvalidArgument(Where(inst) + ": the operand is " + ShapeToString(in[0]->shape) + " " +
                           std::string(DTypeName(in[0]->dtype)) + ", the instruction says " +
                           ShapeToString(inst.attrs.shape) + " " + std::string(DTypeName(inst.attrs.dtype)));
  return *in[0];
}

}  // namespace gt::shape_rules
