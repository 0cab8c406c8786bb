// The LibTorch backend: executes gt instructions on CPU tensors with ATen.
//
// It routes each instruction to the part that handles it:
//   tensor_table.h   the clients' tensors (one namespace per client), free,
//                    drop_client, and the counts Stats() reports;
//   tensor_cache.h   freed tensors kept for later results of their size,
//                    which recycled_kernels.h writes with ATen's *_out kernels;
//   kernels.h        every op that makes a tensor, and the in-place
//                    mutations (copy_into, fill), as ATen calls;
//   unit_executor.h  define_unit / run_unit: compiled units kept by key;
//   collectives.h    worker-to-worker collectives (through kernels.h).
// Here: the per-op dispatch, result-id checks, fetch, and turning
// LibTorch's exceptions into error replies.
//
// Errors: Execute() never throws. LibTorch's c10::Error and any other
// std::exception become InvalidArgument naming the instruction (Describe())
// and the first line of the library's message.
//
// Thread-safety: Execute() must be called from one thread at a time (the
// worker's pipeline thread). Stats() may be called from any thread.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "collectives.h"
#include "gt/backend.h"
#include "gt/instruction.h"
#include "gt/status.h"
#include "gt/unit.h"
#include "kernels.h"
#include "recycled_kernels.h"
#include "tensor_cache.h"
#include "tensor_table.h"
#include "unit_executor.h"
#include "unit_graph.h"
#include "unit_plan.h"

namespace gt::torch_backend {

struct TorchBackendOptions {
  // Size of LibTorch's intra-op thread pool; 0 keeps LibTorch's default (one
  // thread per core). The pool is process-wide, so this affects every user of
  // LibTorch in the process. More threads speed up large ops but compete with
  // other workers on the same machine. The default is declared once, in the
  // plugin's option spec (plugin.cc).
  int64_t intra_op_threads;
  // Worker-to-worker collectives (collectives.h).
  CollectiveOptions collectives;
  // Freed host memory (MiB) glibc keeps for reuse instead of handing it back
  // to the OS (M_TRIM_THRESHOLD); > 0 also serves blocks up to 32 MiB from
  // that reusable heap (M_MMAP_THRESHOLD) instead of fresh mmaps. Without it
  // every multi-MiB temporary is a new mapping whose pages fault in on first
  // write, which costs more than the elementwise op that writes them.
  // Process-wide; 0 keeps glibc's defaults. Default: plugin.cc.
  int64_t malloc_keep_mib;
  // Timed runs of each strategy (interpreted, graph, fused; unit_graph.h)
  // before a unit keeps the fastest, after one untimed warm-up run each.
  // More runs choose more reliably and spend longer on slower strategies;
  // 0 always interprets. Default: plugin.cc.
  int64_t unit_trial_runs;
  // The interpreter runs each unit's plan (unit_plan.h) instead of its body
  // as sent. Default: plugin.cc.
  bool plan_units = true;
  // Bytes of tensor storage one client may hold on this worker; an op that
  // would take it past them fails with resource_exhausted and stores
  // nothing. 0: no limit. Default: plugin.cc (half the machine's memory).
  uint64_t max_client_bytes = 0;
  // Counts the refusals (null: not counted).
  prometheus::Counter* client_bytes_refusals = nullptr;
  // Bytes all compiled units together may hold on this worker (unit_budget.h);
  // 0: no limit. Default: plugin.cc.
  uint64_t unit_cache_bytes = 0;
  // Bytes of freed tensors all clients together may have kept for reuse
  // (tensor_cache.h); 0 keeps none. Default: plugin.cc.
  uint64_t tensor_cache_bytes = 0;
  // The cache's metrics (null entries: not counted).
  TensorCacheCounters tensor_cache_counters;
};

class TorchBackend final : public gt::Backend {
 public:
  // Applies `options.intra_op_threads` to LibTorch and OpenBLAS when it is > 0.
  // `counters` count the collectives (null entries: not counted).
  // `units` count what happens to compiled units (null entries: not counted).
  explicit TorchBackend(const TorchBackendOptions& options, CollectiveCounters counters = {},
                        UnitCounters units = {});

  TorchBackend(const TorchBackend&) = delete;
  TorchBackend& operator=(const TorchBackend&) = delete;

  // Executes `inst` in the namespace of `inst.client`. On success a
  // tensor-producing op has stored its one result; on failure nothing was
  // stored and the Status says why:
  //   InvalidArgument: wrong operand/result count, result id already in use,
  //                    bad payload size, bad attribute, or a LibTorch error.
  //   NotFound:        an operand (or a kFree id) is not in the namespace.
  //   PluginError:     something threw that is not a std::exception.
  // kFetch hands `replies` a Blob that owns the (contiguous) tensor.
  Status Execute(const Instruction& inst, ReplySink& replies) override;

  // True for every op of the gt op set.
  bool Supports(Op op) const override;

  // Tensors stored over all namespaces, and the bytes of the distinct
  // storages they use (a view adds no bytes to its source's).
  BackendStats Stats() const override;
  std::vector<HeldTensor> Held() const override { return tensors_.Held(); }

  // What `client` holds here: its tensors' storage, the freed tensors kept
  // for it and the compiled units charged to it (what max_client_mib caps).
  uint64_t ClientBytes(ClientId client) const override;

  // What happened to compiled units so far. Call from the pipeline thread.
  UnitStats Units() const { return units_.Stats(); }

 private:
  // Execute() past the enum check, inside its try block.
  Status Dispatch(const Instruction& inst, ReplySink& replies);
  // OK when `inst` has the result count its op needs and its result id is
  // not in `tensors` (its client's namespace; null: the client has none).
  Status CheckResults(const Instruction& inst, const TensorTable::Namespace* tensors) const;
  // Computes a tensor-producing op and stores its result. Fails on a dtype
  // gt cannot express (nothing is stored then).
  Status ComputeAndStore(const Instruction& inst, TensorSource operands);
  Status Fetch(const Instruction& inst, TensorSource operands, ReplySink& replies) const;
  // kCheckpointWrite / kCheckpointRead (checkpoint_io.h) on the operand's tensor, if any.
  Status Checkpoint(const Instruction& inst, ReplySink& replies);
  // The client's resident-bytes quota: before an op whose size is known
  // from its attributes (creation) or its operands' shapes (broadcasting,
  // contraction, concatenation, a unit's body at its peak), so that a huge
  // request allocates nothing, and after any op (its results are dropped
  // again when they took the client past it). The freed tensors kept for
  // the client go back before it is refused.
  Status CheckAllocationQuota(const Instruction& inst);
  // What `inst` will allocate, where that is known beforehand; an error for
  // an op whose result gt's shape rules cannot work out (refused unrun).
  Result<std::optional<double>> AllocationBytes(const Instruction& inst) const;
  Status CheckResidentQuota(const Instruction& inst);
  Status OverQuota(const Instruction& inst, double bytes) const;
  // The bytes `client` may still be charged; nullopt: no limit.
  std::optional<uint64_t> ClientRoom(ClientId client) const;

  const uint64_t max_client_bytes_;
  prometheus::Counter* const client_bytes_refusals_;
  std::unique_ptr<Collectives> collectives_;
  TensorCache cache_;
  TensorTable tensors_;  // offers what it frees to cache_
  RecycledKernels recycled_;  // writes into cache_'s tensors
  UnitExecutor units_;  // uses *collectives_
};

}  // namespace gt::torch_backend
