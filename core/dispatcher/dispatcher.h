// The dispatcher role of a stream host.
//
// Binds one ROUTER socket that clients and workers connect DEALERs to, and
// runs the socket loop (dispatcher.cc): each message goes to the room that
// handles it.
//   listener_security.h CURVE and the ZAP handler on the socket, the refusal
//                       to listen beyond loopback without keys, roles
//   client_protocol.h   a client's HELLO, BATCH (admission.h, then the
//                       manifest's stages), HEARTBEAT, BYE, STATS
//   worker_membership.h workers registering, what they send back, their loss
//   peer_outbox.h       every message out, with per-peer queues
//   client_table.h      each client's namespace (ClientId, taken from the
//                       connection, never from a message)
//   worker_registry.h   registered workers, liveness, per-worker batches
//   router.h            the terminal stage after the manifest's stages: id
//                       checks, target worker, units
//   sync_tracker.h      sync points, answered when every worker touched has
//                       acknowledged, carrying every error
//   stats_fanout.h      STATS requests answered with every host's snapshot
//   dispatcher_events.h connects, disconnects and replies as host events
//
// Thread-safety: Run() owns the socket; call everything else before Run() or
// from the thread that runs it, except LiveWorkerEndpoints(), which any
// thread may call. Stop from any thread through `stop`.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/registry.h>
#include <zmq.hpp>

#include "host/manifest.h"
#include "dispatcher/worker_registry.h"

namespace gt {

class Dispatcher {
 public:
  // REQUIRES: manifest.host == HostKind::kDispatcher.
  static Result<std::unique_ptr<Dispatcher>> Create(const HostManifest& manifest, zmq::context_t& context,
                                                    prometheus::Registry& registry);
  ~Dispatcher();

  // Binds the ROUTER to `endpoint` (tcp://, ipc:// or inproc://).
  Status Bind(const std::string& endpoint);
  // The endpoint as bound (a tcp port 0 resolved to the real port).
  std::string endpoint() const;

  // After a pass in which a sync began or was answered, Run() polls without
  // sleeping for up to `busy_wait` before it sleeps (PollWithBusyWait): a
  // worker's acknowledgement or the client's next batch is probably near.
  // 0 (the default): never. The embedded default sets it, where the next
  // message is a thread away; over tcp it did not pay (docs/performance/round-trip.md).
  // REQUIRES: Run() has not started.
  void set_busy_wait(std::chrono::microseconds busy_wait);

  // Serves until `stop` becomes true.
  void Run(const std::atomic<bool>& stop);

  // The workers alive now that announced a metrics endpoint, in registration
  // order: a snapshot published by Run()'s thread whenever a worker registers
  // or is lost. Thread-safe; the copy is the caller's.
  std::vector<WorkerEndpoint> LiveWorkerEndpoints() const;
  // How many workers are alive now (with or without a metrics endpoint);
  // published with LiveWorkerEndpoints(). Thread-safe.
  size_t LiveWorkerCount() const;

 private:
  class Impl;
  explicit Dispatcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gt
