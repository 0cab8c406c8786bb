// Pipeline manifests: the YAML file that tells a host what to run.
//
//   host: worker                 # dispatcher | worker | client (required); a
//                                # client manifest (GT_CLIENT_MANIFEST) takes
//                                # only id and stages
//   id: worker-0                 # instance id; default "<host>"
//   listen: tcp://0.0.0.0:5555   # dispatcher: where clients and workers connect
//   connect: tcp://host:5555     # worker: the dispatcher's address
//   metrics: 0.0.0.0:9100        # /metrics listen address; omit or "" for none
//   discovery: 0.0.0.0:9099      # dispatcher only: host:port serving GET /targets, the
//                                # metrics endpoints of the dispatcher and its live
//                                # workers in Prometheus HTTP service-discovery format
//                                # (JSON); omit or "" for none
//   heartbeat_interval_ms: 500   # how often peers send heartbeats
//   heartbeat_timeout_ms: 5000   # silence after which a peer is declared dead
//   stages:                      # modifiers, in stream order
//     - name: log                # unique within the manifest
//       plugin: instruction_log
//       options: {path: /tmp/gt.log}
//   backend:                     # workers only (required there)
//     plugin: torch
//     options: {intra_op_threads: 1}
//
// Validation loads each named plugin's descriptor (without creating it) and
// reports every problem at once, each with its YAML path and line.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gt/options.h"
#include "gt/stage.h"
#include "plugin_loader.h"

namespace gt {

struct ManifestStage {
  std::string name;
  LoadedPlugin plugin;
  OptionValues options;  // validated, defaults filled in
};

struct HostManifest {
  std::string source;  // file name or "<embedded>"
  HostKind host = HostKind::kWorker;
  std::string id;
  std::string listen;
  std::string connect;
  std::string metrics;
  std::string discovery;  // dispatcher only; "" = no discovery endpoint
  int64_t heartbeat_interval_ms = 500;
  int64_t heartbeat_timeout_ms = 5000;
  std::vector<ManifestStage> stages;
  std::optional<ManifestStage> backend;
};

struct ManifestProblem {
  std::string path;  // e.g. "stages[1].options.path"
  int line = 0;      // 1-based; 0 when unknown
  std::string message;
};

// Parses and validates `yaml`. On failure the status message lists every
// problem, one per line, as "<source>:<line>: <path>: <message>".
// `expected` (when set) is the kind of host that will run it.
// Which of a manifest's stages to take, by name; the others are skipped
// unread (not loaded, options not checked). Empty: every stage.
using StageFilter = std::function<bool(const std::string& stage_name)>;

Result<HostManifest> ParseManifest(std::string_view yaml, const std::string& source,
                                   std::optional<HostKind> expected, const StageFilter& keep = {});
Result<HostManifest> LoadManifestFile(const std::string& file, std::optional<HostKind> expected);
// ParseManifest of configs/<name> as compiled in (shipped_configs.h); its
// source reads "configs/<name> (built in)".
Result<HostManifest> LoadShippedManifest(std::string_view name, HostKind expected, const StageFilter& keep = {});

// Same checks, returning the problems as data (empty when valid).
std::vector<ManifestProblem> ValidateManifest(std::string_view yaml, std::optional<HostKind> expected);

}  // namespace gt
