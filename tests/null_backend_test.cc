// The null backend (plugins/null) behind real gt-dispatcher and gt-worker
// processes: a worker manifest loads it, it answers fetches with zeros of
// the shape gt's shape rules give (the shapes PyTorch gives: [3, 4] @
// [4, 5] is [3, 5]), refuses what a real backend refuses, forgets what is
// freed, and the capacity benchmark built on it runs one short point.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cluster.h"
#include "gt/op_attrs.h"

namespace gt::testing {
namespace {

ClusterOptions NullCluster(int workers) {
  ClusterOptions options;
  options.workers = workers;
  options.dispatcher_manifest = WriteTempFile("null-dispatcher.yaml", "host: dispatcher\nstages: []\n");
  options.worker_manifest = WriteTempFile("null-worker.yaml", "host: worker\nbackend:\n  plugin: null_backend\n");
  return options;
}

Instruction Create(Op op, TensorId id, Shape shape, DType dtype = DType::kFloat32) {
  Instruction inst = MakeInstruction(op, id, {id}, {});
  inst.attrs.shape = std::move(shape);
  inst.attrs.dtype = dtype;
  return inst;
}

double LiveTensors(const ProcessCluster& cluster) {
  return MetricValue(HttpGet(cluster.worker_metrics_ports().at(0), "/metrics"), "gt_worker_live_tensors").value_or(-1);
}

struct Fetched {
  wire::Envelope data;
  std::string bytes;
};

// Fetches `id` (a sync point); nullopt when no DATA came.
std::optional<Fetched> Fetch(RawClient& client, TensorId id, uint64_t seq, wire::Envelope* done) {
  client.Send({MakeInstruction(Op::kFetch, seq, {}, {id})});
  std::vector<std::pair<wire::Envelope, std::string>> data;
  std::optional<wire::Envelope> sync = client.Sync(&data);
  if (sync && done) *done = *sync;
  if (!sync || data.empty()) return std::nullopt;
  return Fetched{data[0].first, data[0].second};
}

class NullBackendTest : public ::testing::Test {
 protected:
  NullBackendTest() : cluster_(NullCluster(1)) {}
  void SetUp() override { ASSERT_TRUE(cluster_.WaitForWorkers(1)) << "a worker with backend: {plugin: null} registers"; }

  ProcessCluster cluster_;
  zmq::context_t context_{1};
};

TEST_F(NullBackendTest, FetchAnswersZerosOfTheInferredShape) {
  RawClient client(context_, cluster_.endpoint());
  Instruction sum = MakeInstruction(Op::kSum, 4, {4}, {3});
  sum.attrs.axes = {1};
  client.Send({Create(Op::kOnes, 1, {3, 4}), Create(Op::kRandn, 2, {4, 5}), MakeInstruction(Op::kMatmul, 3, {3}, {1, 2}),
               sum, Create(Op::kZeros, 5, {2, 2}, DType::kInt64)});
  wire::Envelope done;
  std::optional<Fetched> product = Fetch(client, 3, 10, &done);
  ASSERT_TRUE(product.has_value());
  EXPECT_EQ(done.errors_size(), 0) << done.DebugString();
  EXPECT_EQ(std::vector<int64_t>(product->data.shape().begin(), product->data.shape().end()),
            (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(product->data.dtype(), static_cast<uint32_t>(DType::kFloat32));
  EXPECT_EQ(product->bytes, std::string(3 * 5 * sizeof(float), '\0'));

  std::optional<Fetched> row_sums = Fetch(client, 4, 11, nullptr);
  ASSERT_TRUE(row_sums.has_value());
  EXPECT_EQ(std::vector<int64_t>(row_sums->data.shape().begin(), row_sums->data.shape().end()),
            (std::vector<int64_t>{3}));
  std::optional<Fetched> integers = Fetch(client, 5, 12, nullptr);
  ASSERT_TRUE(integers.has_value());
  EXPECT_EQ(integers->data.dtype(), static_cast<uint32_t>(DType::kInt64));
  EXPECT_EQ(integers->bytes.size(), 4 * sizeof(int64_t));
}

TEST_F(NullBackendTest, RefusesMismatchedShapesNamingTheOp) {
  RawClient client(context_, cluster_.endpoint());
  client.Send({Create(Op::kOnes, 1, {3, 4}), Create(Op::kOnes, 2, {4, 5}), MakeInstruction(Op::kAdd, 3, {3}, {1, 2})});
  std::optional<wire::Envelope> done = client.Sync();
  ASSERT_TRUE(done.has_value());
  ASSERT_EQ(done->errors_size(), 1) << done->DebugString();
  EXPECT_EQ(done->errors(0).seq(), 3u);
  EXPECT_NE(done->errors(0).message().find("[3, 4]"), std::string::npos) << done->errors(0).message();
}

TEST_F(NullBackendTest, FreeAndGoodbyeForgetTensors) {
  {
    RawClient client(context_, cluster_.endpoint());
    client.Send({Create(Op::kZeros, 1, {8}), Create(Op::kZeros, 2, {8}), Create(Op::kZeros, 3, {8})});
    ASSERT_TRUE(client.Sync().has_value());
    EXPECT_EQ(LiveTensors(cluster_), 3);
    client.Send({MakeFree(0, 4, {1, 2})});
    ASSERT_TRUE(client.Sync().has_value());
    EXPECT_EQ(LiveTensors(cluster_), 1);
    client.Bye();
  }
  // Once the dispatcher has dropped the session, its drop is on its way to
  // the worker ahead of anything a later client sends there.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (MetricValue(HttpGet(cluster_.dispatcher_metrics_port(), "/metrics"), "gt_host_clients_connected") != 0.0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  RawClient other(context_, cluster_.endpoint());
  other.Send({Create(Op::kZeros, 1, {8})});
  ASSERT_TRUE(other.Sync().has_value());
  EXPECT_EQ(LiveTensors(cluster_), 1) << "the first client's last tensor went with its goodbye";
}

// The benchmark itself, one short point, so that it cannot rot unnoticed.
TEST(CapacityBench, RunsOnePoint) {
  const std::string csv = TempPath("capacity.csv");
  const std::string command = BinDir() + "/gt-bench-capacity --clients 2 --workers 1 --seconds 0.5 --warmup 0.2 --csv " +
                              csv + " > " + TempPath("capacity.log") + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(csv);
  std::string header, row;
  ASSERT_TRUE(std::getline(in, header) && std::getline(in, row)) << "no result row in " << csv;
  std::vector<std::string> fields;
  std::stringstream cells(row);
  for (std::string cell; std::getline(cells, cell, ',');) fields.push_back(cell);
  ASSERT_GE(fields.size(), 11u) << row;
  EXPECT_EQ(fields[0], "2");
  EXPECT_EQ(fields[1], "1");
  EXPECT_GT(std::stod(fields[2]), 0) << "routed instructions per second, in: " << row;
  EXPECT_GT(std::stoul(fields[5]), 0u) << "syncs answered, in: " << row;
  EXPECT_EQ(fields[10], "\"\"") << "an error in: " << row;
}

}  // namespace
}  // namespace gt::testing
