// gt::Tensor's in-place ops (copy_, fill_, mul_, add_, +=, Adam's step),
// its autograd state (requires_grad, grad, backward, detach) and reading
// its data back (copy_to, item, fetch_bytes).
#include <cmath>
#include <cstring>
#include <functional>

#include "gt/nn.h"
#include "tensor_issue.h"

namespace gt {

using client_internal::CheckInPlaceAllowed;
using client_internal::Mutate;
using client_internal::Require;
using client_internal::TensorFactory;
using client_internal::TensorRecord;

Tensor& Tensor::copy_(const Tensor& source) {
  CheckInPlaceAllowed(*this, source, "copy_");
  Instruction inst;
  inst.op = Op::kCopyInto;
  Mutate(std::move(inst), {&Require(*this, "copy_"), &Require(source, "copy_")});
  return *this;
}

void check_in_place_cast(DType result, DType destination, const char* what) {
  // PyTorch's rule for an op that writes into its operand: the result may be
  // cast to the operand's dtype, but not from a float into an integer, nor
  // from a number into a bool (int64 += 1.5 is an error, not a truncation).
  const bool fits = IsFloatingPoint(destination) ||
                    (!IsFloatingPoint(result) && (destination != DType::kBool || result == DType::kBool));
  if (!fits)
    throw Error(Code::kInvalidArgument, std::string(what) + ": result type " + std::string(DTypeName(result)) +
                                            " can't be cast to the desired output type " +
                                            std::string(DTypeName(destination)));
}

Tensor& Tensor::assign_result_(const Tensor& result, const char* what) {
  check_in_place_cast(result.dtype(), dtype(), what);
  return copy_(result);
}

Tensor& Tensor::operator+=(double s) { return assign_result_(*this + s, "+="); }
Tensor& Tensor::operator-=(double s) { return assign_result_(*this - s, "-="); }
Tensor& Tensor::operator*=(double s) { return assign_result_(*this * s, "*="); }

Tensor& Tensor::mul_(const Tensor& factor) {
  CheckInPlaceAllowed(*this, factor, "mul_");
  const TensorRecord& destination = Require(*this, "mul_");
  const TensorRecord& by = Require(factor, "mul_");
  if (by.meta.dtype != destination.meta.dtype) return assign_result_(*this * factor, "mul_");
  Instruction inst;
  inst.op = Op::kMulInto;
  Mutate(std::move(inst), {&destination, &by});
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  CheckInPlaceAllowed(*this, other, "add_");
  const TensorRecord& destination = Require(*this, "add_");
  const TensorRecord& addend = Require(other, "add_");
  if (!IsFloatingPoint(destination.meta.dtype) && alpha != std::trunc(alpha))
    throw Error(Code::kInvalidArgument, "add_: alpha must be an integer for a " +
                                            std::string(DTypeName(destination.meta.dtype)) + " tensor, got " +
                                            std::to_string(alpha));
  // Bools (a sum is a logical or; a difference is refused, as PyTorch's) and
  // mixed dtypes: the out-of-place op, cast back.
  if (addend.meta.dtype != destination.meta.dtype || destination.meta.dtype == DType::kBool)
    return assign_result_(alpha == 1 ? *this + other : alpha == -1 ? *this - other : *this + other * alpha, "add_");
  Instruction inst;
  inst.op = Op::kAddInto;
  inst.attrs.scalar = alpha;
  Mutate(std::move(inst), {&destination, &addend});
  return *this;
}

namespace nn {

void adam_step_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                double beta2, double eps, double weight_decay, double bias_correction1, double bias_correction2,
                bool decoupled) {
  CheckInPlaceAllowed(param, "adam_step_");
  Instruction inst;
  inst.op = Op::kAdamStep;
  inst.attrs.numbers = {lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2};
  inst.attrs.keepdims = decoupled;
  const TensorRecord& m = Require(exp_avg, "adam_step_");
  const TensorRecord& v = Require(exp_avg_sq, "adam_step_");
  Mutate(std::move(inst), {&Require(param, "adam_step_"), &Require(grad, "adam_step_"), &m, &v});
  m.BumpVersion();  // the moment estimates changed too
  v.BumpVersion();
}

}  // namespace nn

Tensor& Tensor::fill_(double value) {
  CheckInPlaceAllowed(*this, "fill_");
  Instruction inst;
  inst.op = Op::kFill;
  inst.attrs.scalar = value;
  Mutate(std::move(inst), {&Require(*this, "fill_")});
  return *this;
}

// ---- autograd ----------------------------------------------------------------

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }
bool Tensor::is_leaf() const { return !impl_ || impl_->grad_fn == nullptr; }

Tensor& Tensor::requires_grad_(bool enabled) {
  Require(*this, "requires_grad_");
  if (!is_leaf())
    throw Error(Code::kFailedPrecondition, "requires_grad_: only leaf tensors can change requires_grad; use detach()");
  if (enabled && !IsFloatingPoint(dtype()))
    throw Error(Code::kInvalidArgument, "requires_grad_: only floating point tensors can require grad, this is " +
                                            std::string(DTypeName(dtype())));
  impl_->requires_grad = enabled;
  return *this;
}

Tensor Tensor::grad() const { return impl_ ? impl_->grad : Tensor(); }

void Tensor::set_grad(const Tensor& grad) {
  Require(*this, "set_grad");
  if (grad.defined() && grad.shape() != shape())
    throw Error(Code::kInvalidArgument, "set_grad: gradient of shape " + ShapeToString(grad.shape()) +
                                            " for a tensor of shape " + ShapeToString(shape()));
  impl_->grad = grad;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  Require(*this, "backward");
  client_internal::RunBackward(*this, gradient, retain_graph);
}

Tensor Tensor::detach() const {
  Require(*this, "detach");
  return TensorFactory::Make(impl_->data);
}

namespace {

// `r`'s bytes from its worker, checked against what the client inferred,
// handed to `read` (under the session's lock: Session::Fetch).
void FetchChecked(const TensorRecord& r, const std::function<void(const client_internal::FetchedData&)>& read) {
  const size_t want = static_cast<size_t>(NumElements(r.meta.shape)) * ElementSize(r.meta.dtype);
  r.session->Fetch(r, [&](client_internal::FetchedData& data) {
    if (!data.bytes || data.bytes->size() != want || data.shape != r.meta.shape || data.dtype != r.meta.dtype)
      throw Error(Code::kInternal, "fetch: worker returned " + ShapeToString(data.shape) + " " +
                                       std::string(DTypeName(data.dtype)) + " (" +
                                       std::to_string(data.bytes ? data.bytes->size() : 0) +
                                       " bytes) for a tensor inferred as " + ShapeToString(r.meta.shape) + " " +
                                       std::string(DTypeName(r.meta.dtype)));
    read(data);
  });
}

}  // namespace

void Tensor::copy_to(void* destination, size_t bytes) const {
  const TensorRecord& r = Require(*this, "copy_to");
  size_t want = static_cast<size_t>(NumElements(r.meta.shape)) * ElementSize(r.meta.dtype);
  if (bytes != want)
    throw Error(Code::kInvalidArgument, "copy_to: tensor " + ShapeToString(r.meta.shape) + " " +
                                            std::string(DTypeName(r.meta.dtype)) + " has " + std::to_string(want) +
                                            " bytes, destination has " + std::to_string(bytes));
  FetchChecked(r, [&](const client_internal::FetchedData& data) {
    if (want) std::memcpy(destination, data.bytes->data(), want);
  });
}

void Tensor::ReadBytes(const std::function<void(const void*, size_t)>& read) const {
  FetchChecked(Require(*this, "to_vector"), [&read](const client_internal::FetchedData& data) {
    read(data.bytes->data(), data.bytes->size());
  });
}

BlobPtr Tensor::fetch_bytes() const {
  BlobPtr out;
  FetchChecked(Require(*this, "fetch_bytes"), [&out](const client_internal::FetchedData& data) {
    out = data.shares_worker_memory ? CopyToBlob(data.bytes->data(), data.bytes->size()) : data.bytes;
  });
  return out;
}

double Tensor::item() const {
  if (numel() != 1)
    throw Error(Code::kInvalidArgument, "item: tensor of shape " + ShapeToString(shape()) + " has " +
                                            std::to_string(numel()) + " elements, expected 1");
  switch (dtype()) {
    case DType::kFloat32: return to_vector<float>()[0];
    case DType::kFloat64: return to_vector<double>()[0];
    case DType::kInt32: return to_vector<int32_t>()[0];
    case DType::kInt64: return static_cast<double>(to_vector<int64_t>()[0]);
    default: {
      uint8_t b = 0;
      copy_to(&b, 1);
      return b;
    }
  }
}

}  // namespace gt
