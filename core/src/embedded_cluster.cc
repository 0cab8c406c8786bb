#include "embedded_cluster.h"

#include <chrono>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "dispatcher.h"
#include "manifest.h"
#include "transport.h"
#include "worker.h"

namespace gt {
namespace {

std::string DispatcherManifest() {
  std::string yaml = "host: dispatcher\nid: embedded-dispatcher\nstages:\n";
  const char* log = std::getenv("GT_INSTRUCTION_LOG");
  if (log && *log) yaml += "  - name: instruction_log\n    plugin: instruction_log\n";
  // Signal configs place tensors and ops across the workers.
  yaml += "  - name: sharding\n    plugin: sharding\n";
  // GT_COMPILE=1: hot sequences (and compile signal scopes) replayed as
  // compiled units, after placement so that a unit never spans two workers.
  // The client runs the same two stages itself (client/src/client_pipeline.h)
  // and sends its steps as units, which these pass on; what they compile is
  // what a client sends one instruction at a time: the stream of one whose
  // configs place tensors (it bypasses its own stages).
  const char* compile = std::getenv("GT_COMPILE");
  if (compile && std::string_view(compile) == "1")
    yaml += "  - name: hotpath\n    plugin: hotpath\n  - name: compile\n    plugin: compile\n";
  return yaml;
}

std::string WorkerManifest(int index, int64_t threads) {
  return "host: worker\nid: embedded-worker-" + std::to_string(index) +
         "\nbackend:\n  plugin: torch\n  options:\n    intra_op_threads: " + std::to_string(threads) + "\n";
}

}  // namespace

Result<std::unique_ptr<EmbeddedCluster>> EmbeddedCluster::Start(zmq::context_t& context,
                                                                const EmbeddedClusterOptions& options) {
  std::unique_ptr<EmbeddedCluster> cluster(new EmbeddedCluster());
  Result<HostManifest> dm = ParseManifest(DispatcherManifest(), "<embedded dispatcher>", HostKind::kDispatcher);
  if (!dm.ok()) return dm.status();
  cluster->registries_.push_back(std::make_unique<prometheus::Registry>());
  Result<std::unique_ptr<Dispatcher>> dispatcher = Dispatcher::Create(*dm, context, *cluster->registries_.back());
  if (!dispatcher.ok()) return dispatcher.status();
  cluster->dispatcher_ = std::move(*dispatcher);
  if (Status s = cluster->dispatcher_->Bind(UniqueInprocEndpoint("gt-embedded")); !s.ok()) return s;
  cluster->endpoint_ = cluster->dispatcher_->endpoint();

  for (int i = 0; i < options.workers; ++i) {
    Result<HostManifest> wm = ParseManifest(WorkerManifest(i, options.intra_op_threads),
                                            "<embedded worker>", HostKind::kWorker);
    if (!wm.ok()) return wm.status();
    cluster->registries_.push_back(std::make_unique<prometheus::Registry>());
    Result<std::unique_ptr<Worker>> worker = Worker::Create(*wm, context, *cluster->registries_.back());
    if (!worker.ok()) return worker.status();
    cluster->workers_.push_back(std::move(*worker));
  }
  EmbeddedCluster* c = cluster.get();
  c->threads_.emplace_back([c] { c->dispatcher_->Run(c->stop_dispatcher_); });
  for (auto& w : c->workers_) {
    Worker* worker = w.get();
    c->threads_.emplace_back([c, worker] { (void)worker->Run(c->endpoint_, c->stop_workers_); });
  }
  // Every worker registered before the first op: signal configs name worker
  // indexes, and an op placed while some are still joining would find them
  // missing. Bounded: a worker that never joins leaves the cluster smaller.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (c->dispatcher_->LiveWorkerCount() < c->workers_.size() &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return cluster;
}

EmbeddedCluster::~EmbeddedCluster() {
  stop_workers_ = true;
  for (size_t i = 1; i < threads_.size(); ++i) threads_[i].join();
  stop_dispatcher_ = true;
  if (!threads_.empty()) threads_[0].join();
}

}  // namespace gt
