// gt::Tensor: builds one instruction per call and hands it to the session.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "gt/op_attrs.h"
#include "gt/gt.h"
#include "gt/nn.h"
#include "session.h"
#include "tensor_impl.h"

namespace gt {

using client_internal::Session;
using client_internal::TensorFactory;
using client_internal::TensorImpl;
using client_internal::TensorRecord;

namespace {

thread_local std::vector<std::string> signal_stack;
thread_local std::vector<bool> signal_compiles;  // parallel to signal_stack
thread_local std::vector<std::string> signal_backwards;  // parallel to signal_stack: resolved backward signals

const TensorRecord& Require(const Tensor& t, const char* what) {
  const TensorRecord* r = TensorFactory::Record(t);
  if (!r) throw Error(Code::kInvalidArgument, std::string(what) + ": undefined tensor");
  return *r;
}

// Issues `inst` on `inputs` and records it for autograd.
Tensor Issue(Instruction inst, const std::vector<Tensor>& inputs) {
  std::vector<const TensorRecord*> operands;
  operands.reserve(inputs.size());
  for (const Tensor& t : inputs) operands.push_back(&Require(t, OpName(inst.op).data()));
  if (!signal_stack.empty()) inst.signal = signal_stack.back();
  Attributes attrs = inst.attrs;
  Op op = inst.op;
  Tensor out = TensorFactory::Make(Session::Get()->Issue(std::move(inst), operands));
  // The worker makes the result as a view of operand 0 (an ATen view).
  if (HasOpFlag(op, kView)) operands[0]->ShareVersionWith(*TensorFactory::Record(out));
  client_internal::RecordForAutograd(op, attrs, inputs, out);
  return out;
}

Tensor Unary(const Tensor& t, Op op) {
  Instruction inst;
  inst.op = op;
  return Issue(std::move(inst), {t});
}

Tensor Binary(const Tensor& a, const Tensor& b, Op op) {
  Instruction inst;
  inst.op = op;
  return Issue(std::move(inst), {a, b});
}

Tensor WithScalar(const Tensor& a, double s, Op op, ScalarSide side) {
  return Issue(MakeScalarBinary(op, s, side), {a});
}

Tensor Reduce(const Tensor& t, Op op, std::vector<int64_t> axes, bool keepdims) {
  Instruction inst;
  inst.op = op;
  inst.attrs.axes = std::move(axes);
  inst.attrs.keepdims = keepdims;
  return Issue(std::move(inst), {t});
}

// In-place ops cannot be recorded: refuse them where a record is needed.
void CheckInPlaceAllowed(const Tensor& t, const char* what) {
  if (is_grad_enabled() && t.requires_grad())
    throw Error(Code::kFailedPrecondition,
                std::string(what) + ": a tensor that requires grad cannot be changed in place while grad mode is "
                                    "on (use gt::NoGradGuard / `with gt.no_grad():`)");
}

// Nor may an in-place op take in a tensor that requires grad while grad
// mode is on: the destination would hold values with a gradient that no
// record carries back (PyTorch records it; gt would lose it silently).
void CheckInPlaceAllowed(const Tensor& t, const Tensor& source, const char* what) {
  CheckInPlaceAllowed(t, what);
  if (is_grad_enabled() && source.requires_grad())
    throw Error(Code::kFailedPrecondition,
                std::string(what) + ": a tensor that requires grad cannot flow into another in place while grad "
                                    "mode is on: its gradient would be lost (write `a = a + b`, or use "
                                    "gt::NoGradGuard / `with gt.no_grad():`)");
}

void Mutate(Instruction inst, const std::vector<const TensorRecord*>& operands) {
  if (!signal_stack.empty()) inst.signal = signal_stack.back();
  Session::Get()->Mutate(std::move(inst), operands);
  operands[0]->BumpVersion();  // the destination's data changed
}

Tensor WithAxes(const Tensor& t, Op op, std::vector<int64_t> axes) {
  Instruction inst;
  inst.op = op;
  inst.attrs.axes = std::move(axes);
  return Issue(std::move(inst), {t});
}

Tensor Create(Op op, Shape shape, DType dtype, uint64_t seed, BlobPtr payload) {
  Instruction inst;
  inst.op = op;
  inst.attrs.shape = std::move(shape);
  inst.attrs.dtype = dtype;
  if (op == Op::kRandn || op == Op::kRand) SetRngSeed(inst, seed);
  inst.payload = std::move(payload);
  return Issue(std::move(inst), {});
}

}  // namespace

const Shape& Tensor::shape() const { return Require(*this, "shape").meta.shape; }
DType Tensor::dtype() const { return Require(*this, "dtype").meta.dtype; }
TensorId Tensor::id() const { return Require(*this, "id").id; }

Tensor Tensor::operator+(const Tensor& o) const { return Binary(*this, o, Op::kAdd); }
Tensor Tensor::operator-(const Tensor& o) const { return Binary(*this, o, Op::kSub); }
Tensor Tensor::operator*(const Tensor& o) const { return Binary(*this, o, Op::kMul); }
Tensor Tensor::operator/(const Tensor& o) const { return Binary(*this, o, Op::kDiv); }
Tensor Tensor::operator+(double s) const { return WithScalar(*this, s, Op::kAdd, ScalarSide::kRight); }
Tensor Tensor::operator-(double s) const { return WithScalar(*this, s, Op::kSub, ScalarSide::kRight); }
Tensor Tensor::operator*(double s) const { return WithScalar(*this, s, Op::kMul, ScalarSide::kRight); }
Tensor Tensor::operator/(double s) const { return WithScalar(*this, s, Op::kDiv, ScalarSide::kRight); }
Tensor operator+(double s, const Tensor& t) { return WithScalar(t, s, Op::kAdd, ScalarSide::kLeft); }
Tensor operator-(double s, const Tensor& t) { return WithScalar(t, s, Op::kSub, ScalarSide::kLeft); }
Tensor operator*(double s, const Tensor& t) { return WithScalar(t, s, Op::kMul, ScalarSide::kLeft); }
Tensor operator/(double s, const Tensor& t) { return WithScalar(t, s, Op::kDiv, ScalarSide::kLeft); }

Tensor Tensor::matmul(const Tensor& o) const { return Binary(*this, o, Op::kMatmul); }
Tensor Tensor::relu() const { return Unary(*this, Op::kRelu); }
Tensor Tensor::sigmoid() const { return Unary(*this, Op::kSigmoid); }
Tensor Tensor::tanh() const { return Unary(*this, Op::kTanh); }
Tensor Tensor::exp() const { return Unary(*this, Op::kExp); }
Tensor Tensor::log() const { return Unary(*this, Op::kLog); }
Tensor Tensor::sqrt() const { return Unary(*this, Op::kSqrt); }
Tensor Tensor::neg() const { return Unary(*this, Op::kNeg); }

Tensor Tensor::sum(std::vector<int64_t> axes, bool keepdims) const { return Reduce(*this, Op::kSum, std::move(axes), keepdims); }
Tensor Tensor::mean(std::vector<int64_t> axes, bool keepdims) const { return Reduce(*this, Op::kMean, std::move(axes), keepdims); }
Tensor Tensor::max(std::vector<int64_t> axes, bool keepdims) const { return Reduce(*this, Op::kMax, std::move(axes), keepdims); }

Tensor Tensor::reshape(Shape shape) const {
  Instruction inst;
  inst.op = Op::kReshape;
  inst.attrs.shape = std::move(shape);
  return Issue(std::move(inst), {*this});
}

namespace {

// {dim0, dim1} of a tensor of `rank` dims as a sorted non-negative pair, or
// nothing when either is out of range or they are the same dim.
std::optional<std::array<int64_t, 2>> SwappedDims(int64_t dim0, int64_t dim1, int64_t rank) {
  if (dim0 < 0) dim0 += rank;
  if (dim1 < 0) dim1 += rank;
  if (dim0 < 0 || dim1 < 0 || dim0 >= rank || dim1 >= rank || dim0 == dim1) return std::nullopt;
  return std::array<int64_t, 2>{std::min(dim0, dim1), std::max(dim0, dim1)};
}

// x.transpose(d0, d1) where x is itself y.transpose(d0, d1) is y: with grad
// off (no graph to record), the record of y is handed back.
Tensor Transposed(const Tensor& x, Instruction inst, std::optional<std::array<int64_t, 2>> dims) {
  TensorRecord* record = TensorFactory::Impl(x) ? TensorFactory::Impl(x)->data.get() : nullptr;
  if (dims && record && record->transposed_dims == *dims && !is_grad_enabled())
    if (std::shared_ptr<TensorRecord> base = record->transpose_of.lock()) return TensorFactory::Make(std::move(base));
  Tensor out = Issue(std::move(inst), {x});
  if (dims && record) {
    TensorRecord& made = *TensorFactory::Impl(out)->data;
    made.transpose_of = TensorFactory::Impl(x)->data;
    if (!is_grad_enabled()) made.keeps_transposed = TensorFactory::Impl(x)->data;
    made.transposed_dims = *dims;
  }
  return out;
}

}  // namespace

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  Instruction inst;
  inst.op = Op::kTranspose;
  inst.attrs.axes = {dim0, dim1};
  return Transposed(*this, std::move(inst), SwappedDims(dim0, dim1, dim()));
}

Tensor Tensor::t() const {
  Instruction inst;
  inst.op = Op::kTranspose;  // the last two dims (none below 2-D)
  return Transposed(*this, std::move(inst), dim() >= 2 ? SwappedDims(-2, -1, dim()) : std::nullopt);
}

Tensor Tensor::permute(std::vector<int64_t> dims) const { return WithAxes(*this, Op::kPermute, std::move(dims)); }
Tensor Tensor::unsqueeze(int64_t dim) const { return WithAxes(*this, Op::kUnsqueeze, {dim}); }
Tensor Tensor::squeeze() const { return WithAxes(*this, Op::kSqueeze, {}); }
Tensor Tensor::squeeze(int64_t dim) const { return WithAxes(*this, Op::kSqueeze, {dim}); }

Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) const {
  if (step <= 0) throw Error(Code::kInvalidArgument, "slice: step must be positive, got " + std::to_string(step));
  int64_t rank = this->dim();
  int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank)
    throw Error(Code::kInvalidArgument, "slice: dim " + std::to_string(dim) + " is out of range for shape " +
                                            ShapeToString(shape()));
  int64_t size = shape()[d];
  auto clamp = [size](int64_t i) { return std::clamp(i < 0 ? i + size : i, int64_t{0}, size); };
  int64_t from = start ? clamp(*start) : 0;
  int64_t to = stop ? clamp(*stop) : size;
  return WithAxes(*this, Op::kSlice, {d, from, std::max(from, to), step});
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  int64_t rank = this->dim();
  int64_t d = dim < 0 ? dim + rank : dim;
  if (d >= 0 && d < rank && index < 0) index += shape()[d];
  return WithAxes(*this, Op::kSelect, {d, index});
}

std::vector<Tensor> Tensor::split(int64_t size, int64_t dim) const {
  if (size <= 0) throw Error(Code::kInvalidArgument, "split: size must be positive, got " + std::to_string(size));
  int64_t rank = this->dim();
  int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) throw Error(Code::kInvalidArgument, "split: dim " + std::to_string(dim) + " out of range");
  std::vector<Tensor> pieces;
  for (int64_t start = 0; start < shape()[d]; start += size) pieces.push_back(slice(d, start, start + size));
  return pieces;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const {
  if (chunks <= 0) throw Error(Code::kInvalidArgument, "chunk: chunks must be positive, got " + std::to_string(chunks));
  int64_t rank = this->dim();
  int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) throw Error(Code::kInvalidArgument, "chunk: dim " + std::to_string(dim) + " out of range");
  int64_t size = (shape()[d] + chunks - 1) / chunks;  // as torch.chunk: equal pieces, the last smaller
  return split(std::max<int64_t>(size, 1), d);
}

Tensor Tensor::pow(double exponent) const {
  // PyTorch's rule: its integer kernel would make 1/x^n into 0 (or 1, -1).
  if (!IsFloatingPoint(dtype()) && exponent < 0 && exponent == std::trunc(exponent))
    throw Error(Code::kInvalidArgument, "pow: integers to negative integer powers are not allowed (" +
                                            std::string(dtype() == DType::kBool ? "a " : "an ") +
                                            std::string(DTypeName(dtype())) + " tensor to the power " +
                                            std::to_string(static_cast<int64_t>(exponent)) + ")");
  return WithScalar(*this, exponent, Op::kPow, ScalarSide::kRight);
}
Tensor Tensor::pow(const Tensor& exponent) const { return Binary(*this, exponent, Op::kPow); }
Tensor Tensor::abs() const { return Unary(*this, Op::kAbs); }
Tensor Tensor::erf() const { return Unary(*this, Op::kErf); }
Tensor Tensor::tril(int64_t diagonal) const { return WithAxes(*this, Op::kTril, {diagonal}); }
Tensor Tensor::triu(int64_t diagonal) const { return WithAxes(*this, Op::kTriu, {diagonal}); }
Tensor Tensor::masked_fill(const Tensor& mask, double value) const {
  // PyTorch keeps the tensor's dtype, casting the value to it (0.5 into an
  // integer tensor is 0), where where() would promote the tensor instead.
  if (IsFloatingPoint(dtype())) return where(mask, value, *this);
  if (dtype() != DType::kBool) return where(mask, std::trunc(value), *this);
  Tensor filled = zeros(shape(), DType::kBool);
  filled.copy_(where(mask, value != 0 ? 1.0 : 0.0, *this));
  return filled;
}

namespace {
Tensor Indexed(Op op, int64_t dim, const std::vector<Tensor>& operands) {
  Instruction inst;
  inst.op = op;
  inst.attrs.axes = {dim};
  return Issue(std::move(inst), operands);
}
}  // namespace

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return Indexed(Op::kIndexSelect, dim, {*this, index}); }
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source) const {
  return Indexed(Op::kIndexAdd, dim, {*this, index, source});
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return Indexed(Op::kGather, dim, {*this, index}); }
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& source) const {
  return Indexed(Op::kScatterAdd, dim, {*this, index, source});
}
Tensor Tensor::clone() const { return Unary(*this, Op::kClone); }
Tensor Tensor::maximum(const Tensor& o) const { return Binary(*this, o, Op::kMaximum); }
Tensor Tensor::minimum(const Tensor& o) const { return Binary(*this, o, Op::kMinimum); }
Tensor maximum(const Tensor& a, const Tensor& b) { return a.maximum(b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return a.minimum(b); }
Tensor Tensor::min(std::vector<int64_t> axes, bool keepdims) const { return Reduce(*this, Op::kMin, std::move(axes), keepdims); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdims) const {
  return Reduce(*this, Op::kArgMax, dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{}, keepdims && dim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdims) const {
  return Reduce(*this, Op::kArgMin, dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{}, keepdims && dim);
}
Tensor Tensor::softmax(int64_t dim) const { return WithAxes(*this, Op::kSoftmax, {dim}); }
Tensor Tensor::log_softmax(int64_t dim) const { return WithAxes(*this, Op::kLogSoftmax, {dim}); }

Tensor Tensor::gt(const Tensor& o) const { return Binary(*this, o, Op::kGt); }
Tensor Tensor::lt(const Tensor& o) const { return Binary(*this, o, Op::kLt); }
Tensor Tensor::ge(const Tensor& o) const { return Binary(*this, o, Op::kGe); }
Tensor Tensor::le(const Tensor& o) const { return Binary(*this, o, Op::kLe); }
Tensor Tensor::eq(const Tensor& o) const { return Binary(*this, o, Op::kEq); }
Tensor Tensor::gt(double s) const { return WithScalar(*this, s, Op::kGt, ScalarSide::kRight); }
Tensor Tensor::lt(double s) const { return WithScalar(*this, s, Op::kLt, ScalarSide::kRight); }
Tensor Tensor::ge(double s) const { return WithScalar(*this, s, Op::kGe, ScalarSide::kRight); }
Tensor Tensor::le(double s) const { return WithScalar(*this, s, Op::kLe, ScalarSide::kRight); }
Tensor Tensor::eq(double s) const { return WithScalar(*this, s, Op::kEq, ScalarSide::kRight); }

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

Tensor randn(Shape shape, DType dtype, uint64_t seed) { return Create(Op::kRandn, std::move(shape), dtype, seed, nullptr); }
Tensor zeros(Shape shape, DType dtype) { return Create(Op::kZeros, std::move(shape), dtype, 0, nullptr); }
Tensor ones(Shape shape, DType dtype) { return Create(Op::kOnes, std::move(shape), dtype, 0, nullptr); }
Tensor rand(Shape shape, DType dtype, uint64_t seed) { return Create(Op::kRand, std::move(shape), dtype, seed, nullptr); }

Tensor arange(double start, double end, double step, DType dtype) {
  Instruction inst;
  inst.op = Op::kArange;
  inst.attrs.dtype = dtype;
  inst.attrs.numbers = {start, end, step};
  return Issue(std::move(inst), {});
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  Instruction inst;
  inst.op = Op::kCat;
  inst.attrs.axes = {dim};
  return Issue(std::move(inst), tensors);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Instruction inst;
  inst.op = Op::kWhere;
  return Issue(std::move(inst), {cond, a, b});
}
Tensor where(const Tensor& cond, double a, const Tensor& b) {
  return Issue(MakeScalarBinary(Op::kWhere, a, ScalarSide::kLeft), {cond, b});
}
Tensor where(const Tensor& cond, const Tensor& a, double b) {
  return Issue(MakeScalarBinary(Op::kWhere, b, ScalarSide::kRight), {cond, a});
}

Tensor from_data(const void* bytes, size_t size, Shape shape, DType dtype) {
  size_t want = static_cast<size_t>(NumElements(shape)) * ElementSize(dtype);
  if (size != want)
    throw Error(Code::kInvalidArgument, "from_data: shape " + ShapeToString(shape) + " of " +
                                            std::string(DTypeName(dtype)) + " needs " + std::to_string(want) +
                                            " bytes, got " + std::to_string(size));
  return Create(Op::kFromBytes, std::move(shape), dtype, 0, CopyToBlob(bytes, size));
}

namespace client_internal {

void SettleTogether(const std::vector<Tensor>& tensors) {
  std::vector<const TensorRecord*> records;
  for (const Tensor& t : tensors)
    if (t.defined()) records.push_back(&Require(t, "settle"));
  if (!records.empty()) records[0]->session->SettleTogether(records);
}

bool SessionPlaces(const Tensor& t) { return Require(t, "session").session->Places(); }

Tensor SumOfSquares(const std::vector<Tensor>& tensors) {
  const TensorRecord& first = Require(tensors.at(0), "sum_of_squares");
  bool one_op = IsFloatingPoint(first.meta.dtype) && !SessionPlaces(tensors[0]);
  for (const Tensor& t : tensors) one_op = one_op && t.dtype() == first.meta.dtype;
  if (one_op) return IssueFused(Op::kSumOfSquares, tensors);
  Tensor total = (tensors[0] * tensors[0]).sum();
  for (size_t i = 1; i < tensors.size(); ++i) total = total + (tensors[i] * tensors[i]).sum();
  return total;
}

Tensor IssueFused(Op op, const std::vector<Tensor>& inputs, std::vector<int64_t> axes, double scalar) {
  Instruction inst;
  inst.op = op;
  inst.attrs.axes = std::move(axes);
  inst.attrs.scalar = scalar;
  return Issue(std::move(inst), inputs);
}

}  // namespace client_internal

// ---- signal scopes -------------------------------------------------------------

void signal_enter(const std::string& name, const SignalOptions& options) {
  if (name.empty()) throw Error(Code::kInvalidArgument, "signal_enter: a signal needs a name");
  const std::optional<SignalConfig> config = Session::Get()->GetConfig(name);
  std::string backward = options.backward;
  const char* source = "the scope's backward option";
  if (backward.empty()) {
    if (config) backward = config->backward;
    source = "its config";
  }
  // `compile: true` in the signal's config makes every scope of it a compile
  // unit, as the scope option does for one scope.
  const bool compile = options.compile || (config && config->compile);
  if (!backward.empty() && !Session::Get()->GetConfig(backward))
    throw Error(Code::kInvalidArgument, "signal '" + name + "': backward: unknown signal '" + backward + "' (from " +
                                            source + "; no config is registered under that name)");
  if (compile) Session::Get()->Marker(Op::kHotStart, name);
  signal_stack.push_back(name);
  signal_compiles.push_back(compile);
  signal_backwards.push_back(std::move(backward));
}

void signal_exit(const std::string& name) {
  if (signal_stack.empty() || signal_stack.back() != name)
    throw Error(Code::kFailedPrecondition, "signal_exit('" + name + "'): the innermost open signal is " +
                                               (signal_stack.empty() ? "none" : "'" + signal_stack.back() + "'"));
  signal_stack.pop_back();
  const bool compile = signal_compiles.back();
  signal_compiles.pop_back();
  signal_backwards.pop_back();
  if (compile) Session::Get()->Marker(Op::kHotEnd, name);
}

std::string current_signal() { return signal_stack.empty() ? std::string() : signal_stack.back(); }
std::string current_backward_signal() { return signal_backwards.empty() ? std::string() : signal_backwards.back(); }

void connect(const std::string& address) { Session::Get()->SetAddress(address); }
void workers(int n) { Session::Get()->SetWorkers(n); }
void sync() { Session::Get()->Sync(); }
void shutdown() { Session::Get()->Close(); }

}  // namespace gt
