// For suites that drive the C++ client: one real cluster (a gt-dispatcher
// and gt-worker processes) per test binary, with this process's client
// connected to it. Only for tests that link gt_client.
#pragma once

#include <string>

#include "cluster.h"
#include "gt/gt.h"

namespace gt::testing {

class ConnectedCluster {
 public:
  // Starts the hosts and connects the client (before any op of the
  // process); call from SetUpTestSuite.
  static void Start(int workers = 1) {
    ClusterOptions options;
    options.workers = workers;
    Start(options);
  }
  // The same with manifests, environment and worker count of the caller's.
  static void Start(const ClusterOptions& options) {
    cluster_ = new ProcessCluster(options);
    ready_ = cluster_->WaitForWorkers(options.workers);
    if (ready_) gt::connect(cluster_->endpoint());
  }

  // Ends the client's session and stops the hosts; call from TearDownTestSuite.
  static void Stop() {
    gt::shutdown();
    delete cluster_;
    cluster_ = nullptr;
  }

  static bool ready() { return ready_; }
  static ProcessCluster& cluster() { return *cluster_; }
  static std::string NotReady() {
    return "gt-dispatcher and gt-worker from " + BinDir() + " did not come up (built? the test target depends on them)";
  }

 private:
  static inline ProcessCluster* cluster_ = nullptr;
  static inline bool ready_ = false;
};

}  // namespace gt::testing
