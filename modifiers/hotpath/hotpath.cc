#include "hotpath.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "gt/log.h"
#include "gt/metrics.h"
#include "gt/op_attrs.h"

namespace gt::hotpath {
namespace {

// Signatures remembered at most: hot ones stay, others age out of the window.
constexpr size_t kMaxSignatures = 4096;

}  // namespace

std::string SequenceLabel(uint64_t id) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(id));
  return text;
}

Result<HotpathOptions> HotpathOptions::FromValues(const OptionValues& values) {
  HotpathOptions o;
  o.window = values.GetInt(kOptionWindow);
  o.threshold = values.GetInt(kOptionThreshold);
  o.min_length = values.GetInt(kOptionMinLength);
  o.max_length = values.GetInt(kOptionMaxLength);
  if (o.min_length > o.max_length)
    return InvalidArgument("min_length (" + std::to_string(o.min_length) + ") exceeds max_length (" +
                           std::to_string(o.max_length) + ")");
  return o;
}

Result<HotpathMetrics> HotpathMetrics::Build(const StageContext& context) {
  if (context.registry == nullptr) return InvalidArgument("hotpath: stage '" + context.stage + "' has no metrics registry");
  prometheus::Registry& r = *context.registry;
  const prometheus::Labels labels = StageLabels(context);
  auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add(labels);
  };
  try {
    HotpathMetrics m;
    m.candidates = counter("gt_hotpath_candidates_total",
                           "Candidate sequences (at least min_length instructions) a hotpath stage looked up.");
    m.hot_sequences = counter("gt_hotpath_hot_sequences_total", "Distinct sequences a hotpath stage found hot.");
    m.marked = counter("gt_hotpath_marked_sequences_total",
                       "Occurrences of hot sequences a hotpath stage marked with hot_start/hot_end.");
    m.marked_instructions = counter("gt_hotpath_marked_instructions_total",
                                    "Instructions inside the sequences a hotpath stage marked.");
    m.tracked_tensors = &prometheus::BuildGauge()
                             .Name("gt_hotpath_tracked_tensors")
                             .Help("Client tensors whose shape and dtype a hotpath stage tracks.")
                             .Register(r)
                             .Add(labels);
    m.sequence_length = &prometheus::BuildGauge()
                             .Name("gt_hotpath_sequence_length")
                             .Help("Instructions in a hot sequence, by sequence id (at most 32 sequences per stage).")
                             .Register(r);
    m.sequence_occurrences = &prometheus::BuildCounter()
                                  .Name("gt_hotpath_sequence_occurrences_total")
                                  .Help("Occurrences of a hot sequence, by sequence id, those before it became hot included.")
                                  .Register(r);
    m.labels = labels;
    return m;
  } catch (const std::exception& e) {
    return PluginError(std::string("hotpath: cannot register metrics: ") + e.what());
  }
}

Result<std::unique_ptr<Stage>> HotpathStage::Create(const StageContext& context) {
  if (context.options == nullptr) return Internal("hotpath: created without options");
  Result<HotpathOptions> options =
      HotpathOptions::FromValues(*context.options);
  if (!options.ok()) return options.status();
  Result<HotpathMetrics> metrics = HotpathMetrics::Build(context);
  if (!metrics.ok()) return metrics.status();
  return std::unique_ptr<Stage>(std::make_unique<HotpathStage>(*options, *metrics));
}

HotpathStage::HotpathStage(const HotpathOptions& options, const HotpathMetrics& metrics)
    : options_(options), metrics_(metrics) {}

Status HotpathStage::Process(Instruction&& inst, Emitter& out) {
  ++position_;
  Pending& pending = pending_[inst.client];
  if (!sequence::Sequenceable(inst) || !pending.builder.TryAdd(inst, tracker_)) {
    Flush(inst.client, pending, out);
    // A client's compile scope (signature 0) is compiled as a whole; no
    // detected sequence is marked inside it.
    if ((inst.op == Op::kHotStart || inst.op == Op::kHotEnd) && !MarksHotSequence(inst))
      pending.in_scope = inst.op == Op::kHotStart;
    if (inst.op == Op::kDropClient) {
      tracker_.Observe(inst);
      pending_.erase(inst.client);
    } else {
      tracker_.Observe(inst);
    }
    out.Emit(std::move(inst));
    return Status::Ok();
  }
  // Added to the candidate. The tracker learns what the candidate makes when
  // it is flushed: from the metadata a hot sequence recorded, or by observing
  // each instruction.
  pending.instructions.push_back(std::move(inst));
  ++buffered_;
  if (static_cast<int64_t>(pending.builder.size()) >= options_.max_length) Flush(pending.instructions.front().client, pending, out);
  return Status::Ok();
}

Status HotpathStage::EndBatch(Emitter& out) {
  for (auto& [client, pending] : pending_) Flush(client, pending, out);
  metrics_.tracked_tensors->Set(static_cast<double>(tracker_.size()));
  return Status::Ok();
}

void HotpathStage::Learn(ClientId client, const sequence::Sequence& s, const std::vector<Instruction>& instructions,
                         Seen* seen) {
  if (seen != nullptr && seen->outputs_known) {
    for (int64_t index : s.consumed) tracker_.Forget(client, s.inputs[index]);
    for (size_t k = 0; k < s.outputs.size(); ++k) tracker_.Set(client, s.outputs[k], seen->output_metas[k]);
    return;
  }
  for (const Instruction& inst : instructions) tracker_.Observe(inst);
  if (seen == nullptr) return;
  seen->output_metas.clear();
  for (TensorId out : s.outputs) {
    const TensorMeta* meta = tracker_.Find(client, out);
    if (meta == nullptr) return;  // inference failed somewhere: observe this sequence every time
    seen->output_metas.push_back(*meta);
  }
  seen->outputs_known = true;
}

void HotpathStage::Flush(ClientId client, Pending& pending, Emitter& out) {
  if (pending.instructions.empty()) return;
  std::vector<Instruction>& instructions = pending.instructions;
  buffered_ -= instructions.size();
  sequence::Sequence s = pending.builder.Finish();
  Seen* seen = nullptr;
  if (!pending.in_scope && static_cast<int64_t>(s.length) >= options_.min_length) seen = Record(s);
  Learn(client, s, instructions, seen);
  if (seen == nullptr || !seen->hot) {
    for (Instruction& inst : instructions) out.Emit(std::move(inst));
    instructions.clear();
    return;
  }
  const HotMarker marker{s.id, static_cast<int64_t>(s.length)};
  Instruction start = MakeHotMarker(Op::kHotStart, marker);
  start.client = client;
  start.seq = instructions.front().seq;
  start.signal = instructions.front().signal;
  Instruction end = MakeHotMarker(Op::kHotEnd, marker);
  end.client = client;
  end.seq = instructions.back().seq;
  end.signal = start.signal;
  out.Emit(std::move(start));
  for (Instruction& inst : instructions) out.Emit(std::move(inst));
  instructions.clear();
  out.Emit(std::move(end));
  metrics_.marked->Increment();
  metrics_.marked_instructions->Increment(static_cast<double>(s.length));
}

HotpathStage::Seen* HotpathStage::Record(const sequence::Sequence& s) {
  metrics_.candidates->Increment();
  // Age the window first.
  while (!history_.empty() && history_.front().second + static_cast<uint64_t>(options_.window) < position_) {
    auto it = seen_.find(history_.front().first);
    history_.pop_front();
    if (it != seen_.end() && --it->second.in_window == 0 && !it->second.hot) seen_.erase(it);
  }
  // Keyed by id (hashing a step's several KiB of signature twice cost more
  // than the rest of the lookup); the signature kept decides. A sequence
  // whose id collides with another's is never recorded, so ids of hot
  // sequences are unique (a later stage may key units by them).
  auto it = seen_.find(s.id);
  if (it == seen_.end()) {
    if (seen_.size() >= kMaxSignatures) return nullptr;  // full: look again once the window moved on
    it = seen_.emplace(s.id, Seen{}).first;
    it->second.signature = s.signature;
    it->second.stats = {s.id, s.length, 0};
  } else if (it->second.signature != s.signature) {
    return nullptr;
  }
  Seen& seen = it->second;
  ++seen.stats.repetitions;
  if (seen.occurrences != nullptr) seen.occurrences->Increment();
  ++seen.in_window;
  history_.emplace_back(s.id, position_);
  if (!seen.hot && static_cast<int64_t>(seen.in_window) >= options_.threshold) {
    seen.hot = true;
    metrics_.hot_sequences->Increment();
    GT_LOG(kCompile, "hot sequence " << s.id << " found: " << s.length << " ops, seen " << seen.in_window
                                     << " times in the window");
    Report(seen);
  }
  return &seen;
}

void HotpathStage::Report(Seen& seen) {
  if (reported_ >= kMaxReportedSequences) return;
  ++reported_;
  prometheus::Labels labels = metrics_.labels;
  labels["sequence"] = SequenceLabel(seen.stats.signature);
  metrics_.sequence_length->Add(labels).Set(static_cast<double>(seen.stats.length));
  seen.occurrences = &metrics_.sequence_occurrences->Add(labels);
  seen.occurrences->Increment(static_cast<double>(seen.stats.repetitions));  // those before it became hot
}

std::vector<HotSequence> HotpathStage::HotSequences() const {
  std::vector<HotSequence> hot;
  for (const auto& [id, seen] : seen_)
    if (seen.hot) hot.push_back(seen.stats);
  std::sort(hot.begin(), hot.end(), [](const HotSequence& a, const HotSequence& b) { return a.repetitions > b.repetitions; });
  return hot;
}

}  // namespace gt::hotpath
