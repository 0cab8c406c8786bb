// op_filter: the template for a gt stream modifier. Copy this folder to start
// your own (docs/writing-a-modifier.md explains every piece).
//
// What it does, in either host (dispatcher or worker):
//   - counts every instruction it sees, by op, in its own Prometheus counter
//     gt_op_filter_instructions_total{host, instance, stage, op};
//   - drops every instruction whose op is named by option `drop_op` (default
//     "": drop nothing) and counts those in gt_op_filter_dropped_total.
// Everything else is passed on unchanged, in the order it arrived.
//
// A dropped instruction never reaches the next stage: in a dispatcher the
// router never places it, in a worker the backend never runs it. Results it
// would have made never exist, so the client's next use of them fails (at its
// next sync point) with "unknown tensor".
//
// The file has the four parts every plugin has:
//   1. its options, declared once (name, type, default, unit, doc, range);
//   2. a factory that checks what the host could not (here: that `drop_op`
//      names a real op), registers the metrics and builds the stage;
//   3. the Stage: Process() per instruction;
//   4. the descriptor, exported with GT_PLUGIN().
#include <array>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>

#include "gt/metrics.h"  // gt::StageLabels
#include "gt/plugin.h"   // gt::PluginDescriptor, GT_PLUGIN; includes stage.h, options.h, status.h

// Everything below is compiled with hidden visibility (gt_add_modifier), so
// only the two symbols GT_PLUGIN() exports are visible to the host. An
// anonymous namespace keeps the names out of other plugins' way as well.
namespace {

// ---- 1. Options -------------------------------------------------------------

// Each option's name is written once here and used by both the table and the
// factory. The default, unit, doc and range live only in the table: the host
// fills every declared option in (from the manifest, else this default)
// before the factory runs, having checked its type and range.
constexpr const char* kOptionDropOp = "drop_op";

constexpr gt::OptionSpec kOptions[] = {
    // name, type, default (as written in YAML), unit, one-line doc, min, max (numbers only)
    {kOptionDropOp, gt::OptionType::kString, "", "",
     "op whose instructions are dropped, as named by gt (e.g. neg); empty = drop nothing", 0, 0},
};

// ---- 3. The stage -----------------------------------------------------------

// One instance per manifest stage. The host calls it from its single pipeline
// thread only, so it needs no locks (prometheus counters are thread-safe
// anyway: /metrics is served from another thread).
class OpFilterStage final : public gt::Stage {
 public:
  // `seen` and `dropped` are owned by the host's registry, which outlives
  // every stage.
  OpFilterStage(std::optional<gt::Op> drop, prometheus::Family<prometheus::Counter>& seen,
                prometheus::Labels labels, prometheus::Counter& dropped)
      : drop_(drop), seen_(seen), labels_(std::move(labels)), dropped_(dropped) {}

  // Counts `inst`; emits it unless its op is the one to drop. Emitting
  // nothing is how a stage drops: the host counts it in
  // gt_stage_instructions_dropped_total{stage=...}.
  gt::Status Process(gt::Instruction&& inst, gt::Emitter& out) override {
    CounterFor(inst.op).Increment();
    if (drop_ && inst.op == *drop_) {
      dropped_.Increment();
      return gt::Status::Ok();
    }
    out.Emit(std::move(inst));  // pass it on, unchanged
    return gt::Status::Ok();
  }

  // EndBatch() and Buffered() keep their defaults: this stage holds nothing
  // back between calls.

 private:
  // The counter of one op, looked up in the family once and then kept: a
  // Family::Add() per instruction would take a lock and build a label map
  // every time. An op added to gt after this plugin was built still gets its
  // own series, through the slow path.
  prometheus::Counter& CounterFor(gt::Op op) {
    const size_t index = static_cast<size_t>(op);
    if (index < by_op_.size() && by_op_[index] != nullptr) return *by_op_[index];
    prometheus::Labels labels = labels_;
    labels.emplace("op", std::string(gt::OpName(op)));  // bounded: the closed op set
    prometheus::Counter& counter = seen_.Add(labels);
    if (index < by_op_.size()) by_op_[index] = &counter;
    return counter;
  }

  const std::optional<gt::Op> drop_;
  prometheus::Family<prometheus::Counter>& seen_;
  const prometheus::Labels labels_;  // {host, instance, stage}
  prometheus::Counter& dropped_;
  std::array<prometheus::Counter*, static_cast<size_t>(gt::Op::kCount)> by_op_{};
};

// ---- 2. The factory ---------------------------------------------------------

// Parses `drop_op`. The host has already checked that it is a string; what
// it cannot know is which strings this plugin accepts.
gt::Result<std::optional<gt::Op>> ParseDropOp(const std::string& name) {
  if (name.empty()) return std::optional<gt::Op>();
  std::optional<gt::Op> op = gt::ParseOp(name);
  if (!op) {
    std::string known;
    for (size_t i = 0; i < static_cast<size_t>(gt::Op::kCount); ++i)
      known += (i ? ", " : "") + std::string(gt::OpName(static_cast<gt::Op>(i)));
    return gt::InvalidArgument("option 'drop_op': unknown op '" + name + "' (known: " + known + ")");
  }
  // Some control ops are part of the protocol: dropping them would hang or
  // leak, so refuse the configuration instead of breaking clients later.
  if (*op == gt::Op::kSync)
    return gt::InvalidArgument("option 'drop_op': refusing to drop 'sync': the client waiting at that "
                               "sync point would never be answered");
  if (*op == gt::Op::kDropClient)
    return gt::InvalidArgument("option 'drop_op': refusing to drop 'drop_client': a departed client's "
                               "tensors would never be freed");
  return op;
}

// Called once per manifest stage, on the host's main thread, when the host
// starts. A non-OK result stops the host with the message, prefixed by the
// host with "plugin 'op_filter' (stage '<name>'): ".
gt::Result<std::unique_ptr<gt::Stage>> CreateStage(const gt::StageContext& context) {
  gt::Result<std::optional<gt::Op>> drop = ParseDropOp(context.options->GetString(kOptionDropOp));
  if (!drop.ok()) return drop.status();

  // Metrics go on the host's registry, labelled like every stage metric.
  // Registering a family that exists already (a second op_filter stage)
  // returns the existing one; prometheus-cpp throws only on a clash (same
  // name, other type or help). Exceptions stay inside the plugin.
  const prometheus::Labels labels = gt::StageLabels(context);
  try {
    auto& seen = prometheus::BuildCounter()
                     .Name("gt_op_filter_instructions_total")
                     .Help("Instructions seen by an op_filter stage, by op (dropped ones included).")
                     .Register(*context.registry);
    auto& dropped = prometheus::BuildCounter()
                        .Name("gt_op_filter_dropped_total")
                        .Help("Instructions an op_filter stage dropped (their op was drop_op).")
                        .Register(*context.registry)
                        .Add(labels);
    return std::unique_ptr<gt::Stage>(std::make_unique<OpFilterStage>(*drop, seen, labels, dropped));
  } catch (const std::exception& e) {
    return gt::InvalidArgument(std::string("cannot register metrics: ") + e.what());
  }
}

// ---- 4. The descriptor ------------------------------------------------------

// Read by the host (and by `gt inspect`) after it has checked the ABI
// version, before anything is created. It must have static storage.
const gt::PluginDescriptor kDescriptor = {
    .kind = gt::PluginKind::kModifier,
    .name = "op_filter",  // what manifests write as `plugin:`; the file is gt_op_filter.so
    .version = "0.1.0",
    .description = "Counts instructions by op and drops those of one configurable op",
    .hosts = gt::kAnyHost,  // or gt::HostBit(gt::HostKind::kWorker) to allow workers only
    .options = kOptions,
    .option_count = std::size(kOptions),
    .create_stage = &CreateStage,
    .create_backend = nullptr,  // modifiers have no backend factory
};

}  // namespace

// Exports gt_plugin_abi_version() and gt_plugin_descriptor().
GT_PLUGIN(kDescriptor)
