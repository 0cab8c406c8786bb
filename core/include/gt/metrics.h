// Metric helpers for plugins.
//
// Every series a stage exports carries the labels {host, instance, stage} so
// that dashboards can slice any metric the same way. Plugins build their own
// families on StageContext::registry and pass StageLabels() to Add().
#pragma once

#include <prometheus/labels.h>

#include "gt/stage.h"

namespace gt {

inline prometheus::Labels StageLabels(const StageContext& context) {
  return {{"host", std::string(HostKindName(context.host))},
          {"instance", context.instance},
          {"stage", context.stage}};
}

}  // namespace gt
