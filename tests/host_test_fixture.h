// What the host_test files share: one real gt-dispatcher and gt-worker with
// the instruction_log stage on both (HostTest), their metrics scraped over
// HTTP, and waiting for a condition.
#pragma once

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "cluster.h"
#include "gt/instruction.h"
#include "gt/op_attrs.h"
#include "gt/unit.h"
#include "net/peer_address.h"

namespace gt::testing::host_test {

inline std::string FirstError(const wire::Envelope& env) { return env.errors_size() ? env.errors(0).message() : ""; }

inline bool WaitFor(const std::function<bool()>& condition, int timeout_ms = 15000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

inline double Scrape(int port, const std::string& name, const std::map<std::string, std::string>& labels = {}) {
  return MetricValue(HttpGet(port, "/metrics"), name, labels).value_or(-1);
}

class HostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_dir_ = TempPath("instructions");
    ClusterOptions options;
    options.workers = 1;
    options.dispatcher_manifest = WriteTempFile("dispatcher.yaml",
        "host: dispatcher\nid: test-dispatcher\nheartbeat_interval_ms: 200\nheartbeat_timeout_ms: 1500\n"
        "stages:\n  - name: log\n    plugin: instruction_log\n    options: {path: " + log_dir_ + ".dispatcher.log}\n");
    options.worker_manifest = WriteTempFile("worker.yaml",
        "host: worker\nheartbeat_interval_ms: 200\nstages:\n  - name: log\n    plugin: instruction_log\n"
        "    options: {path: " + log_dir_ + ".worker.log}\nbackend:\n  plugin: torch\n");
    cluster_ = std::make_unique<ProcessCluster>(options);
    ASSERT_TRUE(cluster_->WaitForWorkers(1)) << "worker did not register";
  }

  int dport() const { return cluster_->dispatcher_metrics_port(); }
  int wport() const { return cluster_->worker_metrics_ports()[0]; }

  std::string log_dir_;
  zmq::context_t context_{1};
  std::unique_ptr<ProcessCluster> cluster_;
};

}  // namespace gt::testing::host_test
