// The torch backend's reductions, movement, cat and indexing kernels
// (kernels_families.h).
#include "kernels_families.h"

#include <algorithm>

#include "fused_kernels.h"
#include "instruction_checks.h"

namespace gt::torch_backend::kernels {
namespace {

std::vector<int64_t> AllDims(const at::Tensor& tensor) {
  std::vector<int64_t> dims(static_cast<size_t>(tensor.dim()));
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(i);
  return dims;
}

Result<at::Tensor> Transpose(const Instruction& inst, const at::Tensor& a) {
  const std::vector<int64_t>& axes = inst.attrs.axes;
  if (axes.size() == 2) return at::transpose(a, axes[0], axes[1]);
  if (!axes.empty()) return Invalid(inst, "transpose takes 0 or 2 axes, got " + std::to_string(axes.size()));
  if (a.dim() < 2) return a;
  return at::transpose(a, -2, -1);
}

// var's correction: an integer as PyTorch's (correction=1 is Bessel's).
c10::optional<int64_t> ScalarOfCorrection(double correction) { return static_cast<int64_t>(correction); }

}  // namespace

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
    case Op::kVar: return at::var(a, at::OptionalIntArrayRef(dims), ScalarOfCorrection(inst.attrs.scalar), keepdim);
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

}  // namespace gt::torch_backend::kernels
