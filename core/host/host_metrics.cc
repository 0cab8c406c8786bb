#include "host/host_metrics.h"

#include <algorithm>
#include <vector>

namespace gt {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

struct Families {
  prometheus::Family<prometheus::Counter>& received;
  prometheus::Family<prometheus::Counter>& emitted;
  prometheus::Family<prometheus::Counter>& dropped;
  prometheus::Family<prometheus::Counter>& injected;
  prometheus::Family<prometheus::Histogram>& seconds;
  prometheus::Family<prometheus::Counter>& errors;
  prometheus::Family<prometheus::Gauge>& queue_depth;
};

Families StageFamilies(prometheus::Registry& r) {
  return Families{
      BuildCounter().Name("gt_stage_instructions_received_total").Help("Instructions that entered the stage").Register(r),
      BuildCounter().Name("gt_stage_instructions_emitted_total").Help("Instructions the stage passed on").Register(r),
      BuildCounter().Name("gt_stage_instructions_dropped_total").Help("Received instructions for which the stage emitted nothing").Register(r),
      BuildCounter().Name("gt_stage_instructions_injected_total").Help("Instructions emitted beyond one per received instruction").Register(r),
      BuildHistogram().Name("gt_stage_processing_seconds").Help("Time spent inside the stage per instruction").Register(r),
      BuildCounter().Name("gt_stage_errors_total").Help("Instructions the stage rejected, by error kind").Register(r),
      BuildGauge().Name("gt_stage_queue_depth").Help("Instructions held back by the stage").Register(r),
  };
}

prometheus::Labels HostLabels(HostKind host, const std::string& instance) {
  return {{"host", std::string(HostKindName(host))}, {"instance", instance}};
}

prometheus::Labels With(prometheus::Labels labels, const std::string& key, std::string value) {
  labels[key] = std::move(value);
  return labels;
}

}  // namespace

QuotaMetrics MakeQuotaMetrics(prometheus::Registry& registry, prometheus::Labels labels, const std::string& resource,
                              double limit) {
  labels["resource"] = resource;
  QuotaMetrics m{&BuildGauge().Name("gt_client_limit").Help("Per-client quota (0: none)").Register(registry).Add(labels),
                 &BuildCounter()
                      .Name("gt_client_limit_refusals_total")
                      .Help("Instructions refused because a client was at its quota")
                      .Register(registry)
                      .Add(labels)};
  m.limit->Set(limit);
  return m;
}

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets(kLatencyBounds.begin(), kLatencyBounds.end());
  return kBuckets;
}

void HistogramTally::Observe(double seconds) {
  // A value equal to a bound belongs to that bound's bucket (le), as in Histogram::Observe.
  const auto bucket = std::lower_bound(kLatencyBounds.begin(), kLatencyBounds.end(), seconds);
  counts_[static_cast<size_t>(bucket - kLatencyBounds.begin())] += 1;
  sum_ += seconds;
  empty_ = false;
}

void HistogramTally::FlushTo(prometheus::Histogram& histogram) {
  if (empty_) return;
  histogram.ObserveMultiple(std::vector<double>(counts_.begin(), counts_.end()), sum_);
  counts_.fill(0);
  sum_ = 0;
  empty_ = true;
}

HostMetrics::HostMetrics(HostKind host, std::string instance, prometheus::Registry& r)
    : clients_connected(BuildGauge().Name("gt_host_clients_connected").Help("Clients with an open session").Register(r)
                            .Add(HostLabels(host, instance))),
      workers_connected(BuildGauge().Name("gt_host_workers_connected").Help("Workers registered and alive").Register(r)
                            .Add(HostLabels(host, instance))),
      bytes_received(BuildCounter().Name("gt_host_bytes_received_total").Help("Bytes received on the host's sockets").Register(r)
                         .Add(HostLabels(host, instance))),
      bytes_sent(BuildCounter().Name("gt_host_bytes_sent_total").Help("Bytes sent on the host's sockets").Register(r)
                     .Add(HostLabels(host, instance))),
      messages_received(BuildCounter().Name("gt_host_messages_received_total").Help("ZeroMQ messages received").Register(r)
                            .Add(HostLabels(host, instance))),
      messages_sent(BuildCounter().Name("gt_host_messages_sent_total").Help("ZeroMQ messages sent").Register(r)
                        .Add(HostLabels(host, instance))),
      malformed_messages(BuildCounter().Name("gt_host_malformed_messages_total").Help("Messages that could not be decoded").Register(r)
                             .Add(HostLabels(host, instance))),
      heartbeats_missed(BuildCounter().Name("gt_host_heartbeats_missed_total").Help("Peers declared dead after missing heartbeats").Register(r)
                            .Add(HostLabels(host, instance))),
      log_lines_suppressed(BuildCounter().Name("gt_log_lines_suppressed_total")
                               .Help("Log lines this process held back (per-peer and overall rate limits)").Register(r)
                               .Add(HostLabels(host, instance))),
      live_tensors(BuildGauge().Name("gt_worker_live_tensors").Help("Tensors held by the backend").Register(r)
                       .Add(HostLabels(host, instance))),
      resident_bytes(BuildGauge().Name("gt_worker_resident_bytes").Help("Bytes of tensor storage held by the backend").Register(r)
                         .Add(HostLabels(host, instance))),
      labels_({{"host", std::string(HostKindName(host))}, {"instance", std::move(instance)}}),
      log_sink_([](void* counter, int64_t n) { static_cast<prometheus::Counter*>(counter)->Increment(static_cast<double>(n)); },
                &log_lines_suppressed) {
  auto& op_family = BuildHistogram().Name("gt_backend_op_seconds").Help("Backend execution time per op").Register(r);
  if (host == HostKind::kWorker) {
    for (size_t i = 0; i < op_seconds_.size(); ++i)
      op_seconds_[i] = &op_family.Add(With(labels_, "op", std::string(OpName(static_cast<Op>(i)))), LatencyBuckets());
  }
  registry_ = &r;
}

QuotaMetrics HostMetrics::ForQuota(const std::string& resource, double limit) {
  return MakeQuotaMetrics(*registry_, labels_, resource, limit);
}

StageMetrics HostMetrics::ForStage(const std::string& stage) {
  Families f = StageFamilies(*registry_);
  prometheus::Labels l = With(labels_, "stage", stage);
  StageMetrics m{&f.received.Add(l), &f.emitted.Add(l), &f.dropped.Add(l), &f.injected.Add(l),
                 &f.seconds.Add(l, LatencyBuckets()), &f.queue_depth.Add(l), {}};
  for (size_t c = 1; c < m.errors.size(); ++c)
    m.errors[c] = &f.errors.Add(With(l, "kind", std::string(CodeName(static_cast<Code>(c)))));
  return m;
}

}  // namespace gt
