// The torch backend's elementwise kernels (binary, where, unary), matmul,
// the fused backwards and the fused losses (kernels_families.h).
#include "kernels_families.h"

#include <cmath>
#include <limits>
#include <optional>

#include "dtype_map.h"
#include "fused_kernels.h"
#include "gt/op_attrs.h"
#include "instruction_checks.h"

namespace gt::torch_backend::kernels {
namespace {

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

}  // namespace

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

}  // namespace gt::torch_backend::kernels
