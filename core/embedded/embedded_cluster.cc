#include "embedded/embedded_cluster.h"

#include <chrono>
#include <string_view>
#include <thread>

#include "dispatcher/dispatcher.h"
#include "gt/settings.h"
#include "host/manifest.h"
#include "host/shipped_configs.h"
#include "net/transport.h"
#include "worker/worker.h"

namespace gt {
// configs/embedded-dispatcher.yaml, less the stages its environment
// switches off (the file's header says which): those are never loaded.
Result<HostManifest> DefaultDispatcherManifest() {
  const bool logged = TextSetting("GT_INSTRUCTION_LOG").has_value();
  Result<bool> compile = CompileStagesFromEnv();
  if (!compile.ok()) return compile.status();
  const bool compiled = *compile;
  return LoadShippedManifest("embedded-dispatcher.yaml", HostKind::kDispatcher, [&](const std::string& stage) {
    if (stage == "instruction_log") return logged;
    if (stage == "hotpath" || stage == "compile") return compiled;
    return true;
  });
}

Result<HostManifest> DefaultWorkerManifest() { return LoadShippedManifest("embedded-worker.yaml", HostKind::kWorker); }

namespace {

// configs/embedded-worker.yaml as worker `index`.
Result<HostManifest> WorkerManifest(int index, int64_t threads) {
  Result<HostManifest> m = DefaultWorkerManifest();
  if (!m.ok()) return m;
  m->id += "-" + std::to_string(index);
  if (threads > 0) {  // checked against the option's declared range, as a manifest value is
    const PluginDescriptor& torch = *m->backend->plugin.descriptor;
    for (size_t i = 0; i < torch.option_count; ++i) {
      if (std::string_view(torch.options[i].name) != "intra_op_threads") continue;
      Result<OptionValue> v = ParseOptionValue(torch.options[i], std::to_string(threads));
      if (!v.ok()) return InvalidArgument("GT_INTRA_OP_THREADS: " + v.status().message());
      m->backend->options.Set("intra_op_threads", std::move(*v));
    }
  }
  return m;
}

}  // namespace

Result<std::unique_ptr<EmbeddedCluster>> EmbeddedCluster::Start(zmq::context_t& context,
                                                                const EmbeddedClusterOptions& options) {
  std::unique_ptr<EmbeddedCluster> cluster(new EmbeddedCluster());
  Result<HostManifest> dm = DefaultDispatcherManifest();
  if (!dm.ok()) return dm.status();
  cluster->registries_.push_back(std::make_unique<prometheus::Registry>());
  Result<std::unique_ptr<Dispatcher>> dispatcher = Dispatcher::Create(*dm, context, *cluster->registries_.back());
  if (!dispatcher.ok()) return dispatcher.status();
  cluster->dispatcher_ = std::move(*dispatcher);
  cluster->dispatcher_->set_busy_wait(options.busy_wait);
  if (Status s = cluster->dispatcher_->Bind(UniqueInprocEndpoint("gt-embedded")); !s.ok()) return s;
  cluster->endpoint_ = cluster->dispatcher_->endpoint();

  for (int i = 0; i < options.workers; ++i) {
    Result<HostManifest> wm = WorkerManifest(i, options.intra_op_threads);
    if (!wm.ok()) return wm.status();
    cluster->registries_.push_back(std::make_unique<prometheus::Registry>());
    Result<std::unique_ptr<Worker>> worker = Worker::Create(*wm, context, *cluster->registries_.back());
    if (!worker.ok()) return worker.status();
    (*worker)->set_busy_wait(options.busy_wait);
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
