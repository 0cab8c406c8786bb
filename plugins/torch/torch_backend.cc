#include "torch_backend.h"

#include "checkpoint_io.h"

#include <ATen/Parallel.h>  // at::set_num_threads; not pulled in by ATen.h
#include <dlfcn.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include <prometheus/counter.h>

#include "allocation_bound.h"
#include "dtype_map.h"
#include "instruction_checks.h"

namespace gt::torch_backend {
namespace {

// LibTorch's intra-op pool does not cover OpenBLAS, which keeps threads of
// its own (one per core by default): without this a worker held to one
// thread still ran every matmul on every core, and two such workers on two
// cores gained nothing from splitting one. Found at run time: a LibTorch on
// another BLAS has no such symbol and is left alone.
void SetBlasThreads(int threads) {
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
}

// Bytes of a stored tensor on their way to a client, sent without a copy.
// Holding the tensor keeps its storage alive after the tensor is freed from
// its namespace. The bytes are read when the transport sends them, not now:
// a mutation (kCopyInto, kMulInto, ...) of the tensor executed before that would show in them.
// The gt client sends none: a fetch is a sync point, and Session::Fetch
// sends nothing more until the data has arrived (a client that did would
// only see its own later write).
class TensorBlob final : public Blob {
 public:
  // REQUIRES: tensor.is_contiguous().
  explicit TensorBlob(at::Tensor tensor) : tensor_(std::move(tensor)) {}
  const std::byte* data() const override { return static_cast<const std::byte*>(tensor_.data_ptr()); }
  size_t size() const override { return tensor_.nbytes(); }

 private:
  at::Tensor tensor_;
};

Shape ToShape(at::IntArrayRef sizes) { return Shape(sizes.begin(), sizes.end()); }

}  // namespace

TorchBackend::TorchBackend(const TorchBackendOptions& options, CollectiveCounters counters, UnitCounters units)
    : max_client_bytes_(options.max_client_bytes),
      client_bytes_refusals_(options.client_bytes_refusals),
      collectives_(std::make_unique<Collectives>(options.collectives, counters)),
      cache_(options.tensor_cache_bytes, options.tensor_cache_counters),
      tensors_(&cache_),
      recycled_(cache_),
      units_(*collectives_, options.unit_trial_runs, options.plan_units, units, options.unit_cache_bytes) {
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

BackendStats TorchBackend::Stats() const { return tensors_.Stats(); }

Status TorchBackend::Execute(const Instruction& inst, ReplySink& replies) {
  Status valid = CheckEnums(inst);
  if (!valid.ok()) return valid;
  if (Status s = CheckAllocationQuota(inst); !s.ok()) return s;
  try {
    Status done = Dispatch(inst, replies);
    return done.ok() ? CheckResidentQuota(inst) : done;
  } catch (const c10::Error& e) {
    return LibraryError(inst, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return LibraryError(inst, e.what());
  } catch (...) {
    return PluginError(inst.Describe() + ": unknown exception");
  }
}

// Tensor-producing ops and mutations go to the kernels by the op table
// (ProducesTensor, OpKind::kMutate); the control ops are listed here.
Status TorchBackend::Dispatch(const Instruction& inst, ReplySink& replies) {
  const TensorTable::Namespace* held = tensors_.Find(inst.client);
  Status results = CheckResults(inst, held);
  if (!results.ok()) return results;
  const TensorSource operands(held);
  if (ProducesTensor(inst.op)) return ComputeAndStore(inst, operands);  // one tensor result each (kernels.h)
  if (KindOf(inst.op) == OpKind::kMutate) return Mutate(inst, operands);  // in place, no result (kernels.h)
  switch (inst.op) {
    // Control.
    case Op::kFetch: return Fetch(inst, operands, replies);
    case Op::kFree: return tensors_.Free(inst);
    case Op::kSync: return Status::Ok();  // ops already run in order
    case Op::kDropClient:
      tensors_.Drop(inst.client);
      cache_.Drop(inst.client);
      units_.DropClient(inst.client);  // the units only it defined
      return Status::Ok();
    case Op::kHotStart:
    case Op::kHotEnd: return Status::Ok();  // markers are for stages
    case Op::kDefineUnit: return units_.Define(inst, ClientRoom(inst.client));
    case Op::kSettle: return Status::Ok();  // nothing is pending without a sharding stage
    case Op::kInspect:
      return InvalidArgument(inst.Describe() + ": inspect is answered by the dispatcher's sharding stage, and this "
                             "cluster's dispatcher manifest has none");
    case Op::kRunUnit: return units_.Run(inst, tensors_);
    case Op::kCheckpointWrite:
    case Op::kCheckpointRead: return Checkpoint(inst, replies);
    default: break;  // kConfigure, kMembership: the dispatcher's stages consume them, none reaches a worker
  }
  return Internal("not a control op: " + inst.Describe());
}

// A checkpoint op's operand, when it has one, is the piece it writes or fills.
Status TorchBackend::Checkpoint(const Instruction& inst, ReplySink& replies) {
  const at::Tensor* piece = nullptr;
  if (!inst.operands.empty()) {
    const TensorTable::Namespace* held = tensors_.Find(inst.client);
    piece = held ? held->Find(inst.operands[0]) : nullptr;
    if (!piece) return NotFound(inst.Describe() + ": no tensor " + IdName(inst.operands[0]));
  }
  if (inst.op == Op::kCheckpointWrite) return CheckpointWrite(inst, piece);
  return CheckpointRead(inst, piece, replies);
}

Status TorchBackend::CheckResults(const Instruction& inst, const TensorTable::Namespace* tensors) const {
  if (inst.op == Op::kRunUnit) return Status::Ok();  // UnitExecutor::Run() checks its results against the unit
  const size_t want = ProducesTensor(inst.op) ? 1 : 0;
  if (inst.results.size() != want)
    return Invalid(inst, "expects " + std::to_string(want) + " result(s), got " +
                             std::to_string(inst.results.size()));
  if (want == 0) return Status::Ok();
  if (tensors != nullptr && tensors->Find(inst.results[0]))
    return InvalidArgument("result " + IdName(inst.results[0]) + " already exists in client " +
                           std::to_string(inst.client) + "'s namespace: " + inst.Describe());
  return Status::Ok();
}

Status TorchBackend::ComputeAndStore(const Instruction& inst, TensorSource operands) {
  at::Tensor recycled = recycled_.TryCompute(inst, operands);
  Result<at::Tensor> out = recycled.defined() ? Result<at::Tensor>(std::move(recycled)) : Compute(inst, operands, *collectives_);
  if (!out.ok()) return out.status();
  at::Tensor& tensor = out.value();
  if (!FromScalarType(tensor.scalar_type()))
    return Invalid(inst, std::string("result dtype ") + c10::toString(tensor.scalar_type()) +
                             " is not a gt dtype");
  tensors_.Insert(tensors_.Open(inst.client), inst.results[0], std::move(tensor));
  return Status::Ok();
}

Result<std::optional<double>> TorchBackend::AllocationBytes(const Instruction& inst) const {
  if (inst.op == Op::kRunUnit) return units_.PeakBytes(inst, tensors_);
  if (KindOf(inst.op) != OpKind::kCreate) return GrowingResultBytes(inst, TensorSource(tensors_.Find(inst.client)));
  double elements = 1;  // in double: a hostile shape must not overflow into a small number
  if (inst.op == Op::kFromBytes) {
    elements = inst.payload ? static_cast<double>(inst.payload->size()) / static_cast<double>(ElementSize(inst.attrs.dtype)) : 0;
  } else if (inst.op == Op::kArange) {
    const std::vector<double>& n = inst.attrs.numbers;
    if (n.size() == 3 && n[2] != 0) elements = std::max(0.0, std::ceil((n[1] - n[0]) / n[2]));
  } else {
    for (int64_t d : inst.attrs.shape) elements *= static_cast<double>(std::max<int64_t>(d, 0));
  }
  return std::optional<double>(elements * static_cast<double>(ElementSize(inst.attrs.dtype)));
}

Status TorchBackend::CheckAllocationQuota(const Instruction& inst) {
  if (max_client_bytes_ == 0) return Status::Ok();
  Result<std::optional<double>> bytes = AllocationBytes(inst);
  if (!bytes.ok()) return Status(bytes.status().code(), inst.Describe() + ": " + bytes.status().message());
  if (!*bytes) return Status::Ok();
  double after = static_cast<double>(ClientBytes(inst.client)) + **bytes;
  if (after > static_cast<double>(max_client_bytes_) && cache_.BytesOf(inst.client) > 0) {
    after -= static_cast<double>(cache_.BytesOf(inst.client));
    cache_.Drop(inst.client);  // what it freed goes back before it is refused
  }
  return after > static_cast<double>(max_client_bytes_) ? OverQuota(inst, after) : Status::Ok();
}

Status TorchBackend::CheckResidentQuota(const Instruction& inst) {
  if (max_client_bytes_ == 0 || inst.results.empty()) return Status::Ok();
  if (ClientBytes(inst.client) <= max_client_bytes_) return Status::Ok();
  cache_.Drop(inst.client);  // what it freed goes back before its results do
  if (ClientBytes(inst.client) <= max_client_bytes_) return Status::Ok();
  const double bytes = static_cast<double>(ClientBytes(inst.client));
  TensorTable::Namespace& tensors = tensors_.Open(inst.client);
  for (TensorId id : inst.results) tensors_.Erase(tensors, id);
  return OverQuota(inst, bytes);
}

uint64_t TorchBackend::ClientBytes(ClientId client) const {
  const TensorTable::Namespace* held = tensors_.Find(client);
  return (held ? held->bytes() : 0) + cache_.BytesOf(client) + units_.ChargedTo(client);
}

std::optional<uint64_t> TorchBackend::ClientRoom(ClientId client) const {
  if (max_client_bytes_ == 0) return std::nullopt;
  const uint64_t used = ClientBytes(client);
  return used >= max_client_bytes_ ? 0 : max_client_bytes_ - used;
}

Status TorchBackend::OverQuota(const Instruction& inst, double bytes) const {
  if (client_bytes_refusals_) client_bytes_refusals_->Increment();
  // To a tenth of a MiB, with the bytes: whole MiB rounded down read "would
  // hold 1 MiB, over its limit of 1 MiB". A raw arange may ask for more
  // bytes than an int64 counts.
  char held[96];
  if (bytes < 9.0e18)
    std::snprintf(held, sizeof held, "%.1f MiB (%lld bytes)", bytes / (1 << 20), static_cast<long long>(bytes));
  else
    std::snprintf(held, sizeof held, "%.3g bytes", bytes);
  return QuotaRefusal(inst, std::string("would hold ") + held + " of tensors on this worker",
                      "over its limit of " + std::to_string(max_client_bytes_ >> 20) +
                          " MiB (torch backend option max_client_mib)",
                      "free some first");
}

Status TorchBackend::Fetch(const Instruction& inst, TensorSource operands, ReplySink& replies) const {
  Result<std::vector<at::Tensor>> fetched = Operands(inst, 1, operands);
  if (!fetched.ok()) return fetched.status();
  at::Tensor tensor = (*fetched)[0].contiguous();
  std::optional<DType> dtype = FromScalarType(tensor.scalar_type());
  if (!dtype) return Internal("stored tensor has a non-gt dtype: " + inst.Describe());  // ComputeAndStore() refuses those
  const Shape shape = ToShape(tensor.sizes());
  replies.SendData(inst, *dtype, shape, std::make_shared<TensorBlob>(std::move(tensor)));
  return Status::Ok();
}

}  // namespace gt::torch_backend
