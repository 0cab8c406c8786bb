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

std::vector<int64_t> AllDims(const at::Tensor& tensor) {
  std::vector<int64_t> dims(static_cast<size_t>(tensor.dim()));
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(i);
  return dims;
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

// ---- elementwise -------------------------------------------------------------

Result<at::Tensor> Binary(const Instruction& inst, TensorSource source) {
  const ScalarSide side = inst.attrs.scalar_side;
  Result<std::vector<at::Tensor>> operands = Operands(inst, side == ScalarSide::kNone ? 2 : 1, source);
  if (!operands.ok()) return operands.status();
  std::vector<at::Tensor>& args = *operands;
  if (side != ScalarSide::kNone) {
    // Beside a floating tensor the scalar is made in its dtype at once:
    // ATen would cast a double one to it in every call (a copy and an
    // allocation, a fifth of a small add's time), giving the same value.
    // (Past float32's range ATen's cast gives +-inf, where making one refuses.)
    const at::Tensor& t = args[0];
    const double v = inst.attrs.scalar;
    const bool fits = t.scalar_type() == at::kDouble ||
                      (t.scalar_type() == at::kFloat && !(std::fabs(v) > std::numeric_limits<float>::max() && std::isfinite(v)));
    at::Tensor scalar = fits && inst.op != Op::kPow ? at::scalar_tensor(v, t.options()) : WrappedScalar(v);
    scalar.unsafeGetTensorImpl()->set_wrapped_number(true);
    if (side == ScalarSide::kRight) args.push_back(std::move(scalar));
    else args.insert(args.begin(), std::move(scalar));
  }
  const at::Tensor& a = args[0];
  const at::Tensor& b = args[1];
  switch (inst.op) {
    case Op::kAdd: return at::add(a, b);
    case Op::kSub: return at::sub(a, b);
    case Op::kMul: return at::mul(a, b);
    case Op::kDiv: return at::div(a, b);  // true division, as PyTorch's `/`
    case Op::kPow: return at::pow(a, b);
    case Op::kMaximum: return at::maximum(a, b);
    case Op::kMinimum: return at::minimum(a, b);
    case Op::kGt:
    case Op::kLt:
    case Op::kGe:
    case Op::kLe:
    case Op::kEq: return Compare(inst.op, a, b);
    default: break;  // Compute() routes only binary ops here
  }
  return Internal("not a binary op: " + inst.Describe());
}

// cond ? a : b, a mask's nonzero elements true; a scalar takes the other
// operand's type (as masked_fill), two tensors promote (as the client inferred).
Result<at::Tensor> Where(const Instruction& inst, TensorSource source) {
  const ScalarSide side = inst.attrs.scalar_side;
  Result<std::vector<at::Tensor>> operands = Operands(inst, side == ScalarSide::kNone ? 3 : 2, source);
  if (!operands.ok()) return operands.status();
  const std::vector<at::Tensor>& args = *operands;
  const at::Tensor cond = args[0].scalar_type() == at::kBool ? args[0] : args[0].ne(0);
  if (side == ScalarSide::kNone) {
    const at::ScalarType type = at::result_type(args[1], args[2]);
    return at::where(cond, args[1].to(type), args[2].to(type));
  }
  // Promoted as PyTorch promotes a Python scalar: where(c, int64, 0.5) is
  // float32, where(c, int64, 2) stays int64.
  const at::ScalarType type = at::result_type(args[1], WrappedScalar(inst.attrs.scalar));
  const at::Tensor t = args[1].to(type);
  const at::Tensor value = at::scalar_tensor(inst.attrs.scalar, t.options());
  return side == ScalarSide::kLeft ? at::where(cond, value, t) : at::where(cond, t, value);
}

Result<at::Tensor> Matmul(const Instruction& inst, TensorSource source) {
  Result<std::vector<at::Tensor>> operands = Operands(inst, 2, source);
  if (!operands.ok()) return operands.status();
  return at::matmul((*operands)[0], (*operands)[1]);
}

Result<at::Tensor> Softmax(const Instruction& inst, const at::Tensor& a) {
  if (inst.attrs.axes.size() != 1) return Invalid(inst, "expects exactly one dim");
  const int64_t dim = inst.attrs.axes[0];
  // Integer inputs are computed in float32, as the client inferred.
  if (!a.is_floating_point()) return Softmax(inst, a.to(at::kFloat));
  return inst.op == Op::kSoftmax ? at::softmax(a, dim) : at::log_softmax(a, dim);
}

// The trailing `dims` sizes of `a`, which layer_norm normalizes over.
Result<std::vector<int64_t>> NormalizedShape(const Instruction& inst, const at::Tensor& a) {
  if (inst.attrs.axes.size() != 1 || inst.attrs.axes[0] < 1 || inst.attrs.axes[0] > a.dim())
    return Invalid(inst, "expects the number of trailing dims to normalize, 1.." + std::to_string(a.dim()));
  if (!(inst.attrs.scalar >= 0)) return Invalid(inst, "eps must be >= 0");
  return std::vector<int64_t>(a.sizes().end() - inst.attrs.axes[0], a.sizes().end());
}

Result<at::Tensor> LayerNorm(const Instruction& inst, const at::Tensor& a) {
  Result<std::vector<int64_t>> normalized = NormalizedShape(inst, a);
  if (!normalized.ok()) return normalized.status();
  if (!a.is_floating_point()) return LayerNorm(inst, a.to(at::kFloat));  // as the client inferred
  if (at::Tensor y = LayerNormRows(a, c10::multiply_integers(*normalized), inst.attrs.scalar); y.defined()) return y;
  return at::layer_norm(a, *normalized, {}, {}, inst.attrs.scalar);
}

// The fused backwards: operands {grad, x} of one shape and floating dtype.
Result<at::Tensor> FusedBackward(const Instruction& inst, TensorSource source) {
  Result<std::vector<at::Tensor>> operands = Operands(inst, 2, source);
  if (!operands.ok()) return operands.status();
  const at::Tensor& grad = (*operands)[0];
  const at::Tensor& x = (*operands)[1];
  if (!grad.sizes().equals(x.sizes()) || grad.scalar_type() != x.scalar_type() || !x.is_floating_point())
    return Invalid(inst, "expects a gradient and an input of one shape and floating dtype");
  if (inst.op == Op::kGeluBackward) return at::gelu_backward(grad, x);
  if (inst.op == Op::kReluBackward) return at::threshold_backward(grad, x, 0);
  Result<std::vector<int64_t>> normalized = NormalizedShape(inst, x);
  if (!normalized.ok()) return normalized.status();
  // The statistics again (one pass over x) rather than a second result.
  const int64_t cols = c10::multiply_integers(*normalized);
  if (at::Tensor dx = LayerNormRowsBackward(grad, x, cols, inst.attrs.scalar); dx.defined()) return dx;
  const auto [unused, mean, rstd] = at::native_layer_norm(x, *normalized, {}, {}, inst.attrs.scalar);
  return std::get<0>(at::native_layer_norm_backward(grad, x, *normalized, mean, rstd, {}, {}, {true, false, false}));
}

// cross_entropy {logits, targets} and its backward {grad, logits, targets}:
// LibTorch's own kernels (log_softmax + nll_loss, mean over the rows not
// ignored), so the loss and its gradient are PyTorch's to the bit.
Result<at::Tensor> CrossEntropy(const Instruction& inst, TensorSource source) {
  const bool backward = inst.op == Op::kCrossEntropyBackward;
  Result<std::vector<at::Tensor>> operands = Operands(inst, backward ? 3 : 2, source);
  if (!operands.ok()) return operands.status();
  const at::Tensor& logits = (*operands)[backward ? 1 : 0];
  const at::Tensor& targets = (*operands)[backward ? 2 : 1];
  if (logits.dim() != 2 || !logits.is_floating_point() || targets.dim() != 1 || targets.size(0) != logits.size(0) ||
      (targets.scalar_type() != at::kLong && targets.scalar_type() != at::kInt))
    return Invalid(inst, "expects floating-point logits (batch, classes) and int32/int64 targets (batch)");
  // Checked here too: a client whose stream no stage infers reaches this as sent.
  const std::optional<int64_t> ignore_index = IgnoreIndex(inst);
  if (!ignore_index) return Invalid(inst, "ignore_index must be an integer");
  const at::Tensor classes = targets.to(at::kLong);
  if (!backward) return at::cross_entropy_loss(logits, classes, {}, at::Reduction::Mean, *ignore_index, 0.0);
  const at::Tensor& grad = (*operands)[0];
  if (grad.dim() != 0 || grad.scalar_type() != logits.scalar_type())
    return Invalid(inst, "expects a 0-d gradient of the logits' dtype");
  const at::Tensor log_probs = at::log_softmax(logits, 1);
  const at::Tensor counted = std::get<1>(at::nll_loss_forward(log_probs, classes, {}, at::Reduction::Mean, *ignore_index));
  const at::Tensor grad_log_probs =
      at::nll_loss_backward(grad, log_probs, classes, {}, at::Reduction::Mean, *ignore_index, counted);
  return at::_log_softmax_backward_data(grad_log_probs, log_probs, 1, logits.scalar_type());
}

// mse_loss {input, target} and its backward {grad, input, target}: LibTorch's
// kernels, mean reduction.
Result<at::Tensor> MseLoss(const Instruction& inst, TensorSource source) {
  const bool backward = inst.op == Op::kMseLossBackward;
  Result<std::vector<at::Tensor>> operands = Operands(inst, backward ? 3 : 2, source);
  if (!operands.ok()) return operands.status();
  const at::Tensor& input = (*operands)[backward ? 1 : 0];
  const at::Tensor& target = (*operands)[backward ? 2 : 1];
  if (!input.sizes().equals(target.sizes()) || input.scalar_type() != target.scalar_type() || !input.is_floating_point())
    return Invalid(inst, "expects an input and a target of one shape and floating dtype");
  if (!backward) return at::mse_loss(input, target, at::Reduction::Mean);
  const at::Tensor& grad = (*operands)[0];
  if (grad.dim() != 0 || grad.scalar_type() != input.scalar_type())
    return Invalid(inst, "expects a 0-d gradient of the input's dtype");
  return at::mse_loss_backward(grad, input, target, at::Reduction::Mean);
}

Result<at::Tensor> Unary(const Instruction& inst, TensorSource source) {
  Result<std::vector<at::Tensor>> operands = Operands(inst, 1, source);
  if (!operands.ok()) return operands.status();
  const at::Tensor& a = (*operands)[0];
  switch (inst.op) {
    case Op::kRelu: return at::relu(a);
    case Op::kSigmoid: return at::sigmoid(a);
    case Op::kTanh: return at::tanh(a);
    case Op::kExp: return at::exp(a);
    case Op::kLog: return at::log(a);
    case Op::kSqrt: return at::sqrt(a);
    case Op::kNeg: return at::neg(a);
    case Op::kAbs: return at::abs(a);
    case Op::kClone: return at::clone(a);
    case Op::kRedistribute:  // only the dispatcher's sharding stage moves it; here it is a copy
      if (std::vector<int64_t>(a.sizes().begin(), a.sizes().end()) != inst.attrs.shape ||
          !IsValid(inst.attrs.dtype) || a.scalar_type() != ToScalarType(inst.attrs.dtype))
        return Invalid(inst, "the operand is not of the shape and dtype the instruction states");
      return at::clone(a);
    case Op::kErf: return at::erf(a);
    case Op::kTril:
    case Op::kTriu:
      if (inst.attrs.axes.size() != 1) return Invalid(inst, "expects one diagonal");
      if (a.dim() < 2) return Invalid(inst, "needs at least 2 dimensions");
      return inst.op == Op::kTril ? at::tril(a, inst.attrs.axes[0]) : at::triu(a, inst.attrs.axes[0]);
    case Op::kSoftmax:
    case Op::kLogSoftmax: return Softmax(inst, a);
    case Op::kGelu: return at::gelu(a.is_floating_point() ? a : a.to(at::kFloat));
    case Op::kLayerNorm: return LayerNorm(inst, a);
    default: break;  // Compute() routes only unary ops here
  }
  return Internal("not a unary op: " + inst.Describe());
}

// ---- reductions and movement -------------------------------------------------

Result<at::Tensor> Reduce(const Instruction& inst, TensorSource source) {
  Result<std::vector<at::Tensor>> operands = Operands(inst, 1, source);
  if (!operands.ok()) return operands.status();
  const at::Tensor& a = (*operands)[0];
  if (inst.op == Op::kArgMax || inst.op == Op::kArgMin) {
    const c10::optional<int64_t> dim =
        inst.attrs.axes.empty() ? c10::nullopt : c10::optional<int64_t>(inst.attrs.axes[0]);
    const bool keepdim = dim.has_value() && inst.attrs.keepdims;
    return inst.op == Op::kArgMax ? at::argmax(a, dim, keepdim) : at::argmin(a, dim, keepdim);
  }
  // Every dim rather than an empty list: what ATen makes of `[]` differs
  // between ops and releases.
  const std::vector<int64_t> dims = inst.attrs.axes.empty() ? AllDims(a) : inst.attrs.axes;
  const bool keepdim = inst.attrs.keepdims;
  switch (inst.op) {
    case Op::kSum: return at::sum(a, at::IntArrayRef(dims), keepdim);
    case Op::kMean: return at::mean(a, at::IntArrayRef(dims), keepdim);
    case Op::kMax: return at::amax(a, at::IntArrayRef(dims), keepdim);
    case Op::kMin: return at::amin(a, at::IntArrayRef(dims), keepdim);
    default: break;  // Compute() routes only reductions here
  }
  return Internal("not a reduction: " + inst.Describe());
}

// One dot product per operand (a BLAS kernel, no temporary for a contiguous
// one), summed in the operands' one floating dtype.
Result<at::Tensor> SumOfSquares(const Instruction& inst, TensorSource source) {
  if (inst.operands.empty()) return Invalid(inst, "expects at least one operand");
  Result<std::vector<at::Tensor>> operands = Operands(inst, inst.operands.size(), source);
  if (!operands.ok()) return operands.status();
  const at::ScalarType type = (*operands)[0].scalar_type();
  if (!at::isFloatingType(type)) return Invalid(inst, "expects floating-point operands");
  if (at::Tensor total = SumOfSquaresAll(*operands); total.defined()) return total;
  at::Tensor total = at::zeros({}, at::TensorOptions().dtype(type));
  for (const at::Tensor& t : *operands) {
    if (t.scalar_type() != type) return Invalid(inst, "expects operands of one dtype");
    const at::Tensor flat = t.reshape({-1});
    total.add_(type == at::kFloat || type == at::kDouble ? at::dot(flat, flat) : (flat * flat).sum());
  }
  return total;
}

Result<at::Tensor> Transpose(const Instruction& inst, const at::Tensor& a) {
  const std::vector<int64_t>& axes = inst.attrs.axes;
  if (axes.size() == 2) return at::transpose(a, axes[0], axes[1]);
  if (!axes.empty()) return Invalid(inst, "transpose takes 0 or 2 axes, got " + std::to_string(axes.size()));
  if (a.dim() < 2) return a;
  return at::transpose(a, -2, -1);
}

Result<at::Tensor> Cat(const Instruction& inst, TensorSource source) {
  if (inst.operands.empty()) return Invalid(inst, "expects at least one operand");
  if (inst.attrs.axes.size() != 1) return Invalid(inst, "expects one dim");
  Result<std::vector<at::Tensor>> operands = Operands(inst, inst.operands.size(), source);
  if (!operands.ok()) return operands.status();
  return at::cat(*operands, inst.attrs.axes[0]);
}

// index_select / index_add / gather / scatter_add, out of place; ATen
// checks the index values (an error names the op).
Result<at::Tensor> Indexing(const Instruction& inst, TensorSource source) {
  Result<std::vector<at::Tensor>> operands = Operands(inst, static_cast<size_t>(GetOpInfo(inst.op).arity), source);
  if (!operands.ok()) return operands.status();
  if (inst.attrs.axes.size() != 1) return Invalid(inst, "expects one dim");
  const std::vector<at::Tensor>& a = *operands;
  const int64_t dim = inst.attrs.axes[0];
  const at::Tensor index = a[1].to(at::kLong);
  switch (inst.op) {
    case Op::kIndexSelect: return at::index_select(a[0], dim, index);
    case Op::kIndexAdd: return at::index_add(a[0], dim, index, a[2]);
    case Op::kGather: return at::gather(a[0], dim, index);
    case Op::kScatterAdd: return at::scatter_add(a[0], dim, index, a[2]);
    default: break;
  }
  return Internal("not an indexing op: " + inst.Describe());
}

Result<at::Tensor> Movement(const Instruction& inst, TensorSource source) {
  Result<std::vector<at::Tensor>> operands = Operands(inst, 1, source);
  if (!operands.ok()) return operands.status();
  const at::Tensor& a = (*operands)[0];
  const std::vector<int64_t>& axes = inst.attrs.axes;
  switch (inst.op) {
    case Op::kReshape: return at::reshape(a, inst.attrs.shape);
    case Op::kTranspose: return Transpose(inst, a);
    case Op::kPermute: return a.permute(axes);
    case Op::kUnsqueeze:
      if (axes.size() != 1) return Invalid(inst, "expects one dim");
      return at::unsqueeze(a, axes[0]);
    case Op::kSqueeze:
      if (axes.size() > 1) return Invalid(inst, "expects at most one dim");
      return axes.empty() ? at::squeeze(a) : at::squeeze(a, axes[0]);
    case Op::kSlice: {
      if (axes.size() != 4) return Invalid(inst, "expects {dim, start, stop, step}");
      if (axes[3] <= 0) return Invalid(inst, "slice step must be positive");
      // Past ±2^62 a bound means what ±2^62 does (an end of the dim); and
      // c10 takes int64 values near INT64_MIN for symbolic sizes, failing
      // with its own internal message.
      const auto bound = [](int64_t v) { return std::clamp<int64_t>(v, -(int64_t{1} << 62), int64_t{1} << 62); };
      return at::slice(a, axes[0], bound(axes[1]), bound(axes[2]), axes[3]);
    }
    case Op::kSelect:
      if (axes.size() != 2) return Invalid(inst, "expects {dim, index}");
      return at::select(a, axes[0], axes[1]);
    default: break;  // Compute() routes only movement ops here
  }
  return Internal("not a movement op: " + inst.Describe());
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
    case ShapeRule::kBinary: return Binary(inst, source);
    case ShapeRule::kWhere: return Where(inst, source);
    case ShapeRule::kMatmul: return Matmul(inst, source);
    case ShapeRule::kUnary:
    case ShapeRule::kTriangle:
    case ShapeRule::kRedistribute: return Unary(inst, source);
    case ShapeRule::kGradPair: return FusedBackward(inst, source);
    case ShapeRule::kReduce:
    case ShapeRule::kArgReduce: return Reduce(inst, source);
    case ShapeRule::kSumOfSquares: return SumOfSquares(inst, source);
    case ShapeRule::kCrossEntropy: return CrossEntropy(inst, source);
    case ShapeRule::kMseLoss: return MseLoss(inst, source);
    case ShapeRule::kMovement: return Movement(inst, source);
    case ShapeRule::kCat: return Cat(inst, source);
    case ShapeRule::kIndexVector:
    case ShapeRule::kIndexTensor: return Indexing(inst, source);
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
