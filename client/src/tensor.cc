// gt::Tensor: builds one instruction per call and hands it to the session
// (tensor_issue.h); creation functions, signal scopes and the session calls.
// The ops are in tensor_ops.cc, in-place ops, autograd state and reading
// data back in tensor_state.cc.
#include "gt/op_attrs.h"
#include "gt/gt.h"
#include "tensor_issue.h"

namespace gt {

using client_internal::Issue;
using client_internal::Require;
using client_internal::Session;
using client_internal::TensorFactory;
using client_internal::TensorRecord;

namespace {

thread_local std::vector<std::string> signal_stack;
thread_local std::vector<bool> signal_compiles;  // parallel to signal_stack
thread_local std::vector<std::string> signal_backwards;  // parallel to signal_stack: resolved backward signals

}  // namespace

namespace client_internal {

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

}  // namespace client_internal

namespace {

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

