// Every metric a gt host exports, declared in one place. docs/METRICS.md is
// the written spec of these names; keep the two in step.
//
// Stage family (labels host, instance, stage; errors add kind):
//   gt_stage_instructions_received_total  counter  instructions that entered the stage
//   gt_stage_instructions_emitted_total   counter  instructions the stage passed on
//   gt_stage_instructions_dropped_total   counter  received instructions that produced nothing
//   gt_stage_instructions_injected_total  counter  emitted beyond one per received
//   gt_stage_processing_seconds           histogram time inside the stage per instruction
//   gt_stage_errors_total                 counter  rejected instructions, by gt::Code name
//   gt_stage_queue_depth                  gauge    instructions held back by the stage
// Host family (labels host, instance):
//   gt_host_clients_connected, gt_host_workers_connected            gauges
//   gt_host_bytes_received_total, gt_host_bytes_sent_total          counters
//   gt_host_messages_received_total, gt_host_messages_sent_total    counters
//   gt_host_malformed_messages_total                                counter
//   gt_host_heartbeats_missed_total                                 counter (peers declared dead)
//   gt_log_lines_suppressed_total                                   counter (this process's log
//                                                                   lines held back, gt/log.h)
//   gt_worker_live_tensors, gt_worker_resident_bytes                gauges (workers)
//   gt_backend_op_seconds{op}                                       histogram (workers)
// Quota family (labels host, instance, resource: live_tensors, inflight,
// sessions_per_key; see ClientLimits): declared by MakeQuotaMetrics in
// gt/metrics.h, which the torch backend's resident_bytes quota shares.
#pragma once

#include <array>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "gt/log.h"
#include "gt/metrics.h"
#include "gt/op.h"
#include "gt/stage.h"
#include "gt/status.h"

namespace gt {

struct StageMetrics {
  prometheus::Counter* received;
  prometheus::Counter* emitted;
  prometheus::Counter* dropped;
  prometheus::Counter* injected;
  prometheus::Histogram* seconds;
  prometheus::Gauge* queue_depth;
  std::array<prometheus::Counter*, static_cast<size_t>(Code::kCount)> errors;  // [kOk] unused
};

class HostMetrics {
 public:
  // Registers every family on `registry` (which must outlive this object).
  HostMetrics(HostKind host, std::string instance, prometheus::Registry& registry);

  // The stage family's series for one stage of this host.
  StageMetrics ForStage(const std::string& stage);
  prometheus::Histogram& OpSeconds(Op op) { return *op_seconds_[static_cast<size_t>(op)]; }
  // The quota family's series for `resource`, its gauge set to `limit`.
  QuotaMetrics ForQuota(const std::string& resource, double limit);

  prometheus::Gauge& clients_connected;
  prometheus::Gauge& workers_connected;
  prometheus::Counter& bytes_received;
  prometheus::Counter& bytes_sent;
  prometheus::Counter& messages_received;
  prometheus::Counter& messages_sent;
  prometheus::Counter& malformed_messages;
  prometheus::Counter& heartbeats_missed;
  prometheus::Counter& log_lines_suppressed;
  prometheus::Gauge& live_tensors;
  prometheus::Gauge& resident_bytes;

 private:
  prometheus::Labels labels_;
  prometheus::Registry* registry_ = nullptr;
  // Adds what gt/log.h holds back to log_lines_suppressed, while this lives.
  log::SuppressedSink log_sink_;
  std::array<prometheus::Histogram*, static_cast<size_t>(Op::kCount)> op_seconds_{};
};

// Bucket bounds for latency histograms: 1 us .. ~4 s, x4 apart.
inline constexpr std::array<double, 12> kLatencyBounds = {
    1e-6, 4e-6, 1.6e-5, 6.4e-5, 2.56e-4, 1.024e-3, 4.096e-3, 1.6384e-2, 6.5536e-2, 0.262144, 1.048576, 4.194304};
const prometheus::Histogram::BucketBoundaries& LatencyBuckets();

// Observations for a LatencyBuckets() histogram, gathered here and added to
// it in one call. prometheus-cpp's Observe locks a mutex and updates three
// atomics; per instruction and stage that cost more than some stages' own
// work. Hosts flush once per batch and before answering a sync point, so a
// client that reads metrics after a sync sees its own work.
class HistogramTally {
 public:
  void Observe(double seconds);
  // Adds what was observed since the last flush to `histogram`.
  void FlushTo(prometheus::Histogram& histogram);

 private:
  std::array<double, kLatencyBounds.size() + 1> counts_{};  // the last: +Inf
  double sum_ = 0;
  bool empty_ = true;
};

}  // namespace gt
