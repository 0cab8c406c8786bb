// A host's own metrics as a wire::HostSnapshot, the answer to a STATS
// request (wire.proto). The figures that gt::worker_stats() reports are read
// from the same registry that /metrics serves, so the two never disagree.
//
// Thread-safety: prometheus::Registry::Collect() is thread-safe, so a
// snapshot may be taken on any thread (a worker takes it on its I/O thread
// while the pipeline thread updates the metrics).
#pragma once

#include <string>
#include <vector>

#include <prometheus/registry.h>

#include "gt/stage.h"
#include "host/manifest.h"
#include "wire.pb.h"

namespace gt {

// The gt_* samples of `registry` whose `instance` label is `instance` (a
// registry may be shared by several hosts of one process). Counters and
// gauges give one sample each; a histogram gives `<name>_count` and
// `<name>_sum`; summaries and untyped metrics are left out.
wire::HostSnapshot TakeSnapshot(const prometheus::Registry& registry, HostKind host, const std::string& instance,
                                std::vector<std::string> stages);

// The stage names of `manifest`'s pipeline in order, then `terminal`.
std::vector<std::string> PipelineStageNames(const HostManifest& manifest, const std::string& terminal);

}  // namespace gt
