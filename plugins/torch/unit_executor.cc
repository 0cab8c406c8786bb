#include "unit_executor.h"

#include <malloc.h>
#include <prometheus/counter.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <utility>

#include "allocation_bound.h"
#include "dtype_map.h"
#include "fused_kernels.h"
#include "instruction_checks.h"

namespace gt::torch_backend {
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

struct UnitExecutor::CompiledUnit {
  std::string bytes;  // the template as defined, to tell a redefinition from a repeat
  UnitTemplate unit;
  UnitInterface interface;
  size_t instructions = 0;  // body instructions (frees included)
  UnitPlan plan;            // what the interpreter runs (unit_plan.h)
  // The plan's constants, made by its prologue on the first interpreted run.
  mutable std::vector<at::Tensor> constants;
  // What they hold: the prologue's peak until made, then their storages.
  uint64_t constant_bytes = 0;
  bool constants_measured = false;

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

  // PeakBytes() of the last inputs' shapes and dtypes (a unit mostly runs
  // on one set): the key, and the bound.
  mutable std::optional<std::vector<int64_t>> peak_key;
  mutable Result<std::optional<double>> peak = std::optional<double>();

  UnitGraph* GraphFor(UnitStrategy s) const {
    return s == UnitStrategy::kGraph ? graph.get() : s == UnitStrategy::kFused ? fused.get() : nullptr;
  }
};


UnitExecutor::UnitExecutor(Collectives& collectives, int64_t trial_runs, bool plan_units, UnitCounters counters,
                           uint64_t cache_bytes)
    : collectives_(collectives), trial_runs_(trial_runs), plan_units_(plan_units), counters_(counters),
      budget_(cache_bytes) {}

UnitExecutor::~UnitExecutor() = default;

Status UnitExecutor::Define(const Instruction& inst, std::optional<uint64_t> client_room) {
  if (!inst.payload) return Invalid(inst, "no unit template");
  std::string bytes(reinterpret_cast<const char*>(inst.payload->data()), inst.payload->size());
  if (auto it = templates_.find(inst.attrs.seed); it != templates_.end()) {
    // Every client's units share this cache: a key names one template for
    // good, so no definition can change what another client's runs execute.
    if (it->second != bytes)
      return Invalid(inst, "a different template is already defined under this key (a key names one template)");
    budget_.AddDefiner(inst.attrs.seed, inst.client);  // it stays while this client's session does
    ++stats_.redefinitions;
    Bump(counters_.cache_hits);
    return Status::Ok();
  }
  Result<std::shared_ptr<CompiledUnit>> compiled = Compile(bytes);
  if (!compiled.ok()) return Invalid(inst, compiled.status().message());
  const uint64_t charge = ChargeOf(**compiled);
  if (std::optional<std::string> why = budget_.Refusal(bytes.size(), charge))
    return ResourceExhausted(inst.Describe() + ": " + *why + ": run fewer distinct units or raise the limit");
  if (client_room && bytes.size() + charge > *client_room)
    return QuotaRefusal(inst, "would be charged " + std::to_string(bytes.size() + charge) + " bytes for this unit",
                        "past its limit (torch backend option max_client_mib, which units count toward)",
                        "free some tensors first");
  MakeRoom(bytes.size() + charge, std::nullopt);
  budget_.Add(inst.attrs.seed, inst.client, bytes.size());
  budget_.SetCompiled(inst.attrs.seed, charge);
  if ((*compiled)->decided) {
    ++stats_.chosen[static_cast<size_t>(UnitStrategy::kInterpreted)];
    Bump(counters_.chosen[static_cast<size_t>(UnitStrategy::kInterpreted)]);
  }
  ++stats_.defined;
  Bump(counters_.cache_misses);
  templates_[inst.attrs.seed] = std::move(bytes);
  units_[inst.attrs.seed] = std::move(compiled).value();
  return Status::Ok();
}

Result<std::shared_ptr<UnitExecutor::CompiledUnit>> UnitExecutor::Compile(const std::string& bytes) {
  Result<UnitTemplate> unit = DecodeUnit(*CopyToBlob(bytes.data(), bytes.size()));
  if (!unit.ok()) return unit.status();
  for (const Instruction& body : unit->body)
    if (Status s = CheckEnums(body); !s.ok()) return s;
  Result<UnitInterface> interface = AnalyzeUnit(*unit);
  if (!interface.ok()) return interface.status();
  auto compiled = std::make_shared<CompiledUnit>();
  compiled->bytes = bytes;
  compiled->unit = std::move(*unit);
  compiled->interface = std::move(*interface);
  compiled->instructions = compiled->unit.body.size();
  if (plan_units_) {
    compiled->plan = PlanUnit(compiled->unit, compiled->interface);
  } else {
    compiled->plan.body = compiled->unit.body;
  }
  compiled->available[static_cast<size_t>(UnitStrategy::kInterpreted)] = true;
  compiled->decided = trial_runs_ <= 0;
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
    stats_.compile_seconds += SecondsSince(start);
    Bump(counters_.compile_seconds, SecondsSince(start));
  }
  // Before its first run, its constants are bounded by its prologue's peak
  // (they depend on no input: any inputs of the right count do).
  if (!compiled->plan.prologue.empty()) {
    const UnitTemplate prologue{compiled->unit.inputs, compiled->plan.prologue};
    const std::vector<at::Tensor> none(compiled->unit.inputs, at::empty({0}));
    Result<std::optional<double>> peak = UnitPeakBytes(prologue, none);
    compiled->constant_bytes = peak.ok() && *peak ? static_cast<uint64_t>(**peak) : 0;
  }
  return compiled;
}

uint64_t UnitExecutor::ChargeOf(const CompiledUnit& unit) const {
  // The decoded template and the plan: a few times the template's bytes;
  // a TorchScript graph and its executor: tens of KiB. Estimates, stated
  // as such in docs/SECURITY.md; the constants are measured once made.
  constexpr uint64_t kGraphBytes = 64 << 10;
  uint64_t bytes = 4 * unit.bytes.size() + unit.constant_bytes;
  if (unit.graph) bytes += kGraphBytes;
  if (unit.fused) bytes += kGraphBytes;
  return bytes;
}

void UnitExecutor::MakeRoom(uint64_t room, std::optional<uint64_t> keep) {
  const uint64_t before = budget_.held();
  for (uint64_t key : budget_.Evict(room, keep)) {
    units_.erase(key);
    ++stats_.evictions;
  }
  // glibc keeps what it freed among live blocks (a heap does not shrink
  // from the middle): a flood of evicted units held about 190 KiB each
  // that way. Every kTrimEvery bytes evicted, it goes back to the system.
  constexpr uint64_t kTrimEvery = 32 << 20;
  evicted_since_trim_ += before - budget_.held();
  if (evicted_since_trim_ >= kTrimEvery) {
    evicted_since_trim_ = 0;
    malloc_trim(0);
  }
}

std::shared_ptr<UnitExecutor::CompiledUnit> UnitExecutor::Compiled(uint64_t key) {
  if (auto it = units_.find(key); it != units_.end()) {
    budget_.Touch(key);
    return it->second;
  }
  auto held = templates_.find(key);
  if (held == templates_.end()) return nullptr;
  Result<std::shared_ptr<CompiledUnit>> compiled = Compile(held->second);
  if (!compiled.ok()) return nullptr;  // it compiled when defined: not expected
  ++stats_.recompiles;
  const uint64_t charge = ChargeOf(**compiled);
  MakeRoom(charge, key);
  budget_.SetCompiled(key, charge);
  return units_[key] = std::move(compiled).value();
}

void UnitExecutor::ChargeConstants(uint64_t key, CompiledUnit& unit) {
  if (unit.constants_measured || unit.constants.empty()) return;
  unit.constants_measured = true;
  uint64_t bytes = 0;
  for (const at::Tensor& t : unit.constants) bytes += t.defined() ? t.storage().nbytes() : 0;
  unit.constant_bytes = bytes;
  budget_.SetCompiled(key, ChargeOf(unit));
  MakeRoom(0, key);
  if (budget_.limit() != 0 && budget_.held() > budget_.limit()) {
    // Alone past the budget (its estimate was low): its constants are made
    // again on each run rather than kept.
    unit.constants.clear();
    unit.constants_measured = false;
    unit.constant_bytes = 0;
    budget_.SetCompiled(key, ChargeOf(unit));
  }
}

void UnitExecutor::DropClient(ClientId client) {
  for (uint64_t key : budget_.DropClient(client)) {
    units_.erase(key);
    templates_.erase(key);
  }
}

Status UnitExecutor::RunBody(const Instruction& run, const std::vector<Instruction>& instructions,
                             const std::vector<Fusion>& fusions, UnitEnv& env) {
  const TensorSource operands(env);  // body operands are placeholders
  for (size_t i = 0; i < instructions.size(); ++i) {
    const Instruction& body = instructions[i];
    Status status;
    if (!fusions.empty() && fusions[i] != Fusion::kNone) {
      status = RunFused(body, fusions[i], env);
    } else if (ProducesTensor(body.op)) {
      Result<at::Tensor> out = Compute(body, operands, collectives_);
      if (out.ok()) {
        env[body.results[0]] = std::move(out).value();
      } else {
        status = out.status();
      }
    } else if (KindOf(body.op) == OpKind::kMutate) {
      status = Mutate(body, operands);
    } else {
      for (TensorId id : body.operands) env[id].reset();
    }
    if (!status.ok())
      return Status(status.code(), run.Describe() + ": body instruction " + std::to_string(i) + ": " + status.message());
  }
  return Status::Ok();
}

Status UnitExecutor::RunFused(const Instruction& step, Fusion fusion, UnitEnv& env) {
  Result<std::vector<at::Tensor>> operands = Operands(step, 2, TensorSource(env));
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

Result<std::vector<at::Tensor>> UnitExecutor::Interpret(const Instruction& run, const CompiledUnit& unit,
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

bool UnitExecutor::FusedWarmedUp(CompiledUnit& unit, const std::vector<at::Tensor>& inputs) {
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
  stats_.compile_seconds += w.seconds;
  Bump(counters_.compile_seconds, w.seconds);
  if (!w.ok) unit.available[static_cast<size_t>(UnitStrategy::kFused)] = false;
  return w.ok;
}

Result<std::vector<at::Tensor>> UnitExecutor::RunStrategy(const Instruction& run, CompiledUnit& unit,
                                                          const std::vector<at::Tensor>& inputs) {
  const auto count = [&](UnitStrategy s) {
    stats_.instructions_by[static_cast<size_t>(s)] += unit.instructions;
    Bump(counters_.instructions[static_cast<size_t>(s)], static_cast<double>(unit.instructions));
  };
  if (unit.decided) {
    count(unit.chosen);
    if (UnitGraph* graph = unit.GraphFor(unit.chosen)) return graph->Run(inputs);
    return Interpret(run, unit, inputs);
  }
  // A trial: the first strategy still short of its runs.
  size_t s = 0;
  while (s < kStrategies && !(unit.available[s] && unit.runs[s] <= trial_runs_)) ++s;
  if (s == kStrategies) {  // every trial done: keep the fastest
    size_t pick = static_cast<size_t>(UnitStrategy::kInterpreted);
    for (size_t k = 0; k < kStrategies; ++k)
      if (unit.available[k] && unit.best[k] < unit.best[pick]) pick = k;
    unit.decided = true;
    unit.chosen = static_cast<UnitStrategy>(pick);
    if (unit.chosen != UnitStrategy::kGraph) unit.graph.reset();
    if (unit.chosen != UnitStrategy::kFused) unit.fused.reset();
    ++stats_.chosen[pick];
    Bump(counters_.chosen[pick]);
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
    stats_.compile_seconds += seconds;
    Bump(counters_.compile_seconds, seconds);
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

Result<std::optional<double>> UnitExecutor::PeakBytes(const Instruction& inst, const TensorTable& table) const {
  auto it = units_.find(inst.attrs.seed);
  if (it == units_.end()) {
    auto held = templates_.find(inst.attrs.seed);
    if (held == templates_.end()) return std::optional<double>();
    // Evicted: bounded from its template, as Run() will rebuild it.
    Result<UnitTemplate> unit = DecodeUnit(*CopyToBlob(held->second.data(), held->second.size()));
    Result<std::vector<at::Tensor>> inputs = Operands(inst, inst.operands.size(), TensorSource(table.Find(inst.client)));
    if (!unit.ok() || !inputs.ok()) return std::optional<double>();
    return UnitPeakBytes(*unit, *inputs);
  }
  const CompiledUnit& unit = *it->second;
  Result<std::vector<at::Tensor>> inputs = Operands(inst, inst.operands.size(), TensorSource(table.Find(inst.client)));
  if (!inputs.ok()) return std::optional<double>();
  std::vector<int64_t> key;
  for (const at::Tensor& t : *inputs) {
    key.push_back(static_cast<int64_t>(t.scalar_type()));
    key.push_back(t.dim());
    key.insert(key.end(), t.sizes().begin(), t.sizes().end());
  }
  if (!unit.peak_key || key != *unit.peak_key) {
    unit.peak = UnitPeakBytes(unit.unit, *inputs);
    unit.peak_key = std::move(key);
  }
  return unit.peak;
}

Status UnitExecutor::Run(const Instruction& inst, TensorTable& table) {
  std::shared_ptr<CompiledUnit> unit = Compiled(inst.attrs.seed);
  if (!unit) return NotFound(inst.Describe() + ": no unit was defined under this key");
  const UnitInterface& interface = unit->interface;
  if (inst.operands.size() != interface.inputs)
    return Invalid(inst, "the unit takes " + std::to_string(interface.inputs) + " input(s), got " +
                             std::to_string(inst.operands.size()));
  if (inst.results.size() != interface.outputs.size())
    return Invalid(inst, "the unit makes " + std::to_string(interface.outputs.size()) + " output(s), got " +
                             std::to_string(inst.results.size()) + " result id(s)");
  if (inst.attrs.axes != interface.consumed) return Invalid(inst, "freed operands do not match the unit's");
  const TensorSource held(table.Find(inst.client));
  for (TensorId r : inst.results)
    if (held.Find(r)) return Invalid(inst, "result " + IdName(r) + " already exists");
  Result<std::vector<at::Tensor>> inputs = Operands(inst, inst.operands.size(), held);
  if (!inputs.ok()) return inputs.status();
  ++stats_.runs;
  Bump(counters_.runs);
  stats_.instructions += unit->instructions;
  Result<std::vector<at::Tensor>> outputs = RunStrategy(inst, *unit, *inputs);
  inputs->clear();
  ChargeConstants(inst.attrs.seed, *unit);
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
  TensorTable::Namespace& tensors = table.Open(inst.client);
  for (int64_t index : interface.consumed) table.Erase(tensors, inst.operands[static_cast<size_t>(index)]);
  if (!status.ok()) return status;
  for (size_t k = 0; k < interface.outputs.size(); ++k) table.Insert(tensors, inst.results[k], std::move((*outputs)[k]));
  return Status::Ok();
}

}  // namespace gt::torch_backend
