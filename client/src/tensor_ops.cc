// gt::Tensor's ops by family: arithmetic and comparisons, elementwise
// functions, reductions, movement and indexing. Each builds one instruction
// (tensor_issue.h) and hands it to the session.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "gt/op_attrs.h"
#include "tensor_issue.h"

namespace gt {

using client_internal::Binary;
using client_internal::Issue;
using client_internal::Reduce;
using client_internal::TensorFactory;
using client_internal::TensorRecord;
using client_internal::Unary;
using client_internal::WithAxes;
using client_internal::WithScalar;

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
Tensor Tensor::var(std::vector<int64_t> axes, int64_t correction, bool keepdims) const {
  Instruction inst;
  inst.op = Op::kVar;
  inst.attrs.axes = std::move(axes);
  inst.attrs.keepdims = keepdims;
  inst.attrs.scalar = static_cast<double>(correction);
  return Issue(std::move(inst), {*this});
}
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

}  // namespace gt
