// The embedded default: a dispatcher and N workers on threads of the calling
// process, linked over inproc://. The same host code as the services; only
// the transport differs. Started by the client on its first op when no
// address is configured.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/registry.h>
#include <zmq.hpp>

#include "gt/status.h"

namespace gt {

class Dispatcher;
class Worker;
struct HostManifest;

// The embedded default's manifests: configs/embedded-dispatcher.yaml less the
// stages its environment switches off (instruction_log without
// GT_INSTRUCTION_LOG; hotpath and compile unless CompileStagesFromEnv()), and
// configs/embedded-worker.yaml. gt-dispatcher and gt-worker run these when
// given no --manifest, so a process cluster runs the stages the embedded
// default runs.
Result<HostManifest> DefaultDispatcherManifest();
Result<HostManifest> DefaultWorkerManifest();

struct EmbeddedClusterOptions {
  int workers = 2;               // worker threads, one torch backend each
  int64_t intra_op_threads = 0;  // per backend; 0 = LibTorch's default
  // How long the dispatcher's and workers' threads poll without sleeping
  // around a sync (Dispatcher::set_busy_wait); 0: never. The session sets
  // it from GT_BUSY_WAIT_US, whose one default (gt/settings.h) says why:
  // the next message there is a few tens of microseconds away, and waking
  // a thread whose vCPU went idle costs as much again.
  std::chrono::microseconds busy_wait{0};
};

class EmbeddedCluster {
 public:
  // Starts the hosts. The instruction log stage is added to the dispatcher
  // when GT_INSTRUCTION_LOG is set. `context` must outlive the cluster.
  static Result<std::unique_ptr<EmbeddedCluster>> Start(zmq::context_t& context,
                                                        const EmbeddedClusterOptions& options);
  // Stops workers, then the dispatcher, and joins their threads.
  ~EmbeddedCluster();

  const std::string& endpoint() const { return endpoint_; }

 private:
  EmbeddedCluster() = default;

  std::string endpoint_;
  std::atomic<bool> stop_workers_{false};
  std::atomic<bool> stop_dispatcher_{false};
  std::vector<std::unique_ptr<prometheus::Registry>> registries_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;  // [0] dispatcher, then workers
};

}  // namespace gt
