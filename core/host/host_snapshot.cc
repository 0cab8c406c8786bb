#include "host/host_snapshot.h"

#include <string_view>

namespace gt {
namespace {

constexpr std::string_view kPrefix = "gt_";

bool OfInstance(const prometheus::ClientMetric& metric, const std::string& instance) {
  for (const prometheus::ClientMetric::Label& l : metric.label)
    if (l.name == "instance") return l.value == instance;
  return false;
}

void AddSample(wire::HostSnapshot& out, const std::string& name, const prometheus::ClientMetric& metric, double value) {
  wire::MetricSample* s = out.add_samples();
  s->set_name(name);
  for (const prometheus::ClientMetric::Label& l : metric.label) (*s->mutable_labels())[l.name] = l.value;
  s->set_value(value);
}

void AddFamily(wire::HostSnapshot& out, const prometheus::MetricFamily& family, const std::string& instance) {
  for (const prometheus::ClientMetric& m : family.metric) {
    if (!OfInstance(m, instance)) continue;
    switch (family.type) {
      case prometheus::MetricType::Counter:
        AddSample(out, family.name, m, m.counter.value);
        break;
      case prometheus::MetricType::Gauge:
        AddSample(out, family.name, m, m.gauge.value);
        break;
      case prometheus::MetricType::Histogram:
        // Counts and sums answer "how many, how long"; buckets would multiply
        // the reply by 13 for a figure nobody prints.
        AddSample(out, family.name + "_count", m, static_cast<double>(m.histogram.sample_count));
        AddSample(out, family.name + "_sum", m, m.histogram.sample_sum);
        break;
      default:
        break;
    }
  }
}

}  // namespace

wire::HostSnapshot TakeSnapshot(const prometheus::Registry& registry, HostKind host, const std::string& instance,
                                std::vector<std::string> stages) {
  wire::HostSnapshot out;
  out.set_instance(instance);
  out.set_host(std::string(HostKindName(host)));
  for (std::string& s : stages) out.add_stages(std::move(s));
  for (const prometheus::MetricFamily& family : registry.Collect())
    if (std::string_view(family.name).substr(0, kPrefix.size()) == kPrefix) AddFamily(out, family, instance);
  return out;
}

std::vector<std::string> PipelineStageNames(const HostManifest& manifest, const std::string& terminal) {
  std::vector<std::string> names;
  for (const ManifestStage& s : manifest.stages) names.push_back(s.name);
  names.push_back(terminal);
  return names;
}

}  // namespace gt
