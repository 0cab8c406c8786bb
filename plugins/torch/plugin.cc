// Registration of the LibTorch backend: its option schema, its descriptor and
// the factory that turns validated options into a TorchBackend. The backend
// itself is torch_backend.h, which lists the files of its parts.
#include <iterator>
#include <memory>
#include <string>

#include <unistd.h>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "gt/metrics.h"
#include "gt/plugin.h"
#include "torch_backend.h"

namespace gt::torch_backend {
namespace {

// Each default is written here and nowhere else.
constexpr OptionSpec kOptions[] = {
    {"intra_op_threads", OptionType::kInt, "0", "threads",
     "LibTorch intra-op thread pool size and OpenBLAS thread count (both process-wide); 0 keeps their defaults", 0, 256},
    {"collective_host", OptionType::kString, "", "",
     "address this worker's Gloo endpoint binds for worker-to-worker collectives; peers must reach it. Empty: the "
     "local address this worker reaches its dispatcher from (127.0.0.1 for a dispatcher on this machine)", 0, 0},
    {"collective_timeout_ms", OptionType::kInt, "60000", "ms",
     "how long a collective waits for the other members of its group", 100, 3600000},
    {"malloc_keep_mib", OptionType::kInt, "256", "MiB",
     "freed host memory glibc keeps for reuse (process-wide); 0 keeps glibc's defaults", 0, 65536},
    {"unit_trial_runs", OptionType::kInt, "3", "runs",
     "timed runs of each unit strategy (interpreted, graph, fused) before the fastest is kept; 0 always interprets",
     0, 100},
    {"plan_units", OptionType::kBool, "true", "",
     "rewrite each unit once when it is defined (constants run once, repeats shared, dead code dropped; unit_plan.h); "
     "false interprets units as sent",
     0, 0},
    {"max_client_mib", OptionType::kInt, "0", "MiB",
     "tensor storage (and compiled units it defined) one client may hold on this worker; an op past it fails with "
     "resource_exhausted and stores nothing. 0: half of this machine's memory",
     0, 1 << 30},
    {"unit_cache_mib", OptionType::kInt, "1024", "MiB",
     "compiled units (templates, plans, folded constants, graphs) all clients together may hold on this worker; past "
     "it the least recently run lose their compiled state, rebuilt on their next run, and a definition that cannot "
     "fit fails with resource_exhausted. 0: no limit",
     0, 1 << 30},
    {"tensor_cache_mib", OptionType::kInt, "256", "MiB",
     "freed tensors all clients together may keep on this worker for later results of their size and dtype (each "
     "client's count in its max_client_mib and go back before it is refused); 0: none kept, and every op is ATen's "
     "own call",
     0, 1 << 30},
};

// max_client_mib in bytes: 0 stands for half the machine's physical memory,
// so that one client cannot take a shared worker down for the others.
uint64_t MaxClientBytes(int64_t mib) {
  if (mib > 0) return static_cast<uint64_t>(mib) << 20;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) / 2;
}

// The resident-bytes quota's series join the host's quotas: no stage label.
prometheus::Counter* MakeQuotaCounter(const StageContext& context, uint64_t limit) {
  if (context.registry == nullptr) return nullptr;
  prometheus::Labels labels = StageLabels(context);
  labels.erase("stage");
  return MakeQuotaMetrics(*context.registry, labels, "resident_bytes", static_cast<double>(limit)).refusals;
}

// Collectives by kind, in the order CollectiveCounters indexes them.
constexpr const char* kCollectiveKinds[] = {"broadcast", "all_reduce", "all_gather", "reduce_scatter"};

CollectiveCounters MakeCounters(const StageContext& context) {
  CollectiveCounters counters;
  if (context.registry == nullptr) return counters;
  auto& calls = prometheus::BuildCounter()
                    .Name("gt_collectives_total")
                    .Help("Collectives this worker took part in, by kind")
                    .Register(*context.registry);
  auto& bytes = prometheus::BuildCounter()
                    .Name("gt_collective_bytes_total")
                    .Help("Tensor bytes this worker contributed to collectives, by kind")
                    .Register(*context.registry);
  for (size_t k = 0; k < std::size(kCollectiveKinds); ++k) {
    prometheus::Labels labels = StageLabels(context);
    labels["collective"] = kCollectiveKinds[k];
    counters.calls[k] = &calls.Add(labels);
    counters.bytes[k] = &bytes.Add(labels);
  }
  return counters;
}

// The compiled-unit metrics (UnitCounters), declared here and nowhere else.
UnitCounters MakeUnitCounters(const StageContext& context) {
  UnitCounters counters;
  if (context.registry == nullptr) return counters;
  prometheus::Registry& r = *context.registry;
  const prometheus::Labels labels = StageLabels(context);
  auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add(labels);
  };
  counters.cache_misses = counter("gt_backend_unit_cache_misses_total",
                                  "Units this backend defined (a define_unit it did not hold yet).");
  counters.cache_hits = counter("gt_backend_unit_cache_hits_total",
                                "define_unit instructions for a unit this backend already held.");
  counters.runs = counter("gt_backend_unit_runs_total", "run_unit instructions this backend executed.");
  counters.compile_seconds = counter("gt_backend_unit_compile_seconds_total",
                                     "Seconds spent building unit graphs and in their first (compiling) runs.");
  auto& chosen = prometheus::BuildCounter()
                     .Name("gt_backend_units_chosen_total")
                     .Help("Units that settled on a strategy, by strategy.")
                     .Register(r);
  auto& instructions = prometheus::BuildCounter()
                           .Name("gt_backend_unit_instructions_total")
                           .Help("Unit body instructions executed, by the strategy that ran them.")
                           .Register(r);
  for (size_t k = 0; k < static_cast<size_t>(UnitStrategy::kCount); ++k) {
    prometheus::Labels by = labels;
    by["strategy"] = StrategyName(static_cast<UnitStrategy>(k));
    counters.chosen[k] = &chosen.Add(by);
    counters.instructions[k] = &instructions.Add(by);
  }
  return counters;
}

// The tensor cache's metrics (tensor_cache.h), declared here and nowhere else.
TensorCacheCounters MakeTensorCacheCounters(const StageContext& context, uint64_t max_bytes) {
  TensorCacheCounters counters;
  if (context.registry == nullptr) return counters;
  prometheus::Registry& r = *context.registry;
  const prometheus::Labels labels = StageLabels(context);
  auto gauge = [&](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add(labels);
  };
  auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add(labels);
  };
  counters.bytes = gauge("gt_backend_tensor_cache_bytes", "Bytes of freed tensors kept for reuse, all clients.");
  gauge("gt_backend_tensor_cache_limit_bytes", "The most bytes of freed tensors kept (tensor_cache_mib).")
      ->Set(static_cast<double>(max_bytes));
  counters.hits = counter("gt_backend_tensor_cache_hits_total", "Results written into a kept freed tensor.");
  counters.misses = counter("gt_backend_tensor_cache_misses_total",
                            "Results of a recyclable op for which no freed tensor of their size was kept.");
  counters.evicted_bytes = counter("gt_backend_tensor_cache_evicted_bytes_total",
                                   "Bytes of kept tensors given back: a size pushed out, a client refused or gone.");
  return counters;
}

// `value`, else `fallback`, else loopback.
std::string OrDefault(const std::string& value, const std::string& fallback) {
  if (!value.empty()) return value;
  return fallback.empty() ? "127.0.0.1" : fallback;
}

Result<std::unique_ptr<Backend>> CreateBackend(const StageContext& context) {
  if (context.options == nullptr) return Internal("torch backend created without options");
  const uint64_t max_client_bytes = MaxClientBytes(context.options->GetInt("max_client_mib"));
  const uint64_t tensor_cache_bytes = static_cast<uint64_t>(context.options->GetInt("tensor_cache_mib")) << 20;
  const TorchBackendOptions options{
      context.options->GetInt("intra_op_threads"),
      CollectiveOptions{OrDefault(context.options->GetString("collective_host"), context.peer_host),
                        OrDefault(context.dispatcher_host, ""),
                        std::chrono::milliseconds(context.options->GetInt("collective_timeout_ms"))},
      context.options->GetInt("malloc_keep_mib"), context.options->GetInt("unit_trial_runs"),
      context.options->GetBool("plan_units"), max_client_bytes, MakeQuotaCounter(context, max_client_bytes),
      static_cast<uint64_t>(context.options->GetInt("unit_cache_mib")) << 20, tensor_cache_bytes,
      MakeTensorCacheCounters(context, tensor_cache_bytes)};
  try {
    return std::unique_ptr<Backend>(std::make_unique<TorchBackend>(options, MakeCounters(context), MakeUnitCounters(context)));
  } catch (const std::exception& e) {  // exceptions never leave the plugin
    return PluginError(std::string("torch backend: ") + e.what());
  }
}

const PluginDescriptor kDescriptor = {
    .kind = PluginKind::kBackend,
    .name = "torch",
    .version = "0.1.0",
    .description = "Executes gt instructions on CPU tensors with LibTorch (ATen)",
    .hosts = HostBit(HostKind::kWorker),
    .options = kOptions,
    .option_count = std::size(kOptions),
    .create_stage = nullptr,
    .create_backend = &CreateBackend,
};

}  // namespace
}  // namespace gt::torch_backend

GT_PLUGIN(gt::torch_backend::kDescriptor)
