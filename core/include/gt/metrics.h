// Metric helpers for plugins.
//
// Every series a stage exports carries the labels {host, instance, stage} so
// that dashboards can slice any metric the same way. Plugins build their own
// families on StageContext::registry and pass StageLabels() to Add().
//
// Per-client quotas, whether a host keeps them (the dispatcher's limits) or
// a plugin does (the torch backend's max_client_mib), share one declaration
// (MakeQuotaMetrics; docs/METRICS.md):
//   gt_client_limit{resource}                 gauge    the quota (0: none)
//   gt_client_limit_refusals_total{resource}  counter  instructions refused at it
// Their refusal message: QuotaRefusal in gt/instruction_errors.h.
//
// Thread-safety: the handles are prometheus-cpp's (thread-safe).
#pragma once

#include <string>

#include <prometheus/labels.h>

#include "gt/stage.h"

namespace prometheus {
class Counter;
class Gauge;
class Registry;
}  // namespace prometheus

namespace gt {

inline prometheus::Labels StageLabels(const StageContext& context) {
  return {{"host", std::string(HostKindName(context.host))},
          {"instance", context.instance},
          {"stage", context.stage}};
}

// One quota's series: its gauge (set to the limit) and its refusals.
// Null handles (a default-constructed one, or no registry): not counted.
struct QuotaMetrics {
  prometheus::Gauge* limit = nullptr;
  prometheus::Counter* refusals = nullptr;
};

// Registers quota `resource` ("live_tensors", "resident_bytes", ...) under
// `labels` plus {resource} on `registry`, and sets its gauge to `limit`.
// A host passes {host, instance}; a plugin StageLabels() without "stage",
// so that its series join the host's. REQUIRES: `registry` outlives the
// returned handles.
QuotaMetrics MakeQuotaMetrics(prometheus::Registry& registry, prometheus::Labels labels, const std::string& resource,
                              double limit);

}  // namespace gt
