#include "ir/shape_inference.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "gt/op_attrs.h"

namespace gt {
namespace {

std::string Where(const Instruction& inst) { return std::string(OpName(inst.op)); }

// Product of `dims`, or nullopt when it overflows int64: a client may name
// such a shape (2^40 x 2^40), no tensor has one, and the plain product
// would be undefined.
std::optional<int64_t> CheckedProduct(const Shape& dims) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : dims) {
    if (d == 0) return 0;
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  if (overflow) return std::nullopt;
  return n;
}

Status ArityError(const Instruction& inst, size_t want, size_t got) {
  return InvalidArgument(Where(inst) + ": expects " + std::to_string(want) + " tensor operand(s), got " +
                         std::to_string(got));
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

Result<TensorMeta> InferCreate(const Instruction& inst) {
  for (int64_t d : inst.attrs.shape)
    if (d < 0) return InvalidArgument(Where(inst) + ": negative dimension in shape " + ShapeToString(inst.attrs.shape));
  if ((inst.op == Op::kRandn || inst.op == Op::kRand) && !IsFloatingPoint(inst.attrs.dtype))
    return InvalidArgument(Where(inst) + ": dtype must be floating point, got " + std::string(DTypeName(inst.attrs.dtype)));
  if (inst.op == Op::kArange) return InferArange(inst);
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

// layer_norm's attrs.axes = {dims}: 1..rank trailing dims, and eps >= 0.
Status CheckNormalizedDims(const Instruction& inst, const TensorMeta& x) {
  const std::vector<int64_t>& axes = inst.attrs.axes;
  if (axes.size() != 1 || axes[0] < 1 || axes[0] > static_cast<int64_t>(x.shape.size()))
    return InvalidArgument(Where(inst) + ": expects the number of trailing dims to normalize (1.." +
                           std::to_string(x.shape.size()) + "), got " + ShapeToString(axes));
  if (!(inst.attrs.scalar >= 0)) return InvalidArgument(Where(inst) + ": eps must be >= 0, got " + std::to_string(inst.attrs.scalar));
  return Status::Ok();
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
  if (inst.op == Op::kMean && !IsFloatingPoint(dtype))
    return InvalidArgument("mean: needs a floating point tensor, got " + std::string(DTypeName(dtype)));
  if ((inst.op == Op::kMax || inst.op == Op::kMin) && NumElements(shape) == 0) return InvalidArgument("max: tensor of shape " + ShapeToString(shape) + " is empty");
  return TensorMeta{out, dtype};
}

Result<TensorMeta> InferReshape(const Instruction& inst, const TensorMeta& in) {
  Shape target = inst.attrs.shape;
  Shape given;  // the dims other than the -1
  int inferred = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (inferred >= 0) return InvalidArgument("reshape: only one dimension may be -1 in " + ShapeToString(target));
      inferred = static_cast<int>(i);
    } else if (target[i] < 0) {
      return InvalidArgument("reshape: invalid dimension in " + ShapeToString(target));
    } else {
      given.push_back(target[i]);
    }
  }
  int64_t total = NumElements(in.shape);
  // Built only on an error: every reshape of every client passes here.
  auto cannot_view = [&] {
    return InvalidArgument("reshape: cannot view " + ShapeToString(in.shape) + " (" + std::to_string(total) +
                           " elements) as " + ShapeToString(inst.attrs.shape));
  };
  const std::optional<int64_t> product = CheckedProduct(given);
  if (!product) return cannot_view();  // more than any tensor holds
  const int64_t known = *product;
  if (inferred >= 0) {
    if (known == 0 || total % known != 0) return cannot_view();
    target[inferred] = total / known;
  } else if (known != total) {
    return cannot_view();
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

// Wraps a possibly negative dim into [0, rank); nullopt when out of range.
std::optional<int64_t> WrapDim(int64_t dim, int64_t rank) {
  int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) return std::nullopt;
  return d;
}

Status DimError(const Instruction& inst, int64_t dim, const Shape& shape) {
  return InvalidArgument(Where(inst) + ": dim " + std::to_string(dim) + " is out of range for shape " +
                         ShapeToString(shape));
}

Result<TensorMeta> InferUnsqueeze(const Instruction& inst, const TensorMeta& in) {
  int64_t rank = static_cast<int64_t>(in.shape.size());
  if (inst.attrs.axes.size() != 1) return InvalidArgument("unsqueeze: expects one dim");
  std::optional<int64_t> d = WrapDim(inst.attrs.axes[0], rank + 1);
  if (!d) return DimError(inst, inst.attrs.axes[0], in.shape);
  Shape out = in.shape;
  out.insert(out.begin() + *d, 1);
  return TensorMeta{out, in.dtype};
}

Result<TensorMeta> InferSqueeze(const Instruction& inst, const TensorMeta& in) {
  int64_t rank = static_cast<int64_t>(in.shape.size());
  Shape out;
  if (inst.attrs.axes.empty()) {
    for (int64_t d : in.shape)
      if (d != 1) out.push_back(d);
    return TensorMeta{out, in.dtype};
  }
  std::optional<int64_t> d = WrapDim(inst.attrs.axes[0], std::max<int64_t>(rank, 1));
  if (!d) return DimError(inst, inst.attrs.axes[0], in.shape);
  out = in.shape;
  if (rank > 0 && out[*d] == 1) out.erase(out.begin() + *d);
  return TensorMeta{out, in.dtype};
}

Result<TensorMeta> InferPermute(const Instruction& inst, const TensorMeta& in) {
  int64_t rank = static_cast<int64_t>(in.shape.size());
  const auto& perm = inst.attrs.axes;
  auto not_a_permutation = [&] {
    return InvalidArgument("permute: " + ShapeToString(perm) + " is not a permutation of the dims of " +
                           ShapeToString(in.shape));
  };
  if (static_cast<int64_t>(perm.size()) != rank) return not_a_permutation();
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  Shape out;
  for (int64_t p : perm) {
    std::optional<int64_t> d = WrapDim(p, rank);
    if (!d || seen[*d]) return not_a_permutation();
    seen[*d] = true;
    out.push_back(in.shape[*d]);
  }
  return TensorMeta{out, in.dtype};
}

Result<TensorMeta> InferSlice(const Instruction& inst, const TensorMeta& in) {
  const auto& a = inst.attrs.axes;
  int64_t rank = static_cast<int64_t>(in.shape.size());
  if (a.size() != 4) return InvalidArgument("slice: expects {dim, start, stop, step}");
  std::optional<int64_t> d = WrapDim(a[0], rank);
  if (!d) return DimError(inst, a[0], in.shape);
  int64_t size = in.shape[*d], start = a[1], stop = a[2], step = a[3];
  if (step < 1) return InvalidArgument("slice: step must be positive, got " + std::to_string(step));
  if (start < 0 || start > size || stop < 0 || stop > size)
    return InvalidArgument("slice: bounds [" + std::to_string(start) + ", " + std::to_string(stop) +
                           ") outside dim of size " + std::to_string(size));
  Shape out = in.shape;
  out[*d] = stop > start ? (stop - start - 1) / step + 1 : 0;  // a step near 2^63 must not overflow
  return TensorMeta{out, in.dtype};
}

Result<TensorMeta> InferSelect(const Instruction& inst, const TensorMeta& in) {
  const auto& a = inst.attrs.axes;
  int64_t rank = static_cast<int64_t>(in.shape.size());
  if (a.size() != 2) return InvalidArgument("select: expects {dim, index}");
  std::optional<int64_t> d = WrapDim(a[0], rank);
  if (!d) return DimError(inst, a[0], in.shape);
  std::optional<int64_t> index = WrapDim(a[1], in.shape[*d]);
  if (!index)
    return InvalidArgument("index " + std::to_string(a[1]) + " is out of bounds for dim " + std::to_string(*d) +
                           " with size " + std::to_string(in.shape[*d]));
  Shape out = in.shape;
  out.erase(out.begin() + *d);
  return TensorMeta{out, in.dtype};
}

Result<TensorMeta> InferCat(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  if (in.empty()) return InvalidArgument("cat: expects at least one tensor");
  if (inst.attrs.axes.size() != 1) return InvalidArgument("cat: expects one dim");
  const Shape& first = in[0]->shape;
  int64_t rank = static_cast<int64_t>(first.size());
  std::optional<int64_t> d = WrapDim(inst.attrs.axes[0], rank);
  if (!d) return DimError(inst, inst.attrs.axes[0], first);
  Shape out = first;
  DType dtype = in[0]->dtype;
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape& s = in[i]->shape;
    bool same = static_cast<int64_t>(s.size()) == rank;
    for (int64_t k = 0; same && k < rank; ++k)
      if (k != *d && s[k] != first[k]) same = false;
    if (!same)
      return InvalidArgument("cat: shapes " + ShapeToString(first) + " and " + ShapeToString(s) +
                             " differ outside dim " + std::to_string(*d));
    if (__builtin_add_overflow(out[*d], s[*d], &out[*d]))
      return InvalidArgument("cat: dim " + std::to_string(*d) + " grows past int64");
    dtype = PromoteTypes(dtype, in[i]->dtype);
  }
  return TensorMeta{out, dtype};
}

// index_select, index_add, gather, scatter_add: the dim, the index's type
// and the shapes PyTorch requires of them.
Result<int64_t> IndexDim(const Instruction& inst, const TensorMeta& x, const TensorMeta& index) {
  if (index.dtype != DType::kInt64 && index.dtype != DType::kInt32)
    return InvalidArgument(Where(inst) + ": the index must be int32 or int64, got " + std::string(DTypeName(index.dtype)));
  if (inst.attrs.axes.size() != 1) return InvalidArgument(Where(inst) + ": expects one dim");
  if (x.shape.empty()) return InvalidArgument(Where(inst) + ": needs at least 1 dimension");
  Result<std::vector<int64_t>> dim = NormalizeAxes(inst.attrs.axes, x.shape.size());
  if (!dim.ok()) return InvalidArgument(Where(inst) + ": " + dim.status().message());
  return (*dim)[0];
}

Status SameDType(const Instruction& inst, const TensorMeta& base, const TensorMeta& source) {
  if (base.dtype == source.dtype) return Status::Ok();
  return InvalidArgument(Where(inst) + ": the source must have the tensor's dtype " + std::string(DTypeName(base.dtype)) +
                         ", got " + std::string(DTypeName(source.dtype)));
}

Result<TensorMeta> InferIndexing(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  const bool adds = GetOpInfo(inst.op).arity == 3;  // {base, index, source}
  if (in.size() != (adds ? 3u : 2u)) return ArityError(inst, adds ? 3 : 2, in.size());
  const TensorMeta& x = *in[0];
  const TensorMeta& index = *in[1];
  Result<int64_t> dim = IndexDim(inst, x, index);
  if (!dim.ok()) return dim.status();
  const size_t d = static_cast<size_t>(*dim);
  auto shapes = [&] { return ShapeToString(x.shape) + " and index " + ShapeToString(index.shape); };
  if (ShapeRuleOf(inst.op) == ShapeRule::kIndexVector) {
    if (index.shape.size() != 1) return InvalidArgument(Where(inst) + ": the index must be 1-D, got " + ShapeToString(index.shape));
    Shape picked = x.shape;
    picked[d] = index.shape[0];
    if (!adds) return TensorMeta{picked, x.dtype};
    if (in[2]->shape != picked)
      return InvalidArgument(Where(inst) + ": the source must have shape " + ShapeToString(picked) + ", got " +
                             ShapeToString(in[2]->shape));
    if (Status s = SameDType(inst, x, *in[2]); !s.ok()) return s;
    return x;
  }
  if (index.shape.size() != x.shape.size())
    return InvalidArgument(Where(inst) + ": the index must have the tensor's rank: " + shapes());
  for (size_t k = 0; k < x.shape.size(); ++k)
    if (k != d && index.shape[k] > x.shape[k])
      return InvalidArgument(Where(inst) + ": the index is larger than the tensor outside dim " + std::to_string(d) + ": " + shapes());
  if (!adds) return TensorMeta{index.shape, x.dtype};
  const Shape& source = in[2]->shape;
  if (source.size() != x.shape.size())
    return InvalidArgument(Where(inst) + ": the source must have the tensor's rank: " + ShapeToString(source));
  for (size_t k = 0; k < source.size(); ++k)
    if (index.shape[k] > source[k])
      return InvalidArgument(Where(inst) + ": the index " + ShapeToString(index.shape) + " is larger than the source " +
                             ShapeToString(source));
  if (Status s = SameDType(inst, x, *in[2]); !s.ok()) return s;
  return x;
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

Result<TensorMeta> InferMovement(const Instruction& inst, const TensorMeta& in) {
  switch (inst.op) {
    case Op::kReshape: return InferReshape(inst, in);
    case Op::kTranspose: return InferTranspose(inst, in);
    case Op::kUnsqueeze: return InferUnsqueeze(inst, in);
    case Op::kSqueeze: return InferSqueeze(inst, in);
    case Op::kPermute: return InferPermute(inst, in);
    case Op::kSlice: return InferSlice(inst, in);
    case Op::kSelect: return InferSelect(inst, in);
    default: return Internal(Where(inst) + " is not a single-operand movement op");
  }
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

namespace {

// Every rule is listed (no default): a new rule does not compile until it
// is inferred here.
Result<TensorMeta> InferByRule(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  switch (ShapeRuleOf(inst.op)) {
    case ShapeRule::kCreate: return InferCreate(inst);
    case ShapeRule::kBinary: return InferBinary(inst, in);
    case ShapeRule::kWhere: return InferWhere(inst, in);
    case ShapeRule::kMatmul: return InferMatmul(inst, in);
    case ShapeRule::kUnary: return InferUnary(inst, in);
    case ShapeRule::kTriangle: return InferTriangle(inst, in);
    case ShapeRule::kGradPair: return InferGradPair(inst, in);
    case ShapeRule::kRedistribute: return InferRedistribute(inst, in);
    case ShapeRule::kReduce: return InferReduce(inst, in);
    case ShapeRule::kArgReduce:
      if (in.size() != 1) return ArityError(inst, 1, in.size());
      return InferArgReduce(inst, *in[0]);
    case ShapeRule::kSumOfSquares: return InferSumOfSquares(inst, in);
    case ShapeRule::kCrossEntropy: return InferCrossEntropy(inst, in);
    case ShapeRule::kMseLoss: return InferMseLoss(inst, in);
    case ShapeRule::kMovement:
      if (in.size() != 1) return ArityError(inst, 1, in.size());
      return InferMovement(inst, *in[0]);
    case ShapeRule::kCat: return InferCat(inst, in);
    case ShapeRule::kIndexVector:
    case ShapeRule::kIndexTensor: return InferIndexing(inst, in);
    // Mutations change their operands and make nothing; collectives are made
    // only by dispatcher stages, which know their shapes.
    case ShapeRule::kNone: break;
  }
  return Internal(Where(inst) + " produces no tensor");
}

}  // namespace

Result<TensorMeta> InferResult(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  Result<TensorMeta> meta = InferByRule(inst, in);
  // Broadcasting, matmul and creation can name more elements than int64
  // counts; every later NumElements of that shape would be meaningless.
  if (meta.ok() && !CheckedProduct(meta->shape))
    return InvalidArgument(Where(inst) + ": result shape " + ShapeToString(meta->shape) +
                           " has more elements than an int64 counts");
  return meta;
}

}  // namespace gt
