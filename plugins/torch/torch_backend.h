// The LibTorch backend: executes gt instructions on CPU tensors with ATen.
//
// Tensors live in one namespace per client (Instruction::client), keyed by
// TensorId. gt has no in-place ops, so stored tensors are never written after
// they are made; that is what lets kFromBytes wrap the received payload and
// kFetch send a tensor's own storage, both without a copy, and lets views
// (reshape, transpose) share storage with their source.
//
// Errors: Execute() never throws. LibTorch's c10::Error and any other
// std::exception become InvalidArgument naming the instruction (Describe())
// and the first line of the library's message.
//
// Thread-safety: Execute() must be called from one thread at a time (the
// worker's pipeline thread). Stats() may be called from any thread.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "collectives.h"
#include "gt/backend.h"
#include "gt/instruction.h"
#include "gt/status.h"
#include "gt/unit.h"
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
};

// What the backend did with compiled units, for stats (all counts since start).
struct UnitStats {
  uint64_t defined = 0;            // distinct units defined (kDefineUnit that was not a repeat)
  uint64_t redefinitions = 0;      // kDefineUnit of a unit already held (a cache hit)
  uint64_t runs = 0;               // kRunUnit executed
  uint64_t instructions = 0;       // body instructions those runs stood for
  double compile_seconds = 0;      // building graphs and their first (compiling) runs
  // By UnitStrategy: units that settled on it, and instructions run with it.
  uint64_t chosen[static_cast<size_t>(UnitStrategy::kCount)] = {};
  uint64_t instructions_by[static_cast<size_t>(UnitStrategy::kCount)] = {};
};

// Prometheus handles for compiled units; declared once, in plugin.cc
// (MakeUnitCounters), and listed in README.md and docs/METRICS.md. Null
// entries are not counted. They mirror UnitStats.
struct UnitCounters {
  prometheus::Counter* cache_misses = nullptr;     // gt_backend_unit_cache_misses_total
  prometheus::Counter* cache_hits = nullptr;       // gt_backend_unit_cache_hits_total
  prometheus::Counter* runs = nullptr;             // gt_backend_unit_runs_total
  prometheus::Counter* compile_seconds = nullptr;  // gt_backend_unit_compile_seconds_total
  // By UnitStrategy: gt_backend_units_chosen_total, gt_backend_unit_instructions_total.
  std::array<prometheus::Counter*, static_cast<size_t>(UnitStrategy::kCount)> chosen{};
  std::array<prometheus::Counter*, static_cast<size_t>(UnitStrategy::kCount)> instructions{};
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

  // What happened to compiled units so far. Call from the pipeline thread.
  UnitStats Units() const { return unit_stats_; }

 private:
  using Namespace = std::unordered_map<TensorId, at::Tensor>;

  Status Dispatch(const Instruction& inst, ReplySink& replies);
  Result<at::Tensor> Compute(const Instruction& inst) const;

  // One per OpKind; each returns the op's result tensor.
  Result<at::Tensor> ExecuteCreate(const Instruction& inst) const;
  Result<at::Tensor> ExecuteBinary(const Instruction& inst) const;
  Result<at::Tensor> ExecuteMatmul(const Instruction& inst) const;
  Result<at::Tensor> ExecuteUnary(const Instruction& inst) const;
  Result<at::Tensor> ExecuteReduce(const Instruction& inst) const;
  Result<at::Tensor> ExecuteMovement(const Instruction& inst) const;
  Result<at::Tensor> ExecuteCat(const Instruction& inst) const;
  Result<at::Tensor> ExecuteCollective(const Instruction& inst) const;
  Status ExecuteMutation(const Instruction& inst);
  Status ExecuteControl(const Instruction& inst, ReplySink& replies);

  // Compiled units (gt/unit.h): kept by key over all clients.
  struct CompiledUnit;
  Status DefineUnit(const Instruction& inst);
  Status RunUnit(const Instruction& inst);
  // A unit's tensors by placeholder (index 0 unused; an undefined tensor is
  // absent): placeholders are dense, so no map nodes are allocated per run.
  using UnitEnv = std::vector<at::Tensor>;
  // Runs `unit`'s body on `env` (inputs filled in, sized for every placeholder);
  // `fusions` is empty or says, per instruction, which fused kernel computes it.
  Status RunBody(const Instruction& run, const std::vector<Instruction>& instructions,
                 const std::vector<Fusion>& fusions, UnitEnv& env);
  // One step the unit planner fused (unit_plan.h), on `env`.
  Status RunFused(const Instruction& step, Fusion fusion, UnitEnv& env);
  // The unit's outputs for `inputs`, by interpretation.
  Result<std::vector<at::Tensor>> Interpret(const Instruction& run, const CompiledUnit& unit,
                                            const std::vector<at::Tensor>& inputs);
  // The unit's outputs by the strategy it settled on, or by the next trial.
  // False until the unit's fused graph finished its first (compiling) run on
  // its own thread, which this starts; then whether that run worked.
  bool FusedWarmedUp(CompiledUnit& unit, const std::vector<at::Tensor>& inputs);
  Result<std::vector<at::Tensor>> RunStrategy(const Instruction& run, CompiledUnit& unit,
                                              const std::vector<at::Tensor>& inputs);

  Status Fetch(const Instruction& inst, ReplySink& replies) const;
  Status Free(const Instruction& inst);
  void DropClient(ClientId client);

  // Looks up every operand of `inst`, which must have exactly `count`.
  Result<std::vector<at::Tensor>> Operands(const Instruction& inst, size_t count) const;
  // The tensor `id` of `client`'s namespace, or null.
  const at::Tensor* Find(ClientId client, TensorId id) const;
  // OK when `inst` has the result count its op needs and its result id is
  // free in its namespace.
  Status CheckResults(const Instruction& inst) const;
  // Stores `tensor` as `inst`'s result. Fails on a dtype gt cannot express.
  Status Store(const Instruction& inst, at::Tensor tensor);

  // Stats bookkeeping; called exactly once per tensor entering or leaving a
  // namespace.
  void Retain(const at::Tensor& tensor);
  void Release(const at::Tensor& tensor);

  std::unique_ptr<Collectives> collectives_;
  std::unordered_map<ClientId, Namespace> namespaces_;
  std::unordered_map<uint64_t, std::shared_ptr<CompiledUnit>> units_;
  int64_t unit_trial_runs_ = 0;
  bool plan_units_ = true;
  UnitStats unit_stats_;
  UnitCounters unit_counters_;
  // While a unit's body runs, operands are looked up here instead of in the
  // client's namespace (its keys are the body's placeholders).
  const UnitEnv* unit_env_ = nullptr;
  // How many stored tensors use each storage; its bytes count while > 0.
  std::unordered_map<const c10::StorageImpl*, int64_t> storage_refs_;
  // Atomic only so that Stats() may read them from another thread.
  std::atomic<uint64_t> live_tensors_{0};
  std::atomic<uint64_t> resident_bytes_{0};
};

}  // namespace gt::torch_backend
