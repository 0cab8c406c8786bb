// Compiled units in the torch backend (gt/unit.h): define_unit stores a unit
// by key, run_unit runs it on a client's tensors. A unit is kept once for all
// clients; a key names one template for good, so no client's definition can
// change what another's runs execute.
//
// Units are held within a budget (unit_budget.h): each is charged to a client
// that defined it and forgotten when the last such client's session ends;
// past the budget the least recently run units lose their compiled state
// (plan, folded constants, graphs), rebuilt from the template on their next
// run, and a definition that cannot fit is refused.
//
// Each unit has up to three strategies (unit_graph.h): its plan interpreted
// op by op on the same kernels as eager execution (kernels.h, unit_plan.h),
// its TorchScript graph, and that graph through the legacy fuser. The first
// runs are trials; then the unit keeps the fastest (README.md, "Compiled
// units").
//
// Thread-safety: one thread at a time (the worker's pipeline thread). A fused
// graph's first (compiling) run happens on a thread of its own, on copies of
// the inputs, and touches nothing here.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "collectives.h"
#include "gt/instruction.h"
#include "gt/status.h"
#include "kernels.h"
#include "tensor_table.h"
#include "unit_graph.h"
#include "unit_budget.h"
#include "unit_plan.h"

namespace prometheus {
class Counter;
}

namespace gt::torch_backend {

// What the backend did with compiled units, for stats (all counts since start).
struct UnitStats {
  uint64_t defined = 0;            // distinct units defined (kDefineUnit that was not a repeat)
  uint64_t redefinitions = 0;      // kDefineUnit of a unit already held (a cache hit)
  uint64_t runs = 0;               // kRunUnit executed
  uint64_t instructions = 0;       // body instructions those runs stood for
  double compile_seconds = 0;      // building graphs and their first (compiling) runs
  uint64_t evictions = 0;          // compiled states dropped to stay within the budget
  uint64_t recompiles = 0;         // runs that rebuilt an evicted unit from its template
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

class UnitExecutor {
 public:
  // `collectives` serves collectives in unit bodies and must outlive this.
  // `trial_runs`: timed runs of each strategy before a unit keeps the
  // fastest, 0: always interpret. `plan_units`: interpret each unit's plan
  // (unit_plan.h) rather than its body as sent. `counters`: null entries are
  // not counted.
  // `cache_bytes`: the budget of all units together (0: none).
  UnitExecutor(Collectives& collectives, int64_t trial_runs, bool plan_units, UnitCounters counters,
               uint64_t cache_bytes = 0);
  ~UnitExecutor();
  UnitExecutor(const UnitExecutor&) = delete;
  UnitExecutor& operator=(const UnitExecutor&) = delete;

  // kDefineUnit: stores the template in `inst.payload` under `inst.attrs.seed`
  // and builds its strategies. OK for a repeat of the template held under
  // that key; InvalidArgument for a different one, a template that does not
  // decode or analyze, or a body instruction outside the enums.
  // ResourceExhausted naming the limit when the unit cannot fit the budget,
  // or when its charge would take `inst.client` past `client_room` bytes
  // (the room its max_client_mib leaves; nullopt: no limit).
  Status Define(const Instruction& inst, std::optional<uint64_t> client_room = std::nullopt);
  // `client`'s session ended: the units only it defined are forgotten.
  void DropClient(ClientId client);
  // Bytes of units charged to `client`, counted in its max_client_mib.
  uint64_t ChargedTo(ClientId client) const { return budget_.ChargedTo(client); }
  // Bytes all units hold now (templates and compiled states).
  uint64_t HeldBytes() const { return budget_.held(); }

  // kRunUnit: runs the unit `inst.attrs.seed` on `inst.operands` from
  // `inst.client`'s namespace in `tensors` and stores its outputs there under
  // `inst.results`. The operands the unit consumes are freed whether or not
  // it runs (the hosts have forgotten them). NotFound: no unit under the key,
  // or an unknown operand; InvalidArgument: counts or consumed operands that
  // do not match the unit, a result id in use, a body instruction that
  // failed (named by index), an output dtype gt cannot express. May throw
  // c10::Error from an interpreted kernel.
  Status Run(const Instruction& inst, TensorTable& tensors);

  // The most bytes a run of `inst` (kRunUnit) holds at once beyond its
  // inputs (allocation_bound.h); nullopt for no such unit or a missing
  // input (Run() names the fault) and for a unit with collectives; an error
  // when its body's shapes do not work out on these inputs.
  Result<std::optional<double>> PeakBytes(const Instruction& inst, const TensorTable& tensors) const;

  // What happened to units so far.
  const UnitStats& Stats() const { return stats_; }

 private:
  struct CompiledUnit;
  // Decodes, checks and plans a template, and builds its graphs.
  Result<std::shared_ptr<CompiledUnit>> Compile(const std::string& bytes);
  // What a compiled unit is charged: its template, plan and graphs
  // (estimated) and its folded constants (once made; estimated before).
  uint64_t ChargeOf(const CompiledUnit& unit) const;
  // After a run: charges the constants `unit` (under `key`) made, measured;
  // a unit whose constants alone do not fit keeps none.
  void ChargeConstants(uint64_t key, CompiledUnit& unit);
  // Evicts other units' compiled states until `room` more bytes fit.
  void MakeRoom(uint64_t room, std::optional<uint64_t> keep);
  // Unit `key`'s compiled state, rebuilt from its template if evicted; null
  // when no unit is held under `key`.
  std::shared_ptr<CompiledUnit> Compiled(uint64_t key);

  // Runs `instructions` on `env` (inputs filled in, sized for every
  // placeholder); `fusions` is empty or says, per instruction, which fused
  // kernel computes it. Errors name `run` and the failing instruction's index.
  Status RunBody(const Instruction& run, const std::vector<Instruction>& instructions,
                 const std::vector<Fusion>& fusions, UnitEnv& env);
  // One step the unit planner fused (unit_plan.h), on `env`.
  Status RunFused(const Instruction& step, Fusion fusion, UnitEnv& env);
  // The unit's outputs for `inputs`, by interpretation.
  Result<std::vector<at::Tensor>> Interpret(const Instruction& run, const CompiledUnit& unit,
                                            const std::vector<at::Tensor>& inputs);
  // False until the unit's fused graph finished its first (compiling) run on
  // its own thread, which this starts; then whether that run worked.
  bool FusedWarmedUp(CompiledUnit& unit, const std::vector<at::Tensor>& inputs);
  // The unit's outputs by the strategy it settled on, or by the next trial.
  Result<std::vector<at::Tensor>> RunStrategy(const Instruction& run, CompiledUnit& unit,
                                              const std::vector<at::Tensor>& inputs);

  Collectives& collectives_;
  const int64_t trial_runs_;
  const bool plan_units_;
  std::unordered_map<uint64_t, std::string> templates_;                 // by key: every unit held
  std::unordered_map<uint64_t, std::shared_ptr<CompiledUnit>> units_;  // by key: those not evicted
  UnitStats stats_;
  UnitCounters counters_;
  UnitBudget budget_;
  uint64_t evicted_since_trim_ = 0;  // bytes evicted since the last malloc_trim
};

}  // namespace gt::torch_backend
