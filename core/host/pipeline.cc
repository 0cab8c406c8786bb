#include "host/pipeline.h"

#include <chrono>
#include <exception>
#include <string>
#include <string_view>

#include "net/peer_address.h"

namespace gt {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// Collects what a stage emits during one call.
class Collector final : public Emitter {
 public:
  void Emit(Instruction&& inst) override { out.push_back(std::move(inst)); }
  void Tag(PieceTag&& tag) override { tags.push_back(std::move(tag)); }
  std::vector<Instruction> out;
  std::vector<PieceTag> tags;  // handed to the terminal at the batch's end (ForwardTags)
};

// A stage is plugin code: whatever it throws from `call` becomes a plugin
// error naming the stage (and `when`, e.g. " at end of batch"), never the
// host's end. The one place a stage call is guarded.
template <typename Call>
Status CallStage(const std::string& stage, std::string_view when, Call&& call) {
  try {
    return call();
  } catch (const std::exception& e) {
    return PluginError("stage '" + stage + "' threw" + std::string(when) + ": " + e.what());
  } catch (...) {
    return PluginError("stage '" + stage + "' threw a non-standard exception" + std::string(when));
  }
}

}  // namespace

void Pipeline::Tally::FlushTo(StageMetrics& m) {
  if (received) m.received->Increment(static_cast<double>(received));
  if (emitted) m.emitted->Increment(static_cast<double>(emitted));
  if (dropped) m.dropped->Increment(static_cast<double>(dropped));
  if (injected) m.injected->Increment(static_cast<double>(injected));
  seconds.FlushTo(*m.seconds);
  received = emitted = dropped = injected = 0;
}

struct Pipeline::Slot {
  std::string name;
  PluginInstance<Stage> stage;
  StageMetrics metrics;
  Tally tally;
  Collector collector;
};

Pipeline::~Pipeline() = default;

StageContext PluginContext(const HostManifest& manifest, const ManifestStage& spec, prometheus::Registry& registry) {
  StageContext context{manifest.host, manifest.id, spec.name, &spec.options, &registry};
  if (manifest.host == HostKind::kDispatcher) {
    context.peer_host = TcpEndpointHost(manifest.listen);
  } else if (manifest.host == HostKind::kWorker) {
    context.dispatcher_host = TcpEndpointHost(manifest.connect);
    context.peer_host = LocalAddressTowards(context.dispatcher_host);
  }
  return context;
}

Result<std::unique_ptr<Pipeline>> Pipeline::Build(const HostManifest& manifest, HostMetrics& metrics,
                                                  prometheus::Registry& registry) {
  std::unique_ptr<Pipeline> p(new Pipeline());
  p->metrics_ = &metrics;
  for (const ManifestStage& spec : manifest.stages) {
    StageContext context = PluginContext(manifest, spec, registry);
    Result<PluginInstance<Stage>> stage = CreateStage(spec.plugin, context);
    if (!stage.ok()) return stage.status();
    auto slot = std::make_unique<Slot>();
    slot->name = spec.name;
    slot->stage = std::move(*stage);
    slot->metrics = metrics.ForStage(spec.name);
    if (HostEventSink* sink = slot->stage->host_event_sink()) p->events_.Add(sink);
    p->stages_.push_back(std::move(slot));
  }
  return p;
}

void Pipeline::SetTerminal(Terminal* terminal, const std::string& name) {
  terminal_ = terminal;
  terminal_metrics_ = metrics_->ForStage(name);
}

void Pipeline::Push(Instruction&& inst) { (void)RunFrom(0, std::move(inst), Clock::now()); }

Pipeline::Clock::time_point Pipeline::Push(Instruction&& inst, Clock::time_point start) {
  return RunFrom(0, std::move(inst), start);
}

void Pipeline::Fail(StageMetrics& m, const OpRef& ref, const Status& status) {
  m.errors[static_cast<size_t>(status.code())]->Increment();
  if (errors_) errors_(ref, status);
}

Status Pipeline::ProcessIn(Slot& slot, Instruction&& inst) {
  return CallStage(slot.name, "", [&] { return slot.stage->Process(std::move(inst), slot.collector); });
}

// One clock reading per stage visit: the reading that ends a stage's
// Process() starts the next visit's (what lies between is this function's
// bookkeeping). Two readings per visit cost a hot sequence's 96 instructions
// more than some stages' own work.
Pipeline::Clock::time_point Pipeline::RunFrom(size_t index, Instruction&& inst, Clock::time_point start) {
  if (index == stages_.size()) return Deliver(std::move(inst), start);
  if (inst.op == Op::kMembership) return RunControl(index, std::move(inst));
  Slot& slot = *stages_[index];
  OpRef ref{inst.client, inst.seq, inst.op};
  slot.collector.out.clear();
  ++slot.tally.received;
  Status status = ProcessIn(slot, std::move(inst));
  Clock::time_point end = Clock::now();
  slot.tally.seconds.Observe(Seconds(start, end));
  if (!status.ok()) {
    Fail(slot.metrics, ref, status);
    end = Clock::now();  // the error sink's work is no stage's
  }
  size_t n = slot.collector.out.size();
  if (n == 0 && status.ok()) ++slot.tally.dropped;
  if (n > 1) slot.tally.injected += n - 1;
  slot.tally.emitted += n;
  // Deeper stages never touch this slot's collector, so iterating it is safe.
  for (size_t i = 0; i < slot.collector.out.size(); ++i) end = RunFrom(index + 1, std::move(slot.collector.out[i]), end);
  slot.collector.out.clear();
  return end;
}

// The host's own announcements (kMembership) reach every stage but are not
// part of any client's stream: they count in no stage metric. What a stage
// emits besides passing the announcement on (e.g. instructions it held until
// workers were known) counts as injected.
Pipeline::Clock::time_point Pipeline::RunControl(size_t index, Instruction&& inst) {
  Slot& slot = *stages_[index];
  slot.collector.out.clear();
  Status status = ProcessIn(slot, std::move(inst));
  if (!status.ok()) Fail(slot.metrics, OpRef{0, 0, Op::kMembership}, status);
  size_t injected = 0;
  for (const Instruction& out : slot.collector.out) injected += out.op == Op::kMembership ? 0 : 1;
  slot.tally.injected += injected;
  slot.tally.emitted += injected;
  std::vector<Instruction> out;
  out.swap(slot.collector.out);
  // Announcements are not timed: the next visit starts after this one.
  Clock::time_point end = Clock::now();
  for (Instruction& i : out) end = RunFrom(index + 1, std::move(i), end);
  return end;
}

Pipeline::Clock::time_point Pipeline::Deliver(Instruction&& inst, Clock::time_point start) {
  if (inst.op == Op::kMembership) {
    (void)terminal_->Accept(std::move(inst));
    return Clock::now();
  }
  OpRef ref{inst.client, inst.seq, inst.op};
  ++terminal_tally_.received;
  // A client reads metrics after its sync points; they must include its work.
  if (inst.op == Op::kSync || inst.op == Op::kFetch) {
    FlushTallies();
    start = Clock::now();
  }
  Status status = terminal_->Accept(std::move(inst));
  Clock::time_point end = Clock::now();
  terminal_tally_.seconds.Observe(Seconds(start, end));
  if (status.ok()) {
    ++terminal_tally_.emitted;
  } else {
    Fail(terminal_metrics_, ref, status);
  }
  return end;
}

// A stage's Buffered() is plugin code too: one that throws counts as a
// plugin error and reports an empty queue.
size_t Pipeline::BufferedOf(Slot& slot) {
  try {
    return slot.stage->Buffered();
  } catch (...) {
    Fail(slot.metrics, OpRef{0, 0, Op::kSync}, PluginError("stage '" + slot.name + "' threw in Buffered()"));
    return 0;
  }
}

void Pipeline::EndBatch() {
  for (size_t i = 0; i < stages_.size(); ++i) {
    Slot& slot = *stages_[i];
    slot.collector.out.clear();
    Status status = CallStage(slot.name, " at end of batch", [&] { return slot.stage->EndBatch(slot.collector); });
    if (!status.ok()) Fail(slot.metrics, OpRef{0, 0, Op::kSync}, status);
    size_t n = slot.collector.out.size();
    slot.tally.injected += n;
    slot.tally.emitted += n;
    Clock::time_point start = Clock::now();
    for (size_t k = 0; k < slot.collector.out.size(); ++k) start = RunFrom(i + 1, std::move(slot.collector.out[k]), start);
    slot.collector.out.clear();
    ForwardTags(slot);
    slot.metrics.queue_depth->Set(static_cast<double>(BufferedOf(slot)));
  }
  terminal_->EndBatch();
  FlushTallies();
}

void Pipeline::ForwardTags(Slot& slot) {
  for (PieceTag& tag : slot.collector.tags)
    if (tag.placement.size() <= kMaxPieceTagBytes) terminal_->Tag(std::move(tag));
  slot.collector.tags.clear();
}

Status Pipeline::Restore(const RestoredSession& session) {
  for (size_t i = 0; i < stages_.size(); ++i) {
    Slot& slot = *stages_[i];
    slot.collector.out.clear();
    Status status = CallStage(slot.name, " restoring a session", [&] { return slot.stage->Restore(session, slot.collector); });
    if (!status.ok()) {
      slot.collector.out.clear();
      slot.collector.tags.clear();
      return Status(status.code(), "stage '" + slot.name + "': " + status.message());
    }
    Clock::time_point start = Clock::now();
    for (size_t k = 0; k < slot.collector.out.size(); ++k) start = RunFrom(i + 1, std::move(slot.collector.out[k]), start);
    slot.collector.out.clear();
    ForwardTags(slot);
  }
  return Status::Ok();
}

void Pipeline::FlushTallies() {
  for (auto& slot : stages_) slot->tally.FlushTo(slot->metrics);
  terminal_tally_.FlushTo(terminal_metrics_);
}

}  // namespace gt

