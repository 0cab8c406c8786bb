#include "host/fair_share_wire.h"

#include <cmath>
#include <cstdlib>

namespace gt {
namespace {

constexpr const char* kSharesInstance = "shares";
constexpr const char* kLoadInstance = "load";
constexpr const char* kShareSample = "gt_client_share";

// The snapshot of `env` named `instance`, made when `create`.
wire::HostSnapshot* Snapshot(wire::Envelope& env, const char* host, const char* instance) {
  for (wire::HostSnapshot& s : *env.mutable_snapshots())
    if (s.instance() == instance) return &s;
  wire::HostSnapshot* s = env.add_snapshots();
  s->set_host(host);
  s->set_instance(instance);
  return s;
}

std::optional<double> Number(const google::protobuf::Map<std::string, std::string>& labels, const char* key) {
  auto it = labels.find(key);
  if (it == labels.end()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

void AddShare(const ClientShare& share, wire::Envelope& batch) {
  wire::MetricSample* sample = Snapshot(batch, "dispatcher", kSharesInstance)->add_samples();
  sample->set_name(kShareSample);
  auto& labels = *sample->mutable_labels();
  labels["client"] = std::to_string(share.client);
  labels["label"] = share.label;
  labels["compute_limit"] = std::to_string(share.max_compute_seconds_per_minute);
  sample->set_value(share.weight);
}

std::vector<ClientShare> SharesIn(const wire::Envelope& batch) {
  std::vector<ClientShare> shares;
  for (const wire::HostSnapshot& s : batch.snapshots()) {
    if (s.instance() != kSharesInstance) continue;
    for (const wire::MetricSample& sample : s.samples()) {
      std::optional<double> client = Number(sample.labels(), "client");
      std::optional<double> limit = Number(sample.labels(), "compute_limit");
      auto label = sample.labels().find("label");
      if (sample.name() != kShareSample || !client || !limit || label == sample.labels().end() ||
          !(sample.value() > 0) || !std::isfinite(sample.value()))
        continue;
      shares.push_back({static_cast<ClientId>(*client), sample.value(), label->second, *limit});
    }
  }
  return shares;
}

void AddLoad(const WorkerLoad& load, wire::Envelope& heartbeat) {
  wire::HostSnapshot* s = Snapshot(heartbeat, "worker", kLoadInstance);
  wire::MetricSample* queued = s->add_samples();
  queued->set_name("gt_worker_queued_instructions");
  queued->set_value(static_cast<double>(load.queued));
  wire::MetricSample* resident = s->add_samples();
  resident->set_name("gt_worker_resident_bytes");
  resident->set_value(static_cast<double>(load.resident_bytes));
}

std::optional<WorkerLoad> LoadIn(const wire::Envelope& heartbeat) {
  for (const wire::HostSnapshot& s : heartbeat.snapshots()) {
    if (s.instance() != kLoadInstance) continue;
    WorkerLoad load;
    for (const wire::MetricSample& sample : s.samples()) {
      if (!(sample.value() >= 0) || !std::isfinite(sample.value())) continue;
      if (sample.name() == "gt_worker_queued_instructions") load.queued = static_cast<uint64_t>(sample.value());
      if (sample.name() == "gt_worker_resident_bytes") load.resident_bytes = static_cast<uint64_t>(sample.value());
    }
    return load;
  }
  return std::nullopt;
}

}  // namespace gt
