#include "kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "dtype_map.h"
#include "fused_kernels.h"
#include "gt/op_attrs.h"
#include "instruction_checks.h"
#include "ir/shape_inference.h"
#include "kernels_families.h"

namespace gt::torch_backend {
namespace {

// Bytes a creation op's tensor takes; fails on a negative or overflowing shape.
Result<size_t> ByteSize(const Instruction& inst) {
  uint64_t bytes = ElementSize(inst.attrs.dtype);
  for (int64_t dim : inst.attrs.shape)
    if (dim < 0) return Invalid(inst, "negative dimension " + std::to_string(dim));
  for (int64_t dim : inst.attrs.shape)
    if (dim == 0) return size_t{0};
  for (int64_t dim : inst.attrs.shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes) ||
        bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return Invalid(inst, "shape " + ShapeToString(inst.attrs.shape) + " is too large");
  }
  return static_cast<size_t>(bytes);
}

// The wire carries every scalar as a double, so `x + 1` and `x + 1.0` arrive
// alike. An integral value is taken as a Python int so that an integer tensor
// stays integer (`idx + 1`); -0.0 stays a double because its sign shows in
// division (`1 / -0.0`).
at::Scalar ScalarOf(double value) {
  constexpr double kTwoPow63 = 9223372036854775808.0;
  const bool integral = std::trunc(value) == value && !(value == 0 && std::signbit(value)) &&
                        std::fabs(value) < kTwoPow63;
  return integral ? at::Scalar(static_cast<int64_t>(value)) : at::Scalar(value);
}

// ---- creation ----------------------------------------------------------------

Result<at::Tensor> FromBytes(const Instruction& inst, size_t bytes, const at::TensorOptions& options) {
  const BlobPtr& payload = inst.payload;
  if (!payload) return Invalid(inst, "no payload");
  if (payload->size() != bytes)
    return Invalid(inst, "payload has " + std::to_string(payload->size()) + " bytes, shape and dtype need " +
                             std::to_string(bytes));
  // Wrapped without a copy: the deleter's copy of `payload` keeps the bytes
  // alive, and the tensor owns them from here on (no stage reads a
  // from_bytes payload once it is executed). from_blob wants a mutable
  // pointer: a later mutation (kCopyInto, kMulInto, ...) of this tensor writes into the payload.
  void* data = const_cast<std::byte*>(payload->data());
  at::Tensor tensor = at::from_blob(data, inst.attrs.shape, [payload](void*) {}, options);
  // A frame need not be aligned to its element size; ATen kernels assume it is.
  const bool aligned = reinterpret_cast<uintptr_t>(data) % ElementSize(inst.attrs.dtype) == 0;
  return aligned ? tensor : tensor.clone();
}

Result<at::Tensor> Randn(const Instruction& inst, const at::TensorOptions& options) {
  if (!IsFloatingPoint(inst.attrs.dtype))
    return Invalid(inst, "randn needs a floating-point dtype, got " + std::string(DTypeName(inst.attrs.dtype)));
  if (inst.attrs.seed == 0) return at::randn(inst.attrs.shape, options);
  at::Generator generator = at::detail::createCPUGenerator(inst.attrs.seed);
  return at::randn(inst.attrs.shape, generator, options);
}

Result<at::Tensor> Rand(const Instruction& inst, const at::TensorOptions& options) {
  if (!IsFloatingPoint(inst.attrs.dtype))
    return Invalid(inst, "rand needs a floating-point dtype, got " + std::string(DTypeName(inst.attrs.dtype)));
  if (inst.attrs.seed == 0) return at::rand(inst.attrs.shape, options);
  at::Generator generator = at::detail::createCPUGenerator(inst.attrs.seed);
  return at::rand(inst.attrs.shape, generator, options);
}

Result<at::Tensor> Arange(const Instruction& inst, const at::TensorOptions& options) {
  const std::vector<double>& n = inst.attrs.numbers;
  // The client's own checks (finite bounds, a step of the right sign), for
  // an instruction that did not come from it: ATen would make nan bounds an
  // empty tensor, or {nan, 5, 1} into 0..4.
  if (Result<TensorMeta> meta = InferResult(inst, {}); !meta.ok()) return Invalid(inst, meta.status().message());
  return at::arange(n[0], n[1], n[2], options);
}

Result<at::Tensor> Create(const Instruction& inst, TensorSource source) {
  Result<std::vector<at::Tensor>> operands = Operands(inst, 0, source);
  if (!operands.ok()) return operands.status();
  Result<size_t> bytes = ByteSize(inst);
  if (!bytes.ok()) return bytes.status();
  const at::TensorOptions options = at::TensorOptions().dtype(ToScalarType(inst.attrs.dtype));
  switch (inst.op) {
    case Op::kFromBytes: return FromBytes(inst, *bytes, options);
    case Op::kRandn: return Randn(inst, options);
    case Op::kZeros: return at::zeros(inst.attrs.shape, options);
    case Op::kOnes: return at::ones(inst.attrs.shape, options);
    case Op::kRand: return Rand(inst, options);
    case Op::kArange: return Arange(inst, options);
    default: break;  // Compute() routes only creation ops here
  }
  return Internal("not a creation op: " + inst.Describe());
}

// ---- collectives ---------------------------------------------------------------

Result<at::Tensor> Collective(const Instruction& inst, TensorSource source, Collectives& collectives) {
  // Only a broadcast's non-root members come without an operand.
  const size_t count = inst.op == Op::kBroadcast ? inst.operands.size() : 1;
  if (count > 1) return Invalid(inst, "expects at most one operand");
  if (!IsValid(inst.attrs.dtype)) return Invalid(inst, "bad dtype");
  Result<std::vector<at::Tensor>> operands = Operands(inst, count, source);
  // The other members are already waiting for this one.
  if (!operands.ok()) return collectives.StandIn(inst, ToScalarType(inst.attrs.dtype), operands.status());
  const at::Tensor* operand = operands->empty() ? nullptr : &(*operands)[0];
  return collectives.Run(inst, operand, ToScalarType(inst.attrs.dtype));
}

}  // namespace

Result<std::vector<at::Tensor>> Operands(const Instruction& inst, size_t count, TensorSource source) {
  if (inst.operands.size() != count)
    return Invalid(inst, "expects " + std::to_string(count) + " operand(s), got " +
                             std::to_string(inst.operands.size()));
  std::vector<at::Tensor> tensors;
  tensors.reserve(count);
  for (TensorId id : inst.operands) {
    const at::Tensor* tensor = source.Find(id);
    if (!tensor) return UnknownTensor(inst, id);
    tensors.push_back(*tensor);
  }
  return tensors;
}

// Routed by the op's shape rule (gt/ops.def): every rule is listed, so a new
// rule does not compile until it has a kernel family here.
Result<at::Tensor> Compute(const Instruction& inst, TensorSource source, Collectives& collectives) {
  switch (ShapeRuleOf(inst.op)) {
    case ShapeRule::kCreate: return Create(inst, source);
    case ShapeRule::kBinary: return kernels::Binary(inst, source);
    case ShapeRule::kWhere: return kernels::Where(inst, source);
    case ShapeRule::kMatmul: return kernels::Matmul(inst, source);
    case ShapeRule::kUnary:
    case ShapeRule::kTriangle:
    case ShapeRule::kRedistribute: return kernels::Unary(inst, source);
    case ShapeRule::kGradPair: return kernels::FusedBackward(inst, source);
    case ShapeRule::kReduce:
    case ShapeRule::kArgReduce: return kernels::Reduce(inst, source);
    case ShapeRule::kSumOfSquares: return kernels::SumOfSquares(inst, source);
    case ShapeRule::kCrossEntropy: return kernels::CrossEntropy(inst, source);
    case ShapeRule::kMseLoss: return kernels::MseLoss(inst, source);
    case ShapeRule::kMovement: return kernels::Movement(inst, source);
    case ShapeRule::kCat: return kernels::Cat(inst, source);
    case ShapeRule::kIndexVector:
    case ShapeRule::kIndexTensor: return kernels::Indexing(inst, source);
    case ShapeRule::kConv: return kernels::Conv(inst, source);
    case ShapeRule::kPool: return kernels::Pool(inst, source);
    // Collectives have no shape rule (their stages know the shapes); the
    // rest make no tensor of their own: Mutate(), or the backend's control path.
    case ShapeRule::kNone:
      if (KindOf(inst.op) == OpKind::kCollective) return Collective(inst, source, collectives);
      break;
  }
  return Internal("no tensor kernel for " + inst.Describe());
}

namespace {

// PyTorch's single-tensor AdamW (torch/optim/adamw.py), in place: one pass
// (AdamUpdate) where the layout allows, else the same steps as ATen calls.
Status AdamStep(const Instruction& inst, std::vector<at::Tensor>& t) {
  at::Tensor& p = t[0];
  at::Tensor& m = t[2];
  at::Tensor& v = t[3];
  at::Tensor g = t[1];
  for (const at::Tensor& x : t)
    if (x.scalar_type() != p.scalar_type() || !x.sizes().equals(p.sizes()) || !at::isFloatingType(x.scalar_type()))
      return Invalid(inst, "param, grad, exp_avg and exp_avg_sq must share one floating dtype and shape");
  const std::vector<double>& n = inst.attrs.numbers;
  if (n.size() != 7) return Invalid(inst, "expects 7 numbers (lr, betas, eps, weight_decay, bias corrections)");
  const double lr = n[0], beta1 = n[1], beta2 = n[2], eps = n[3], weight_decay = n[4];
  const double correction1 = n[5], correction2 = n[6];
  if (!(correction1 > 0) || !(correction2 > 0)) return Invalid(inst, "bias corrections must be > 0");
  const bool decoupled = inst.attrs.keepdims;
  if (AdamUpdate(p, g, m, v, {lr, beta1, beta2, eps, weight_decay, correction1, correction2, decoupled}))
    return Status::Ok();
  if (decoupled) p.mul_(1 - lr * weight_decay);  // as PyTorch's AdamW, whatever weight_decay is
  if (weight_decay != 0 && !decoupled) g = g.add(p, weight_decay);  // PyTorch's Adam: grad.add(param, alpha=wd)
  m.mul_(beta1).add_(g, 1 - beta1);
  v.mul_(beta2).addcmul_(g, g, 1 - beta2);
  const at::Tensor denom = (v.sqrt() / std::sqrt(correction2)).add_(eps);
  p.addcdiv_(m, denom, -lr / correction1);
  return Status::Ok();
}

}  // namespace

Status Mutate(const Instruction& inst, TensorSource source) {
  if (inst.op == Op::kAdamStep) {
    Result<std::vector<at::Tensor>> operands = Operands(inst, 4, source);
    if (!operands.ok()) return operands.status();
    return AdamStep(inst, *operands);
  }
  const size_t count = inst.op == Op::kCopyInto || inst.op == Op::kMulInto || inst.op == Op::kAddInto ? 2 : 1;
  Result<std::vector<at::Tensor>> operands = Operands(inst, count, source);
  if (!operands.ok()) return operands.status();
  at::Tensor destination = (*operands)[0];
  if (inst.op == Op::kCopyInto) {
    destination.copy_((*operands)[1]);
  } else if (inst.op == Op::kMulInto) {
    destination.mul_((*operands)[1]);
  } else if (inst.op == Op::kAddInto) {
    if (destination.scalar_type() == at::kBool && inst.attrs.scalar != 1)
      return Invalid(inst, "a bool tensor takes only alpha = 1 (a logical or); a difference of bools is not defined");
    destination.add_((*operands)[1], ScalarOf(inst.attrs.scalar));
  } else {
    destination.fill_(inst.attrs.scalar);
  }
  return Status::Ok();
}

at::Tensor WrappedScalar(double value) {
  at::Tensor tensor = c10::scalar_to_tensor(ScalarOf(value));
  tensor.unsafeGetTensorImpl()->set_wrapped_number(true);
  return tensor;
}

at::Tensor Compare(Op op, const at::Tensor& a, const at::Tensor& b) {
  switch (op) {
    case Op::kGt: return at::gt(a, b);
    case Op::kLt: return at::lt(a, b);
    case Op::kGe: return at::ge(a, b);
    case Op::kLe: return at::le(a, b);
    default: return at::eq(a, b);  // kEq: the REQUIRES leaves no other op
  }
}

}  // namespace gt::torch_backend

