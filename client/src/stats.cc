// gt::worker_stats(): the hosts' metrics snapshots (wire.proto, "Stats")
// read into typed per-host figures. Which metric feeds which field is
// written once, in the tables below.
#include <algorithm>
#include <cmath>
#include <string_view>

#include "gt/gt.h"
#include "session.h"

namespace gt {
namespace {

// Counters summed over every series of the metric on a host.
struct CountField {
  std::string_view metric;
  uint64_t HostStats::*field;
};
constexpr CountField kCounts[] = {
    {"gt_compile_instructions_compiled_total", &HostStats::compiled},
    {"gt_compile_instructions_eager_total", &HostStats::eager},
    {"gt_compile_units_run_total", &HostStats::units_run},
    {"gt_compile_cache_hits_total", &HostStats::cache_hits},
    {"gt_compile_cache_misses_total", &HostStats::cache_misses},
    {"gt_hotpath_hot_sequences_total", &HostStats::hot_sequences_found},
    {"gt_backend_unit_cache_hits_total", &HostStats::unit_cache_hits},
    {"gt_backend_unit_cache_misses_total", &HostStats::unit_cache_misses},
    {"gt_backend_unit_runs_total", &HostStats::unit_runs},
};

constexpr std::string_view kReceived = "gt_stage_instructions_received_total";
constexpr std::string_view kCompileSeconds = "gt_backend_unit_compile_seconds_total";
constexpr std::string_view kUnitInstructions = "gt_backend_unit_instructions_total";
constexpr std::string_view kSequenceLength = "gt_hotpath_sequence_length";
constexpr std::string_view kSequenceOccurrences = "gt_hotpath_sequence_occurrences_total";

uint64_t Count(double value) { return value > 0 ? static_cast<uint64_t>(std::llround(value)) : 0; }

std::string Label(const MetricSample& s, const std::string& name) {
  auto it = s.labels.find(name);
  return it == s.labels.end() ? std::string() : it->second;
}

// The hot sequence of `s`'s stage and sequence labels, added when new.
HotSequenceStats& SequenceOf(HostStats& h, const MetricSample& s) {
  const std::string id = Label(s, "sequence"), stage = Label(s, "stage");
  for (HotSequenceStats& q : h.hot_sequences)
    if (q.id == id && q.stage == stage) return q;
  h.hot_sequences.push_back({id, stage, 0, 0});
  return h.hot_sequences.back();
}

void Apply(HostStats& h, const MetricSample& s) {
  for (const CountField& c : kCounts)
    if (s.name == c.metric) h.*c.field += Count(s.value);
  if (s.name == kReceived) {
    const std::string stage = Label(s, "stage");
    if (!h.stages.empty() && stage == h.stages.front()) h.instructions += Count(s.value);
    if (!h.stages.empty() && stage == h.stages.back()) h.terminal_instructions += Count(s.value);
  } else if (s.name == kCompileSeconds) {
    h.compile_seconds += s.value;
  } else if (s.name == kUnitInstructions) {
    h.unit_instructions[Label(s, "strategy")] += Count(s.value);
  } else if (s.name == kSequenceLength) {
    SequenceOf(h, s).length = static_cast<int64_t>(Count(s.value));
  } else if (s.name == kSequenceOccurrences) {
    SequenceOf(h, s).repetitions = static_cast<int64_t>(Count(s.value));
  }
}

HostStats FromSnapshot(const wire::HostSnapshot& snapshot) {
  HostStats h;
  h.instance = snapshot.instance();
  h.host = snapshot.host();
  h.stages.assign(snapshot.stages().begin(), snapshot.stages().end());
  for (const wire::MetricSample& w : snapshot.samples()) {
    MetricSample s{w.name(), {w.labels().begin(), w.labels().end()}, w.value()};
    Apply(h, s);
    h.samples.push_back(std::move(s));
  }
  std::stable_sort(h.hot_sequences.begin(), h.hot_sequences.end(),
                   [](const HotSequenceStats& a, const HotSequenceStats& b) { return a.repetitions > b.repetitions; });
  return h;
}

}  // namespace

WorkerStats worker_stats(int timeout_ms) {
  if (timeout_ms < 1) throw Error(Code::kInvalidArgument, "worker_stats: timeout_ms must be >= 1, got " + std::to_string(timeout_ms));
  wire::Envelope reply = client_internal::Session::Get()->Stats(static_cast<uint32_t>(timeout_ms));
  WorkerStats stats;
  for (const wire::HostSnapshot& snapshot : reply.snapshots()) stats.hosts.push_back(FromSnapshot(snapshot));
  stats.missing.assign(reply.missing().begin(), reply.missing().end());
  return stats;
}

}  // namespace gt
