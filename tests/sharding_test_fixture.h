// What the sharding_test files share: a gt-dispatcher running the sharding
// modifier and four gt-worker processes (ShardingTest, connected from the C++
// client), and small helpers over counter vectors and signal scopes.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "cluster.h"
#include "connected_cluster.h"
#include "expect_tensors.h"
#include "gt/gt.h"
#include "gt/instruction.h"

namespace sharding_test {

using gt::DType;
using gt::testing::HttpGet;
using gt::testing::MetricValue;

constexpr int kWorkers = 4;

class ShardingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    gt::testing::ClusterOptions options;
    options.workers = kWorkers;
    options.dispatcher_manifest = gt::testing::WriteTempFile(
        "sharding-dispatcher.yaml",
        "host: dispatcher\nid: dispatcher\nstages:\n  - name: sharding\n    plugin: sharding\n"
        "    options: {explain: true}\n");
    options.worker_manifest = gt::testing::WriteTempFile(
        "sharding-worker.yaml", "host: worker\nbackend:\n  plugin: torch\n  options: {intra_op_threads: 1}\n");
    gt::testing::ConnectedCluster::Start(options);
  }
  static void TearDownTestSuite() { gt::testing::ConnectedCluster::Stop(); }
  void SetUp() override { ASSERT_TRUE(gt::testing::ConnectedCluster::ready()) << gt::testing::ConnectedCluster::NotReady(); }
  void TearDown() override { EXPECT_TRUE(Cluster().AllAlive()) << "a host process died"; }

  static gt::testing::ProcessCluster& Cluster() { return gt::testing::ConnectedCluster::cluster(); }

  // The gauge `name` of every worker, in port order.
  static std::vector<double> PerWorker(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    std::vector<double> out;
    for (int port : Cluster().worker_metrics_ports())
      out.push_back(MetricValue(HttpGet(port, "/metrics"), name, labels).value_or(-1));
    return out;
  }
  // The workers' gt_worker_live_tensors once it stopped moving: the gauge is
  // set at the end of each batch a worker runs, and on a loaded machine a
  // worker may still be finishing one (e.g. another test's frees) when a
  // sync returns.
  static std::vector<double> SettledLiveTensors() {
    std::vector<double> last = PerWorker("gt_worker_live_tensors");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::vector<double> now = PerWorker("gt_worker_live_tensors");
      if (now == last) break;
      last = std::move(now);
    }
    return last;
  }
  static double Dispatcher(const std::string& name) {
    return MetricValue(HttpGet(Cluster().dispatcher_metrics_port(), "/metrics"), name).value_or(-1);
  }
};

using gt::testing::ExpectClose;

inline std::vector<double> Delta(const std::vector<double>& after, const std::vector<double>& before) {
  std::vector<double> d;
  for (size_t i = 0; i < after.size(); ++i) d.push_back(after[i] - before[i]);
  return d;
}

// Runs `program` in signal scope `signal` (none: "") and returns its results.
template <typename F>
std::vector<gt::Tensor> In(const std::string& signal, F program) {
  std::optional<gt::SignalScope> scope;
  if (!signal.empty()) scope.emplace(signal);
  return program();
}

inline double Sum(const std::vector<double>& v) {
  double total = 0;
  for (double x : v) total += x;
  return total;
}

}  // namespace sharding_test
