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
//   reconnect_grace_ms: 60000    # worker: how long it keeps its tensors for a dispatcher that
//                                # went away (docs/ARCHITECTURE.md, "Surviving a dispatcher
//                                # restart"); dispatcher: how long sessions named by workers
//                                # wait for their clients' RESUME
//   after_grace: exit            # worker: exit | wait (stay, empty) once the grace is over
//   resume_wait_ms: 5000         # dispatcher: how long a RESUME waits for the workers
//                                # holding its session to register again
//   security:                    # CURVE authentication (docs/SECURITY.md, gt keygen)
//     key: keys/dispatcher.key   #   this host's key pair
//     server_key: keys/d.pub     #   worker: the dispatcher's public key
//     clients: keys/clients/     #   dispatcher: allowed client public keys (file or dir)
//     workers: keys/workers/     #   dispatcher: allowed worker public keys (file or dir)
//     insecure: false            #   dispatcher: serve a non-loopback address without keys
//   limits:                      # dispatcher: per-client quotas (resource_exhausted past them)
//     max_live_tensors: 1000000  #   tensors a client holds on the workers at once
//     max_inflight: 1000000      #   instructions a client sent that no sync has answered yet
//     max_sessions_per_key: 16   #   sessions one client key holds at once (with CURVE keys)
//     max_compute_seconds_per_minute: 0  # execution seconds one session may use per worker per minute (0: no limit)
//   clients:                     # dispatcher: client keys' shares of the workers (fair queueing)
//     - key: keys/clients/alice.pub  # a public key on the security.clients allow-list
//       weight: 2                #   its share against others (default 1; > 0)
//       name: alice              #   its metrics label (default: the key file's name)
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
#include "host/plugin_loader.h"

namespace gt {

struct ManifestStage {
  std::string name;
  LoadedPlugin plugin;
  OptionValues options;  // validated, defaults filled in
};

// Key files for CURVE; relative paths are taken from the working directory.
struct SecurityConfig {
  std::string key;          // this host's key pair (.key)
  std::string server_key;   // worker: the dispatcher's public key (.pub)
  std::string client_keys;  // dispatcher: a file or directory of client public keys
  std::string worker_keys;  // dispatcher: a file or directory of worker public keys
  bool insecure = false;    // dispatcher: accept a non-loopback listen address without keys
  // dispatcher: the keys are its user's own set (core/net/default_keys.h):
  // every client is that one user, so one key's session cap does not apply.
  bool user_key_set = false;
  bool enabled() const { return !key.empty(); }
};

// Per-client quotas the dispatcher enforces (0 = unlimited).
struct ClientLimits {
  int64_t max_live_tensors = 1'000'000;
  int64_t max_inflight = 1'000'000;
  // The limits above are per session; one key's sessions are capped so
  // that its share is bounded too.
  int64_t max_sessions_per_key = 16;
  // Execution seconds one session may use on one worker in any minute
  // (measured by the worker's fair queue; 0 = unlimited).
  double max_compute_seconds_per_minute = 0;
};

// One entry of a dispatcher's `clients:` list: a client key's share of
// every worker's time (core/worker/fair_queue.h). Sessions of keys without
// an entry weigh 1 and are labelled "session-<id>" in metrics.
struct ClientShareConfig {
  std::string name;        // its `client` metrics label; [A-Za-z0-9_.-], unique
  std::string public_key;  // Z85, read from the entry's key file
  double weight = 1.0;     // > 0 and finite
  std::string file;        // the key file, as written
  int line = 0;            // of its `key:` in the manifest
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
  int64_t reconnect_grace_ms = 60000;
  bool exit_after_grace = true;  // after_grace: exit (true) | wait
  int64_t resume_wait_ms = 5000;
  SecurityConfig security;
  ClientLimits limits;
  std::vector<ClientShareConfig> clients;  // dispatcher only
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

// Whether `security` is complete for a `host` (both allow-lists with a
// dispatcher's key, the server's key with a worker's, ...): the manifest's
// check, also applied after command-line flags changed it.
Status ValidateSecurity(const SecurityConfig& security, HostKind host);

// The `clients:` entries' keys against the allow-list the dispatcher runs
// with (security.clients, perhaps from the command line): InvalidArgument
// naming the manifest line of an entry whose key is not on it, or of the
// list when there are no client keys at all.
Status CheckClientShares(const HostManifest& manifest);

// Same checks, returning the problems as data (empty when valid).
std::vector<ManifestProblem> ValidateManifest(std::string_view yaml, std::optional<HostKind> expected);

}  // namespace gt
