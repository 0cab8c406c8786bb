// What the dispatcher and the workers tell each other for fair sharing
// (docs/ARCHITECTURE.md, section 8), carried in the `snapshots` of existing
// messages (wire.proto HostSnapshot: named samples with labels), so that
// the wire format stays as it is:
//
//   BATCH to a worker: one snapshot {host: "dispatcher", instance: "shares"}
//     with a sample per client the worker was not told of yet:
//       gt_client_share{client="<id>", label="<metrics label>",
//                       compute_limit="<seconds per minute, 0: none>"} = weight
//   HEARTBEAT from a worker: one snapshot {host: "worker", instance: "load"}:
//       gt_worker_queued_instructions = instructions waiting in its fair queue
//       gt_worker_resident_bytes      = its backend's tensor bytes
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gt/instruction.h"
#include "wire.pb.h"

namespace gt {

// A client session's share of every worker: its weight against the others,
// the `client` label of its metrics and its compute quota.
struct ClientShare {
  ClientId client = 0;
  double weight = 1.0;  // > 0
  std::string label;    // the key's name in the manifest's clients:, else "session-<id>"
  double max_compute_seconds_per_minute = 0;  // limits.max_compute_seconds_per_minute; 0: none
};

// Appends `share` to `batch` (a BATCH envelope for one worker).
void AddShare(const ClientShare& share, wire::Envelope& batch);
// The shares `batch` carries. Malformed samples are skipped, as are weights
// that are not positive finite numbers (the manifest refuses those).
std::vector<ClientShare> SharesIn(const wire::Envelope& batch);

// A worker's load, as its heartbeats report it.
struct WorkerLoad {
  uint64_t queued = 0;
  uint64_t resident_bytes = 0;
};
void AddLoad(const WorkerLoad& load, wire::Envelope& heartbeat);
// nullopt: the heartbeat reports none (a worker of an older build).
std::optional<WorkerLoad> LoadIn(const wire::Envelope& heartbeat);

}  // namespace gt
