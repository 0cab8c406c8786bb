// `gt top`: a live terminal view of a running cluster, read from the same
// Prometheus metrics the dashboards use (docs/METRICS.md).
//
//   gt top [--discovery HOST:PORT] [--metrics HOST:PORT] [--interval SECONDS] [--once]
//
// Each refresh asks the dispatcher's discovery endpoint (GET /targets) for
// the metrics endpoints of the dispatcher and its live workers, scrapes every
// one of them twice, `interval` apart, and prints rates computed between the
// two scrapes: one row per host (messages, bytes, clients, workers, tensors,
// resident bytes, errors) and one per stage of every host (instructions in,
// out, dropped, injected and rejected per second, queue depth, p50/p99 time),
// then the backend ops each worker ran, then one row per client and worker
// (the `client` label of gt_worker_client_*: its share of the worker's
// time, instructions and bytes moved per second, queued instructions and
// weight). With nothing to scrape (a plain `gt cluster` serves no metrics)
// it says which flags give it something to watch. `--metrics` adds an endpoint to
// scrape (e.g. the dispatcher when it serves no discovery). `--once` prints
// one snapshot and exits: 0 when every endpoint answered, 1 otherwise.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gt/status.h"

namespace gt::services {

// Runs `gt top` with its own arguments (argv[0] is "top"). Returns the exit
// status.
int Top(int argc, char** argv);

// One sample of the Prometheus text exposition format.
struct MetricSample {
  std::string name;                           // e.g. gt_stage_processing_seconds_bucket
  std::map<std::string, std::string> labels;  // unescaped values
  double value = 0;
};

// Parses the text exposition format (comments skipped). Lines that are not
// samples are ignored.
std::vector<MetricSample> ParseExposition(const std::string& text);

// The targets of a Prometheus HTTP service-discovery document, in order.
// Returns InvalidArgument when `json` is not such a document.
Result<std::vector<std::string>> ParseDiscoveryTargets(const std::string& json);

// GET http://<address><path> over HTTP/1.0. Returns the body of a 200
// answer; Unavailable naming the address on a failure, a timeout or any other
// status.
Result<std::string> HttpGetBody(const std::string& address, const std::string& path, int timeout_ms);

}  // namespace gt::services
