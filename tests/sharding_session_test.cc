// Sharding in a session of its own, through the real stack: a gt-dispatcher
// with the sharding modifier and two gt-worker processes whose pipelines
// hold the test plugin "throwing" (every neg fails on the worker).
//
// - Tensors the client made before its first config (the stage keeps no
//   record of them then) mix correctly with sharded ones afterwards. This
//   suite's first test, so that the session has no config yet.
// - A collective whose operand failed on one member: a neg of a whole tensor
//   fails on its one worker; broadcasting the result to the other worker
//   makes a collective whose root has no operand. The root stands in (the
//   other member does not wait for the collective timeout, set far beyond
//   the test's patience), the error reaches the client at its next sync
//   point, and the client, the group and another client keep working.
// - Instructions that arrive before any worker: the dispatcher holds them
//   until the first worker registers, and a stage error among them reaches
//   the client that sent it (its own fixture: a dispatcher alone, and a
//   worker the test starts late).
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cluster.h"
#include "connected_cluster.h"
#include "expect_tensors.h"
#include "gt/gt.h"
#include "gt/instruction.h"

namespace {

using gt::DType;

class ShardingSessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    gt::testing::ClusterOptions options;
    options.workers = 2;
    options.dispatcher_manifest = gt::testing::WriteTempFile(
        "sharding-session-dispatcher.yaml",
        "host: dispatcher\nid: dispatcher\nstages:\n  - name: sharding\n    plugin: sharding\n");
    options.worker_manifest = gt::testing::WriteTempFile(
        "sharding-session-worker.yaml",
        "host: worker\nstages:\n  - name: boom\n    plugin: throwing\n"
        "backend:\n  plugin: torch\n  options: {intra_op_threads: 1, collective_timeout_ms: 120000}\n");
    options.env = {{"GT_PLUGIN_PATH", GT_TEST_PLUGIN_DIR}};
    gt::testing::ConnectedCluster::Start(options);
  }
  static void TearDownTestSuite() { gt::testing::ConnectedCluster::Stop(); }
  void SetUp() override { ASSERT_TRUE(gt::testing::ConnectedCluster::ready()) << gt::testing::ConnectedCluster::NotReady(); }
  void TearDown() override { EXPECT_TRUE(Cluster().AllAlive()) << "a host process died"; }

  static gt::testing::ProcessCluster& Cluster() { return gt::testing::ConnectedCluster::cluster(); }
};

using gt::testing::ExpectClose;

TEST_F(ShardingSessionTest, TensorsFromBeforeTheFirstConfigMixWithShards) {
  gt::Tensor w = gt::randn({6, 4}, DType::kFloat32, 51);
  gt::Tensor b = gt::randn({4}, DType::kFloat32, 52);
  gt::Tensor w2 = w * 2;
  EXPECT_EQ(w2.sum({0}).shape(), (gt::Shape{4}));
  gt::register_config("dp", {.shard = gt::ShardConfig{0, {0, 1}}});
  gt::Tensor x;
  {
    gt::SignalScope scope("dp");
    x = gt::randn({8, 6}, DType::kFloat32, 53);
  }
  gt::Tensor x1 = gt::randn({8, 6}, DType::kFloat32, 53);
  ExpectClose((x.matmul(w2) + b).relu(), (x1.matmul(w2) + b).relu(), "sharded @ early weights");
  ExpectClose(x.matmul(w2).sum({0}) + w2.sum({0}), x1.matmul(w2).sum({0}) + w2.sum({0}),
              "reduction mixed with an early tensor");
  {
    gt::SignalScope scope("dp");  // early tensors used inside a scope
    ExpectClose(w2 * 3, w * 6, "early tensors in a scope");
  }
  EXPECT_DOUBLE_EQ(gt::ones({3}).sum().item(), 3.0);
}

TEST_F(ShardingSessionTest, FailedOperandOfACollectiveFailsPromptly) {
  gt::register_config("both", {.replicated = true});
  gt::register_config("rows", {.shard = gt::ShardConfig{0, {0, 1}}});
  gt::Tensor r;
  {
    gt::SignalScope scope("both");
    r = gt::ones({4, 4});  // a copy on each worker
  }
  gt::Tensor y = gt::ones({4, 4}).neg();  // whole on one worker, where the neg fails
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  try {
    (r + y).sum().item();  // y is broadcast to the other worker first
  } catch (const gt::Error& e) {
    error = e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(error.find("neg"), std::string::npos) << "no error named the failed op: '" << error << "'";
  EXPECT_LT(seconds, 30.0) << "the other member waited for the collective timeout";

  // The same client goes on, collectives of the same group included.
  gt::Tensor s;
  {
    gt::SignalScope scope("rows");
    s = gt::ones({4, 4});
  }
  EXPECT_DOUBLE_EQ(s.sum().item(), 16.0);  // all-reduce over both workers
  EXPECT_DOUBLE_EQ((r * 2).sum().item(), 32.0);
  gt::Tensor whole = gt::ones({2, 2});
  EXPECT_DOUBLE_EQ((r.slice(0, 0, 2).slice(1, 0, 2) + whole).sum().item(), 8.0);  // broadcast of a good operand

  // So does another client.
  zmq::context_t context(1);
  gt::testing::RawClient other(context, Cluster().endpoint());
  other.Send({gt::testing::FromFloats(1, {1, 2, 3}), gt::testing::MakeInstruction(gt::Op::kAdd, 2, {2}, {1, 1})});
  EXPECT_EQ(gt::testing::FetchFloats(other, 2, 3), (std::vector<float>{2, 4, 6}));
  other.Bye();
}

// A worker started by the test itself, after the client's first batch.
class LateWorker {
 public:
  explicit LateWorker(const std::string& endpoint) {
    const std::string bin = gt::testing::BinDir() + "/gt-worker";
    // Port 0: a port probed free beforehand can be taken by a parallel test first.
    std::vector<std::string> args = {bin, "--connect", endpoint, "--id", "late-worker", "--metrics", "127.0.0.1:0"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, bin.c_str(), nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
  }
  ~LateWorker() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  bool started() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

TEST(ShardingBeforeWorkersTest, StageErrorsOfHeldInstructionsReachTheirClient) {
  gt::testing::ClusterOptions options;
  options.workers = 0;
  options.dispatcher_manifest = gt::testing::WriteTempFile(
      "sharding-late-dispatcher.yaml",
      "host: dispatcher\nid: dispatcher\nstages:\n  - name: sharding\n    plugin: sharding\n");
  gt::testing::ProcessCluster cluster(options);
  zmq::context_t context(1);
  gt::testing::RawClient client(context, cluster.endpoint());
  gt::Instruction configure = gt::testing::MakeInstruction(gt::Op::kConfigure, 1, {}, {});
  configure.signal = "far";
  configure.attrs.axes = {0};
  configure.attrs.shape = {0, 9};  // worker 9 will never exist
  gt::Instruction make = gt::testing::MakeInstruction(gt::Op::kZeros, 2, {1}, {});
  make.signal = "far";
  make.attrs.shape = {4, 4};
  client.Send({configure, make, gt::testing::FromFloats(3, {1, 2, 3})});
  // The dispatcher must have the batch before a worker exists.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::optional<double> received;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    received = gt::testing::MetricValue(gt::testing::HttpGet(cluster.dispatcher_metrics_port(), "/metrics"),
                                        "gt_host_messages_received_total");
  } while (!(received && *received >= 1) && std::chrono::steady_clock::now() < deadline);
  ASSERT_TRUE(received && *received >= 1) << "the dispatcher never got the batch";
  ASSERT_EQ(gt::testing::MetricValue(gt::testing::HttpGet(cluster.dispatcher_metrics_port(), "/metrics"),
                                     "gt_host_workers_connected"),
            0.0);
  LateWorker worker(cluster.endpoint());
  ASSERT_TRUE(worker.started());
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  gt::wire::Envelope done;
  EXPECT_EQ(gt::testing::FetchFloats(client, 3, 4, &done), (std::vector<float>{1, 2, 3}));
  bool named = false;
  for (const gt::wire::OpError& e : done.errors())
    named = named || (e.seq() == 2 && e.message().find("shard.workers[1]") != std::string::npos);
  EXPECT_TRUE(named) << "the stage error of the held creation did not reach its client: " << done.DebugString();
  client.Bye();
}

}  // namespace
