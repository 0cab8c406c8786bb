#include "torch_backend.h"

#include "fused_kernels.h"
#include "unit_plan.h"

#include <ATen/Parallel.h>  // at::set_num_threads; not pulled in by ATen.h
#include <dlfcn.h>
#include <malloc.h>
#include <prometheus/counter.h>

#include <algorithm>
#include <chrono>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gt::torch_backend {
namespace {

// ---- dtype mapping: the one place gt and ATen element types meet -----------

struct DTypeMapping {
  DType dtype;
  at::ScalarType scalar_type;
};
constexpr std::array<DTypeMapping, static_cast<size_t>(DType::kCount)> kDTypeMap = {{
    {DType::kFloat32, at::kFloat},
    {DType::kFloat64, at::kDouble},
    {DType::kInt32, at::kInt},
    {DType::kInt64, at::kLong},
    {DType::kBool, at::kBool},
}};
constexpr bool DTypeMapInOrder() {
  for (size_t i = 0; i < kDTypeMap.size(); ++i)
    if (static_cast<size_t>(kDTypeMap[i].dtype) != i) return false;
  return true;
}
static_assert(DTypeMapInOrder(), "kDTypeMap rows must follow enum DType");

bool IsValid(DType dtype) { return static_cast<size_t>(dtype) < kDTypeMap.size(); }

// REQUIRES: IsValid(dtype).
at::ScalarType ToScalarType(DType dtype) { return kDTypeMap[static_cast<size_t>(dtype)].scalar_type; }

std::optional<DType> FromScalarType(at::ScalarType scalar_type) {
  for (const auto& row : kDTypeMap)
    if (row.scalar_type == scalar_type) return row.dtype;
  return std::nullopt;
}

// ---- small helpers ---------------------------------------------------------

Status Invalid(const Instruction& inst, const std::string& why) {
  return InvalidArgument(inst.Describe() + ": " + why);
}

// LibTorch messages run to many lines (context, hints); the first says what
// went wrong, and error replies are one line.
Status LibraryError(const Instruction& inst, std::string_view what) {
  return Invalid(inst, std::string(what.substr(0, what.find('\n'))));
}

std::string IdName(TensorId id) { return "%" + std::to_string(id); }

// The instruction fields Describe() and KindOf() index tables with; a
// malformed value would make them throw, so they are checked before anything
// else looks at `inst`.
Status CheckEnums(const Instruction& inst) {
  const std::string seq = " (seq #" + std::to_string(inst.seq) + ")";
  if (static_cast<size_t>(inst.op) >= static_cast<size_t>(Op::kCount))
    return InvalidArgument("op " + std::to_string(static_cast<int>(inst.op)) + " is not a gt op" + seq);
  if (KindOf(inst.op) == OpKind::kCreate && !IsValid(inst.attrs.dtype))
    return InvalidArgument("dtype " + std::to_string(static_cast<int>(inst.attrs.dtype)) +
                           " is not a gt dtype" + seq);
  if (static_cast<uint8_t>(inst.attrs.scalar_side) > static_cast<uint8_t>(ScalarSide::kLeft))
    return InvalidArgument("scalar_side " + std::to_string(static_cast<int>(inst.attrs.scalar_side)) +
                           " is not a ScalarSide" + seq);
  return Status::Ok();
}

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

Shape ToShape(at::IntArrayRef sizes) { return Shape(sizes.begin(), sizes.end()); }

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

// A scalar as a 0-dim tensor marked "wrapped number": ATen then promotes the
// way PyTorch does for a Python scalar (float32 tensor op 2.5 stays float32),
// and the same tensor-tensor kernel serves `a op s` and `s op a`.
at::Tensor WrappedScalar(double value) {
  at::Tensor tensor = c10::scalar_to_tensor(ScalarOf(value));
  tensor.unsafeGetTensorImpl()->set_wrapped_number(true);
  return tensor;
}

// Bytes of a stored tensor on their way to a client. Holding the tensor
// keeps its storage alive after the tensor is freed from its namespace.
class TensorBlob final : public Blob {
 public:
  // REQUIRES: tensor.is_contiguous().
  explicit TensorBlob(at::Tensor tensor) : tensor_(std::move(tensor)) {}
  const std::byte* data() const override { return static_cast<const std::byte*>(tensor_.data_ptr()); }
  size_t size() const override { return tensor_.nbytes(); }

 private:
  at::Tensor tensor_;
};

// ---- kernels by op ---------------------------------------------------------

Result<at::Tensor> FromBytes(const Instruction& inst, size_t bytes, const at::TensorOptions& options) {
  const BlobPtr& payload = inst.payload;
  if (!payload) return Invalid(inst, "no payload");
  if (payload->size() != bytes)
    return Invalid(inst, "payload has " + std::to_string(payload->size()) + " bytes, shape and dtype need " +
                             std::to_string(bytes));
  // from_blob wants a mutable pointer; nothing writes through it since gt has
  // no in-place ops. The deleter's copy of `payload` keeps the bytes alive.
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

// gt's comparisons yield 1.0 / 0.0 in float64 when the operands promote to
// float64, else in float32. Written straight into a tensor of that dtype: one
// kernel, where a bool mask and a cast were two (and 3x the time on small
// tensors).
at::Tensor Compare(Op op, const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty({0}, a.options().dtype(at::result_type(a, b) == at::kDouble ? at::kDouble : at::kFloat));
  switch (op) {
    case Op::kGt: return at::gt_out(out, a, b);
    case Op::kLt: return at::lt_out(out, a, b);
    case Op::kGe: return at::ge_out(out, a, b);
    case Op::kLe: return at::le_out(out, a, b);
    default: return at::eq_out(out, a, b);
  }
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
  if (n.size() != 3) return Invalid(inst, "arange expects numbers {start, end, step}");
  return at::arange(n[0], n[1], n[2], options);
}

Result<at::Tensor> ApplyBinary(const Instruction& inst, const at::Tensor& a, const at::Tensor& b) {
  switch (inst.op) {
    case Op::kAdd: return at::add(a, b);
    case Op::kSub: return at::sub(a, b);
    case Op::kMul: return at::mul(a, b);
    case Op::kDiv: return at::div(a, b);  // true division, as PyTorch's `/`
    case Op::kPow: return at::pow(a, b);
    case Op::kGt:
    case Op::kLt:
    case Op::kGe:
    case Op::kLe:
    case Op::kEq: return Compare(inst.op, a, b);
    default: break;
  }
  return Internal("not a binary op: " + inst.Describe());
}

Result<at::Tensor> Softmax(const Instruction& inst, const at::Tensor& a) {
  if (inst.attrs.axes.size() != 1) return Invalid(inst, "expects exactly one dim");
  const int64_t dim = inst.attrs.axes[0];
  // Integer inputs are computed in float32, as the client inferred.
  if (!a.is_floating_point()) return Softmax(inst, a.to(at::kFloat));
  return inst.op == Op::kSoftmax ? at::softmax(a, dim) : at::log_softmax(a, dim);
}

Result<at::Tensor> ApplyUnary(const Instruction& inst, const at::Tensor& a) {
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
    case Op::kSoftmax:
    case Op::kLogSoftmax: return Softmax(inst, a);
    default: break;
  }
  return Internal("not a unary op: " + inst.Describe());
}

Result<at::Tensor> Transpose(const Instruction& inst, const at::Tensor& a) {
  const std::vector<int64_t>& axes = inst.attrs.axes;
  if (axes.size() == 2) return at::transpose(a, axes[0], axes[1]);
  if (!axes.empty()) return Invalid(inst, "transpose takes 0 or 2 axes, got " + std::to_string(axes.size()));
  if (a.dim() < 2) return a;
  return at::transpose(a, -2, -1);
}

// LibTorch's intra-op pool does not cover OpenBLAS, which keeps threads of
// its own (one per core by default): without this a worker held to one
// thread still ran every matmul on every core, and two such workers on two
// cores gained nothing from splitting one. Found at run time: a LibTorch on
// another BLAS has no such symbol and is left alone.
void SetBlasThreads(int threads) {
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
}

}  // namespace

// ---- TorchBackend ----------------------------------------------------------

TorchBackend::TorchBackend(const TorchBackendOptions& options, CollectiveCounters counters, UnitCounters units)
    : collectives_(std::make_unique<Collectives>(options.collectives, counters)),
      unit_trial_runs_(options.unit_trial_runs),
      plan_units_(options.plan_units),
      unit_counters_(units) {
  if (options.intra_op_threads > 0) {
    at::set_num_threads(static_cast<int>(options.intra_op_threads));
    SetBlasThreads(static_cast<int>(options.intra_op_threads));
  }
  if (options.malloc_keep_mib > 0) {
    constexpr int kLargestHeapBlock = 32 << 20;  // the most glibc accepts for M_MMAP_THRESHOLD on 64-bit
    const int64_t keep = std::min<int64_t>(options.malloc_keep_mib << 20, std::numeric_limits<int>::max());
    mallopt(M_MMAP_THRESHOLD, kLargestHeapBlock);
    mallopt(M_TRIM_THRESHOLD, static_cast<int>(keep));
  }
}

bool TorchBackend::Supports(Op op) const { return static_cast<size_t>(op) < static_cast<size_t>(Op::kCount); }

BackendStats TorchBackend::Stats() const {
  return {live_tensors_.load(std::memory_order_relaxed), resident_bytes_.load(std::memory_order_relaxed)};
}

Status TorchBackend::Execute(const Instruction& inst, ReplySink& replies) {
  Status valid = CheckEnums(inst);
  if (!valid.ok()) return valid;
  try {
    return Dispatch(inst, replies);
  } catch (const c10::Error& e) {
    return LibraryError(inst, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return LibraryError(inst, e.what());
  } catch (...) {
    return PluginError(inst.Describe() + ": unknown exception");
  }
}

Status TorchBackend::Dispatch(const Instruction& inst, ReplySink& replies) {
  Status results = CheckResults(inst);
  if (!results.ok()) return results;
  if (!ProducesTensor(inst.op)) return ExecuteControl(inst, replies);
  Result<at::Tensor> out = Compute(inst);
  if (!out.ok()) return out.status();
  return Store(inst, std::move(out).value());
}

Result<at::Tensor> TorchBackend::Compute(const Instruction& inst) const {
  switch (KindOf(inst.op)) {
    case OpKind::kCreate: return ExecuteCreate(inst);
    case OpKind::kBinary: return ExecuteBinary(inst);
    case OpKind::kContract: return ExecuteMatmul(inst);
    case OpKind::kUnary: return ExecuteUnary(inst);
    case OpKind::kReduce: return ExecuteReduce(inst);
    case OpKind::kMovement: return ExecuteMovement(inst);
    case OpKind::kCollective: return ExecuteCollective(inst);
    case OpKind::kMutate:
    case OpKind::kControl: break;
  }
  return Internal("no tensor kernel for " + inst.Describe());
}

Result<at::Tensor> TorchBackend::ExecuteCreate(const Instruction& inst) const {
  Result<std::vector<at::Tensor>> operands = Operands(inst, 0);
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
    default: break;
  }
  return Internal("not a creation op: " + inst.Describe());
}

Result<at::Tensor> TorchBackend::ExecuteBinary(const Instruction& inst) const {
  const ScalarSide side = inst.attrs.scalar_side;
  Result<std::vector<at::Tensor>> operands = Operands(inst, side == ScalarSide::kNone ? 2 : 1);
  if (!operands.ok()) return operands.status();
  std::vector<at::Tensor>& args = *operands;
  if (side == ScalarSide::kRight) args.push_back(WrappedScalar(inst.attrs.scalar));
  if (side == ScalarSide::kLeft) args.insert(args.begin(), WrappedScalar(inst.attrs.scalar));
  return ApplyBinary(inst, args[0], args[1]);
}

Result<at::Tensor> TorchBackend::ExecuteMatmul(const Instruction& inst) const {
  Result<std::vector<at::Tensor>> operands = Operands(inst, 2);
  if (!operands.ok()) return operands.status();
  return at::matmul((*operands)[0], (*operands)[1]);
}

Result<at::Tensor> TorchBackend::ExecuteUnary(const Instruction& inst) const {
  Result<std::vector<at::Tensor>> operands = Operands(inst, 1);
  if (!operands.ok()) return operands.status();
  return ApplyUnary(inst, (*operands)[0]);
}

Result<at::Tensor> TorchBackend::ExecuteReduce(const Instruction& inst) const {
  Result<std::vector<at::Tensor>> operands = Operands(inst, 1);
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
    default: break;
  }
  return Internal("not a reduction: " + inst.Describe());
}

Result<at::Tensor> TorchBackend::ExecuteMovement(const Instruction& inst) const {
  if (inst.op == Op::kCat) return ExecuteCat(inst);
  Result<std::vector<at::Tensor>> operands = Operands(inst, 1);
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
    case Op::kSlice:
      if (axes.size() != 4) return Invalid(inst, "expects {dim, start, stop, step}");
      return at::slice(a, axes[0], axes[1], axes[2], axes[3]);
    case Op::kSelect:
      if (axes.size() != 2) return Invalid(inst, "expects {dim, index}");
      return at::select(a, axes[0], axes[1]);
    default: break;
  }
  return Internal("not a movement op: " + inst.Describe());
}

Result<at::Tensor> TorchBackend::ExecuteCat(const Instruction& inst) const {
  if (inst.operands.empty()) return Invalid(inst, "expects at least one operand");
  if (inst.attrs.axes.size() != 1) return Invalid(inst, "expects one dim");
  Result<std::vector<at::Tensor>> operands = Operands(inst, inst.operands.size());
  if (!operands.ok()) return operands.status();
  return at::cat(*operands, inst.attrs.axes[0]);
}

Result<at::Tensor> TorchBackend::ExecuteCollective(const Instruction& inst) const {
  // Only a broadcast's non-root members come without an operand.
  const size_t count = inst.op == Op::kBroadcast ? inst.operands.size() : 1;
  if (count > 1) return Invalid(inst, "expects at most one operand");
  if (!IsValid(inst.attrs.dtype)) return Invalid(inst, "bad dtype");
  Result<std::vector<at::Tensor>> operands = Operands(inst, count);
  // The other members are already waiting for this one.
  if (!operands.ok()) return collectives_->StandIn(inst, ToScalarType(inst.attrs.dtype), operands.status());
  const at::Tensor* operand = operands->empty() ? nullptr : &(*operands)[0];
  return collectives_->Run(inst, operand, ToScalarType(inst.attrs.dtype));
}

Status TorchBackend::ExecuteMutation(const Instruction& inst) {
  const size_t count = inst.op == Op::kCopyInto ? 2 : 1;
  Result<std::vector<at::Tensor>> operands = Operands(inst, count);
  if (!operands.ok()) return operands.status();
  at::Tensor destination = (*operands)[0];
  if (inst.op == Op::kCopyInto) {
    destination.copy_((*operands)[1]);
  } else {
    destination.fill_(inst.attrs.scalar);
  }
  return Status::Ok();
}

Status TorchBackend::ExecuteControl(const Instruction& inst, ReplySink& replies) {
  switch (inst.op) {
    case Op::kCopyInto:
    case Op::kFill: return ExecuteMutation(inst);
    case Op::kFetch: return Fetch(inst, replies);
    case Op::kFree: return Free(inst);
    case Op::kSync: return Status::Ok();
    case Op::kDropClient: DropClient(inst.client); return Status::Ok();
    case Op::kHotStart:
    case Op::kHotEnd: return Status::Ok();  // markers are for stages
    case Op::kDefineUnit: return DefineUnit(inst);
    case Op::kRunUnit: return RunUnit(inst);
    default: break;
  }
  return Internal("not a control op: " + inst.Describe());
}

// ---- compiled units ----------------------------------------------------------

namespace {

constexpr size_t kStrategies = static_cast<size_t>(UnitStrategy::kCount);
using Clock = std::chrono::steady_clock;

void Bump(prometheus::Counter* counter, double by = 1) {
  if (counter != nullptr) counter->Increment(by);
}

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Results of another strategy match the interpreter's within 1e-6 relative.
bool SameResults(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    const at::Tensor& a = got[i];
    const at::Tensor& b = want[i];
    if (a.scalar_type() != b.scalar_type() || !a.sizes().equals(b.sizes())) return false;
    const bool close = a.is_floating_point() ? at::allclose(a, b, 1e-6, 1e-30, /*equal_nan=*/true) : at::equal(a, b);
    if (!close) return false;
  }
  return true;
}

}  // namespace

struct TorchBackend::CompiledUnit {
  std::string bytes;  // the template as defined, to tell a redefinition from a repeat
  UnitTemplate unit;
  UnitInterface interface;
  size_t instructions = 0;  // body instructions (frees included)
  UnitPlan plan;            // what the interpreter runs (unit_plan.h)
  // The plan's constants, made by its prologue on the first interpreted run.
  mutable std::vector<at::Tensor> constants;

  // Strategy choice. Until `decided`, runs are trials: each strategy still
  // `available` runs once untimed, then `trial_runs` times timed, in the
  // order of UnitStrategy; then the fastest is kept (the interpreter on ties).
  bool decided = false;
  UnitStrategy chosen = UnitStrategy::kInterpreted;
  std::array<bool, kStrategies> available = {};
  std::array<int64_t, kStrategies> runs = {};
  std::array<double, kStrategies> best = {};
  std::shared_ptr<UnitGraph> graph;  // kGraph
  std::shared_ptr<UnitGraph> fused;  // kFused
  // The fuser's first run of a shape compiles C++ with the system compiler
  // (about a second): it runs on a thread of its own, on copies of the
  // inputs, while this unit keeps running interpreted; its trials start once
  // it is done. Holds whether that first run worked and how long it took.
  struct Warmup {
    bool ok = false;
    double seconds = 0;
  };
  std::future<Warmup> fused_warmup;

  UnitGraph* GraphFor(UnitStrategy s) const {
    return s == UnitStrategy::kGraph ? graph.get() : s == UnitStrategy::kFused ? fused.get() : nullptr;
  }
};

Status TorchBackend::DefineUnit(const Instruction& inst) {
  if (!inst.payload) return Invalid(inst, "no unit template");
  std::string bytes(reinterpret_cast<const char*>(inst.payload->data()), inst.payload->size());
  if (auto it = units_.find(inst.attrs.seed); it != units_.end()) {
    // Every client's units share this cache: a key names one template for
    // good, so no definition can change what another client's runs execute.
    if (it->second->bytes != bytes)
      return Invalid(inst, "a different template is already defined under this key (a key names one template)");
    ++unit_stats_.redefinitions;
    Bump(unit_counters_.cache_hits);
    return Status::Ok();
  }
  Result<UnitTemplate> unit = DecodeUnit(*inst.payload);
  if (!unit.ok()) return Invalid(inst, unit.status().message());
  for (const Instruction& body : unit->body)
    if (Status s = CheckEnums(body); !s.ok()) return Invalid(inst, s.message());
  Result<UnitInterface> interface = AnalyzeUnit(*unit);
  if (!interface.ok()) return Invalid(inst, interface.status().message());
  auto compiled = std::make_shared<CompiledUnit>();
  compiled->bytes = std::move(bytes);
  compiled->unit = std::move(*unit);
  compiled->interface = std::move(*interface);
  compiled->instructions = compiled->unit.body.size();
  if (plan_units_) {
    compiled->plan = PlanUnit(compiled->unit, compiled->interface);
  } else {
    compiled->plan.body = compiled->unit.body;
  }
  compiled->available[static_cast<size_t>(UnitStrategy::kInterpreted)] = true;
  compiled->decided = unit_trial_runs_ <= 0;
  if (!compiled->decided) {
    const auto start = Clock::now();
    if (auto graph = UnitGraph::Build(compiled->unit, compiled->interface, UnitStrategy::kGraph); graph.ok()) {
      compiled->graph = std::move(graph).value();
      compiled->available[static_cast<size_t>(UnitStrategy::kGraph)] = true;
    }
    if (IsElementwiseArithmetic(compiled->unit)) {
      if (auto fused = UnitGraph::Build(compiled->unit, compiled->interface, UnitStrategy::kFused); fused.ok()) {
        compiled->fused = std::move(fused).value();
        compiled->available[static_cast<size_t>(UnitStrategy::kFused)] = true;
      }
    }
    unit_stats_.compile_seconds += SecondsSince(start);
    Bump(unit_counters_.compile_seconds, SecondsSince(start));
  }
  if (compiled->decided) {
    ++unit_stats_.chosen[static_cast<size_t>(UnitStrategy::kInterpreted)];
    Bump(unit_counters_.chosen[static_cast<size_t>(UnitStrategy::kInterpreted)]);
  }
  ++unit_stats_.defined;
  Bump(unit_counters_.cache_misses);
  units_[inst.attrs.seed] = std::move(compiled);
  return Status::Ok();
}

Status TorchBackend::RunBody(const Instruction& run, const std::vector<Instruction>& instructions,
                             const std::vector<Fusion>& fusions, UnitEnv& env) {
  struct Restore {
    const UnitEnv*& slot;
    ~Restore() { slot = nullptr; }
  } restore{unit_env_};
  unit_env_ = &env;
  for (size_t i = 0; i < instructions.size(); ++i) {
    const Instruction& body = instructions[i];
    Status status;
    if (!fusions.empty() && fusions[i] != Fusion::kNone) {
      status = RunFused(body, fusions[i], env);
    } else if (ProducesTensor(body.op)) {
      Result<at::Tensor> out = Compute(body);
      if (out.ok()) {
        env[body.results[0]] = std::move(out).value();
      } else {
        status = out.status();
      }
    } else if (KindOf(body.op) == OpKind::kMutate) {
      status = ExecuteMutation(body);
    } else {
      for (TensorId id : body.operands) env[id].reset();
    }
    if (!status.ok())
      return Status(status.code(), run.Describe() + ": body instruction " + std::to_string(i) + ": " + status.message());
  }
  return Status::Ok();
}

Status TorchBackend::RunFused(const Instruction& step, Fusion fusion, UnitEnv& env) {
  Result<std::vector<at::Tensor>> operands = Operands(step, 2);
  if (!operands.ok()) return operands.status();
  const at::Tensor& a = (*operands)[0];
  const at::Tensor& b = (*operands)[1];
  // The fused kernels assume what the patterns imply for a float training
  // step; anything else takes the pattern's own ops.
  if (fusion == Fusion::kScaledSubtractInto) {  // p -= s * g
    at::Tensor p = a;
    if (!ScaledSubtractInto(p, b, step.attrs.scalar)) p.copy_(at::sub(p, at::mul(b, WrappedScalar(step.attrs.scalar))));
    return Status::Ok();
  }
  // relu's gradient: g * (x > 0)
  at::Tensor product = ReluGradient(a, b);
  env[step.results[0]] = product.defined() ? product : at::mul(a, Compare(Op::kGt, b, WrappedScalar(0)));
  return Status::Ok();
}

Result<std::vector<at::Tensor>> TorchBackend::Interpret(const Instruction& run, const CompiledUnit& unit,
                                                        const std::vector<at::Tensor>& inputs) {
  UnitEnv env(1 + static_cast<size_t>(unit.interface.inputs) + unit.interface.produced);
  for (size_t j = 0; j < inputs.size(); ++j) env[j + 1] = inputs[j];
  const UnitPlan& plan = unit.plan;
  if (unit.constants.empty() && !plan.prologue.empty()) {
    if (Status made = RunBody(run, plan.prologue, {}, env); !made.ok()) return made;
    for (TensorId id : plan.constants) unit.constants.push_back(env[id]);
  } else {
    for (size_t k = 0; k < unit.constants.size(); ++k) env[plan.constants[k]] = unit.constants[k];
  }
  Status status = RunBody(run, plan.body, plan.fusions, env);
  if (!status.ok()) return status;
  std::vector<at::Tensor> outputs;
  outputs.reserve(unit.interface.outputs.size());
  for (TensorId placeholder : unit.interface.outputs) outputs.push_back(std::move(env.at(placeholder)));
  return outputs;
}

bool TorchBackend::FusedWarmedUp(CompiledUnit& unit, const std::vector<at::Tensor>& inputs) {
  if (!unit.fused_warmup.valid()) {
    std::vector<at::Tensor> copies;
    copies.reserve(inputs.size());
    for (const at::Tensor& t : inputs) copies.push_back(t.clone());
    unit.fused_warmup = std::async(std::launch::async, [graph = unit.fused, copies = std::move(copies)]() mutable {
      CompiledUnit::Warmup w;
      const auto start = Clock::now();
      try {
        (void)graph->Run(std::move(copies));
        w.ok = true;
      } catch (const std::exception&) {
        w.ok = false;
      }
      w.seconds = SecondsSince(start);
      return w;
    });
    return false;
  }
  if (unit.fused_warmup.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
  const CompiledUnit::Warmup w = unit.fused_warmup.get();
  unit_stats_.compile_seconds += w.seconds;
  Bump(unit_counters_.compile_seconds, w.seconds);
  if (!w.ok) unit.available[static_cast<size_t>(UnitStrategy::kFused)] = false;
  return w.ok;
}

Result<std::vector<at::Tensor>> TorchBackend::RunStrategy(const Instruction& run, CompiledUnit& unit,
                                                          const std::vector<at::Tensor>& inputs) {
  const auto count = [&](UnitStrategy s) {
    unit_stats_.instructions_by[static_cast<size_t>(s)] += unit.instructions;
    Bump(unit_counters_.instructions[static_cast<size_t>(s)], static_cast<double>(unit.instructions));
  };
  if (unit.decided) {
    count(unit.chosen);
    if (UnitGraph* graph = unit.GraphFor(unit.chosen)) return graph->Run(inputs);
    return Interpret(run, unit, inputs);
  }
  // A trial: the first strategy still short of its runs.
  size_t s = 0;
  while (s < kStrategies && !(unit.available[s] && unit.runs[s] <= unit_trial_runs_)) ++s;
  if (s == kStrategies) {  // every trial done: keep the fastest
    size_t pick = static_cast<size_t>(UnitStrategy::kInterpreted);
    for (size_t k = 0; k < kStrategies; ++k)
      if (unit.available[k] && unit.best[k] < unit.best[pick]) pick = k;
    unit.decided = true;
    unit.chosen = static_cast<UnitStrategy>(pick);
    if (unit.chosen != UnitStrategy::kGraph) unit.graph.reset();
    if (unit.chosen != UnitStrategy::kFused) unit.fused.reset();
    ++unit_stats_.chosen[pick];
    Bump(unit_counters_.chosen[pick]);
    return RunStrategy(run, unit, inputs);
  }
  const UnitStrategy strategy = static_cast<UnitStrategy>(s);
  if (strategy == UnitStrategy::kFused && unit.runs[s] == 0 && !FusedWarmedUp(unit, inputs)) {
    count(UnitStrategy::kInterpreted);
    return Interpret(run, unit, inputs);
  }
  const bool warmup = unit.runs[s]++ == 0;
  const auto start = Clock::now();
  UnitGraph* graph = unit.GraphFor(strategy);
  if (graph == nullptr) {
    Result<std::vector<at::Tensor>> out = Interpret(run, unit, inputs);
    const double seconds = SecondsSince(start);
    if (!warmup) unit.best[s] = unit.runs[s] == 2 ? seconds : std::min(unit.best[s], seconds);
    count(strategy);
    return out;
  }
  std::vector<at::Tensor> outputs;
  try {
    outputs = graph->Run(inputs);
  } catch (const std::exception&) {
    outputs.clear();
  }
  const double seconds = SecondsSince(start);
  if (warmup) {
    unit_stats_.compile_seconds += seconds;
    Bump(unit_counters_.compile_seconds, seconds);
    // The first run is also checked against the interpreter; a strategy that
    // fails or differs is dropped, and the interpreter's results are used.
    Result<std::vector<at::Tensor>> reference = Interpret(run, unit, inputs);
    if (!reference.ok() || outputs.empty() || !SameResults(outputs, *reference)) {
      unit.available[s] = false;
      count(UnitStrategy::kInterpreted);
      return reference;
    }
  } else {
    if (outputs.empty()) {  // failed after working once (a new shape?): drop it
      unit.available[s] = false;
      count(UnitStrategy::kInterpreted);
      return Interpret(run, unit, inputs);
    }
    unit.best[s] = unit.runs[s] == 2 ? seconds : std::min(unit.best[s], seconds);
  }
  count(strategy);
  return outputs;
}

Status TorchBackend::RunUnit(const Instruction& inst) {
  auto it = units_.find(inst.attrs.seed);
  if (it == units_.end()) return NotFound(inst.Describe() + ": no unit was defined under this key");
  std::shared_ptr<CompiledUnit> unit = it->second;
  const UnitInterface& interface = unit->interface;
  if (inst.operands.size() != interface.inputs)
    return Invalid(inst, "the unit takes " + std::to_string(interface.inputs) + " input(s), got " +
                             std::to_string(inst.operands.size()));
  if (inst.results.size() != interface.outputs.size())
    return Invalid(inst, "the unit makes " + std::to_string(interface.outputs.size()) + " output(s), got " +
                             std::to_string(inst.results.size()) + " result id(s)");
  if (inst.attrs.axes != interface.consumed) return Invalid(inst, "freed operands do not match the unit's");
  for (TensorId r : inst.results)
    if (Find(inst.client, r)) return Invalid(inst, "result " + IdName(r) + " already exists");
  std::vector<at::Tensor> inputs;
  inputs.reserve(inst.operands.size());
  for (TensorId id : inst.operands) {
    const at::Tensor* tensor = Find(inst.client, id);
    if (!tensor) return NotFound("unknown tensor " + IdName(id) + " in " + inst.Describe());
    inputs.push_back(*tensor);
  }
  ++unit_stats_.runs;
  Bump(unit_counters_.runs);
  unit_stats_.instructions += unit->instructions;
  Result<std::vector<at::Tensor>> outputs = RunStrategy(inst, *unit, inputs);
  inputs.clear();
  Status status = outputs.status();
  if (status.ok()) {
    for (const at::Tensor& t : *outputs) {
      if (!FromScalarType(t.scalar_type())) {
        status = Invalid(inst, std::string("result dtype ") + c10::toString(t.scalar_type()) + " is not a gt dtype");
        break;
      }
    }
  }
  // Freed inputs go either way: the hosts have forgotten them already.
  Namespace& tensors = namespaces_[inst.client];
  for (int64_t index : interface.consumed) {
    auto found = tensors.find(inst.operands[static_cast<size_t>(index)]);
    if (found == tensors.end()) continue;
    Release(found->second);
    tensors.erase(found);
  }
  if (!status.ok()) return status;
  for (size_t k = 0; k < interface.outputs.size(); ++k) {
    at::Tensor& t = (*outputs)[k];
    Retain(t);
    tensors.emplace(inst.results[k], std::move(t));
  }
  return Status::Ok();
}

Status TorchBackend::Fetch(const Instruction& inst, ReplySink& replies) const {
  Result<std::vector<at::Tensor>> operands = Operands(inst, 1);
  if (!operands.ok()) return operands.status();
  at::Tensor tensor = (*operands)[0].contiguous();
  std::optional<DType> dtype = FromScalarType(tensor.scalar_type());
  if (!dtype) return Internal("stored tensor has a non-gt dtype: " + inst.Describe());  // Store() refuses those
  const Shape shape = ToShape(tensor.sizes());
  replies.SendData(inst, *dtype, shape, std::make_shared<TensorBlob>(std::move(tensor)));
  return Status::Ok();
}

Status TorchBackend::Free(const Instruction& inst) {
  auto ns = namespaces_.find(inst.client);
  Namespace none;
  Namespace& tensors = ns == namespaces_.end() ? none : ns->second;
  std::string unknown;
  for (TensorId id : inst.operands) {
    auto it = tensors.find(id);
    if (it == tensors.end()) {
      unknown += (unknown.empty() ? "" : ", ") + IdName(id);
      continue;
    }
    Release(it->second);
    tensors.erase(it);
  }
  // The known ids are freed either way; the error only reports the rest.
  if (unknown.empty()) return Status::Ok();
  return NotFound("unknown tensor " + unknown + " in " + inst.Describe());
}

void TorchBackend::DropClient(ClientId client) {
  auto ns = namespaces_.find(client);
  if (ns == namespaces_.end()) return;
  for (const auto& [id, tensor] : ns->second) Release(tensor);
  namespaces_.erase(ns);
}

Result<std::vector<at::Tensor>> TorchBackend::Operands(const Instruction& inst, size_t count) const {
  if (inst.operands.size() != count)
    return Invalid(inst, "expects " + std::to_string(count) + " operand(s), got " +
                             std::to_string(inst.operands.size()));
  std::vector<at::Tensor> tensors;
  tensors.reserve(count);
  for (TensorId id : inst.operands) {
    const at::Tensor* tensor = Find(inst.client, id);
    if (!tensor) return NotFound("unknown tensor " + IdName(id) + " in " + inst.Describe());
    tensors.push_back(*tensor);
  }
  return tensors;
}

const at::Tensor* TorchBackend::Find(ClientId client, TensorId id) const {
  if (unit_env_) {
    if (id >= unit_env_->size() || !(*unit_env_)[id].defined()) return nullptr;
    return &(*unit_env_)[id];
  }
  auto ns = namespaces_.find(client);
  if (ns == namespaces_.end()) return nullptr;
  auto it = ns->second.find(id);
  return it == ns->second.end() ? nullptr : &it->second;
}

Status TorchBackend::CheckResults(const Instruction& inst) const {
  if (inst.op == Op::kRunUnit) return Status::Ok();  // RunUnit() checks its results against the unit
  const size_t want = ProducesTensor(inst.op) ? 1 : 0;
  if (inst.results.size() != want)
    return Invalid(inst, "expects " + std::to_string(want) + " result(s), got " +
                             std::to_string(inst.results.size()));
  if (want == 0) return Status::Ok();
  if (Find(inst.client, inst.results[0]))
    return InvalidArgument("result " + IdName(inst.results[0]) + " already exists in client " +
                           std::to_string(inst.client) + "'s namespace: " + inst.Describe());
  return Status::Ok();
}

Status TorchBackend::Store(const Instruction& inst, at::Tensor tensor) {
  if (!FromScalarType(tensor.scalar_type()))
    return Invalid(inst, std::string("result dtype ") + c10::toString(tensor.scalar_type()) +
                             " is not a gt dtype");
  Retain(tensor);
  namespaces_[inst.client].emplace(inst.results[0], std::move(tensor));
  return Status::Ok();
}

void TorchBackend::Retain(const at::Tensor& tensor) {
  live_tensors_.fetch_add(1, std::memory_order_relaxed);
  const c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  if (storage_refs_[storage]++ == 0)
    resident_bytes_.fetch_add(tensor.storage().nbytes(), std::memory_order_relaxed);
}

void TorchBackend::Release(const at::Tensor& tensor) {
  live_tensors_.fetch_sub(1, std::memory_order_relaxed);
  auto it = storage_refs_.find(tensor.storage().unsafeGetStorageImpl());
  if (it == storage_refs_.end() || --it->second > 0) return;
  resident_bytes_.fetch_sub(tensor.storage().nbytes(), std::memory_order_relaxed);
  storage_refs_.erase(it);
}

}  // namespace gt::torch_backend
