// The worker role of a stream host.
//
// Two threads, each with its own DEALER connected to the dispatcher. The
// I/O thread (the caller of Run) owns the control connection: it sends
// heartbeats and answers STATS requests (a snapshot of the registry,
// wire.proto "Stats") even while a long op runs. The pipeline thread owns
// the work connection, the manifest's stages and the backend: it receives
// batches, executes them in order and sends their replies, with no hop
// between threads on the way.
//
// Errors of a client's instructions are kept per client and sent with the
// acknowledgement of that client's next kSync. An instruction whose operand
// was never produced (its op failed) fails too, naming the original op.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <prometheus/registry.h>
#include <zmq.hpp>

#include "host/manifest.h"

namespace gt {

class Worker {
 public:
  // REQUIRES: manifest.host == HostKind::kWorker. Creates the stages and the
  // backend (plugin factories run here).
  static Result<std::unique_ptr<Worker>> Create(const HostManifest& manifest, zmq::context_t& context,
                                                prometheus::Registry& registry);
  ~Worker();

  // Announced to the dispatcher for service discovery ("host:port").
  void set_metrics_endpoint(std::string endpoint);

  // After acknowledging a sync, the pipeline thread polls its connection
  // without sleeping for up to `busy_wait` before it sleeps
  // (PollWithBusyWait): the client's next batch is probably near. 0 (the
  // default): never. REQUIRES: Run() has not started.
  void set_busy_wait(std::chrono::microseconds busy_wait);

  // Connects to `dispatcher` and serves until `stop` becomes true; then says
  // goodbye to the dispatcher.
  Status Run(const std::string& dispatcher, const std::atomic<bool>& stop);

  // After Run: whether it ended because the dispatcher declared this worker
  // lost (host/worker_lost_notice.h). Everything it held is gone for its
  // clients; gt-worker then starts afresh (services/start_afresh.h).
  bool declared_lost() const;

 private:
  class Impl;
  explicit Worker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gt
