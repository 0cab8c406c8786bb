// The dispatcher role of a stream host.
//
// Binds one ROUTER socket that clients and workers connect DEALERs to. Each
// client gets its own namespace (ClientId, taken from the connection, never
// from a message), its instructions run through the manifest's stages and
// end in the router terminal, which checks tensor ids against the client's
// table and forwards instructions to the worker holding the operands.
// Sync points (kSync) are answered once every worker that received the
// client's instructions since its last sync has acknowledged them, carrying
// every error of those instructions. A client's STATS request is answered
// with the metrics snapshot of the dispatcher and of every worker that
// answers within the request's timeout (wire.proto, "Stats").
//
// Thread-safety: Run() owns the socket; call everything else before Run() or
// from the thread that runs it, except LiveWorkerEndpoints(), which any
// thread may call. Stop from any thread through `stop`.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/registry.h>
#include <zmq.hpp>

#include "manifest.h"

namespace gt {

// A live worker's metrics endpoint, as published for service discovery.
struct WorkerEndpoint {
  std::string name;     // the worker's id (its `instance` label)
  std::string metrics;  // "host:port" the worker announced in REGISTER; the host
                        // may be a wildcard (0.0.0.0, [::]) when it listens on
                        // every interface
  std::string peer_ip;  // IP address the worker connected from (tcp only; ""
                        // for ipc:// and inproc:// peers)
};

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
