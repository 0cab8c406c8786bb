// Signals and sharding through the real stack: a gt-dispatcher running the
// sharding modifier, four gt-worker processes whose collectives go worker to
// worker over Gloo, and the C++ client. Every strategy is checked against
// the same program run without a signal scope (whole, on one worker), where
// the tensors live is checked through the workers' live-tensor gauges and
// collective counters, and the dispatcher's byte counter shows that
// collective bytes never pass through it.
// Softmax, slices, reshapes and selects that stay on the shards are in
// sharding_shard_local_test.cc; the fixture in sharding_test_fixture.h. Both
// make the suite sharding_test.
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

#include "sharding_test_fixture.h"

namespace {
using namespace sharding_test;

TEST_F(ShardingTest, DataParallelMatchesOneWorker) {
  gt::register_config("dp", {.shard = gt::ShardConfig{0, {0, 1, 2, 3}}});
  gt::register_config("weights", {.replicated = true});
  auto program = [](const std::string& data, const std::string& weights) {
    gt::Tensor x = In(data, [] { return std::vector<gt::Tensor>{gt::randn({130, 64}, DType::kFloat32, 11)}; })[0];
    gt::Tensor w = In(weights, [] { return std::vector<gt::Tensor>{gt::randn({64, 16}, DType::kFloat32, 12)}; })[0];
    gt::Tensor b = gt::randn({16}, DType::kFloat32, 13);
    gt::Tensor y = (x.matmul(w) + b).relu() * 0.5;
    return std::vector<gt::Tensor>{y, y.sum(), y.mean(), y.sum({1}), y.max({0}), y.mean({0}), y.min(), x - x.mean({0})};
  };
  std::vector<gt::Tensor> sharded = program("dp", "weights");
  std::vector<gt::Tensor> whole = program("", "");
  for (size_t i = 0; i < whole.size(); ++i) ExpectClose(sharded[i], whole[i], "result " + std::to_string(i));
}

TEST_F(ShardingTest, ShardsLiveOnTheirWorkers) {
  gt::register_config("dp4", {.shard = gt::ShardConfig{0, {}}});  // every live worker
  // A worker updates its gauges at the end of each batch, after it answered
  // the batch's sync (and a second sync reaches only the workers touched
  // since the first): SettledLiveTensors waits for the gauges to stop moving.
  gt::sync();
  std::vector<double> before = SettledLiveTensors();
  gt::Tensor x = In("dp4", [] { return std::vector<gt::Tensor>{gt::zeros({10, 3})}; })[0];  // 3, 3, 3, 1 rows
  gt::sync();
  gt::sync();
  EXPECT_EQ(Delta(SettledLiveTensors(), before), std::vector<double>(kWorkers, 1.0));
  std::vector<float> values = (x + 2).to_vector<float>();
  EXPECT_EQ(values, std::vector<float>(30, 2.0f));
  x = gt::Tensor();
  gt::sync();
  gt::sync();
  EXPECT_EQ(Delta(SettledLiveTensors(), before), std::vector<double>(kWorkers, 0.0))
      << "before: " << ::testing::PrintToString(before)
      << " now: " << ::testing::PrintToString(PerWorker("gt_worker_live_tensors"));
}

TEST_F(ShardingTest, FromDataIsSplitInOrder) {
  gt::register_config("rows3", {.shard = gt::ShardConfig{0, {2, 0, 1}}});
  std::vector<float> values(7 * 2);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  gt::Tensor x = In("rows3", [&] { return std::vector<gt::Tensor>{gt::tensor(values, {7, 2})}; })[0];
  EXPECT_EQ(x.to_vector<float>(), values);
  EXPECT_EQ((x * 2).sum({0}).to_vector<float>(), (std::vector<float>{84, 98}));
}

TEST_F(ShardingTest, MatmulStrategiesMatchOneWorker) {
  gt::register_config("rows", {.shard = gt::ShardConfig{0, {0, 1, 2, 3}}});
  gt::register_config("cols", {.shard = gt::ShardConfig{1, {1, 3}}});
  gt::register_config("rows13", {.shard = gt::ShardConfig{0, {1, 3}}});
  auto make = [](const std::string& signal, gt::Shape shape, uint64_t seed) {
    return In(signal, [&] { return std::vector<gt::Tensor>{gt::randn(shape, DType::kFloat32, seed)}; })[0];
  };
  gt::Tensor a = make("", {48, 40}, 1), b = make("", {40, 24}, 2);
  gt::Tensor want = a.matmul(b);
  // Both row-sharded: B all-gathered.
  ExpectClose(make("rows", {48, 40}, 1).matmul(make("rows", {40, 24}, 2)), want, "both sharded");
  // Inner dimension sharded: partial products, all-reduce.
  ExpectClose(make("cols", {48, 40}, 1).matmul(make("rows13", {40, 24}, 2)), want, "inner sharded");
  // A inner-sharded, B whole: B cut to match.
  ExpectClose(make("cols", {48, 40}, 1).matmul(b), want, "inner sharded, B whole");
  // B column-sharded: A replicated.
  ExpectClose(a.matmul(make("cols", {40, 24}, 2)), want, "column sharded");
  std::vector<double> gathers = PerWorker("gt_collectives_total", {{"collective", "all_gather"}});
  std::vector<double> reduces = PerWorker("gt_collectives_total", {{"collective", "all_reduce"}});
  double g = 0, r = 0;
  for (double v : gathers) g += v;
  for (double v : reduces) r += v;
  EXPECT_GT(g, 0) << "no all-gather ran on the workers";
  EXPECT_GT(r, 0) << "no all-reduce ran on the workers";
}

TEST_F(ShardingTest, ReshardingBetweenWorkerSets) {
  gt::register_config("left", {.shard = gt::ShardConfig{0, {0, 1}}});
  gt::register_config("right", {.shard = gt::ShardConfig{1, {2, 3}}});
  gt::Tensor x = In("left", [] { return std::vector<gt::Tensor>{gt::randn({6, 8}, DType::kFloat32, 5)}; })[0];
  gt::Tensor y = In("right", [] { return std::vector<gt::Tensor>{gt::randn({6, 8}, DType::kFloat32, 6)}; })[0];
  gt::Tensor x1 = gt::randn({6, 8}, DType::kFloat32, 5), y1 = gt::randn({6, 8}, DType::kFloat32, 6);
  ExpectClose(x + y, x1 + y1, "left + right");
  ExpectClose((x * y).transpose(0, 1), (x1 * y1).transpose(0, 1), "whole fallback");
}

TEST_F(ShardingTest, CollectiveBytesBypassTheDispatcher) {
  gt::register_config("inner", {.shard = gt::ShardConfig{1, {0, 1}}});
  gt::register_config("outer", {.shard = gt::ShardConfig{0, {0, 1}}});
  gt::sync();
  const double received_before = Dispatcher("gt_host_bytes_received_total");
  std::vector<double> reduced_before = PerWorker("gt_collective_bytes_total", {{"collective", "all_reduce"}});
  gt::Tensor a = In("inner", [] { return std::vector<gt::Tensor>{gt::ones({1024, 2048})}; })[0];
  gt::Tensor b = In("outer", [] { return std::vector<gt::Tensor>{gt::ones({2048, 1024})}; })[0];
  // Partial [1024, 1024] products (4 MiB each): a pending sum, all-reduced
  // when the relu needs its value.
  gt::Tensor c = a.matmul(b).relu();
  gt::sync();
  const double tensor_bytes = 1024.0 * 1024 * 4;
  std::vector<double> reduced = Delta(PerWorker("gt_collective_bytes_total", {{"collective", "all_reduce"}}), reduced_before);
  double total = 0;
  for (double v : reduced) total += v;
  EXPECT_GE(total, 2 * tensor_bytes) << "the all-reduce did not run on two workers";
  EXPECT_LT(Dispatcher("gt_host_bytes_received_total") - received_before, tensor_bytes)
      << "collective bytes passed through the dispatcher";
  EXPECT_DOUBLE_EQ(c.sum().item(), 2048.0 * 1024 * 1024);
}

TEST_F(ShardingTest, ConfigErrorsNameTheSignalAndField) {
  gt::register_config("beyond", {.shard = gt::ShardConfig{0, {0, 9}}});
  gt::register_config("axis3", {.shard = gt::ShardConfig{3, {0, 1}}});
  auto error_of = [](const std::string& signal) -> std::string {
    try {
      gt::Tensor t = In(signal, [] { return std::vector<gt::Tensor>{gt::zeros({4, 4})}; })[0];
      gt::sync();
    } catch (const gt::Error& e) {
      return e.what();
    }
    return "";
  };
  std::string beyond = error_of("beyond");
  EXPECT_NE(beyond.find("signal 'beyond'"), std::string::npos) << beyond;
  EXPECT_NE(beyond.find("shard.workers[1]"), std::string::npos) << beyond;
  std::string axis = error_of("axis3");
  EXPECT_NE(axis.find("signal 'axis3'"), std::string::npos) << axis;
  EXPECT_NE(axis.find("shard.axis"), std::string::npos) << axis;
  // Wrong in itself: refused at once.
  try {
    gt::register_config("twice", {.shard = gt::ShardConfig{0, {1, 1}}});
    ADD_FAILURE() << "a repeated worker was accepted";
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("twice"), std::string::npos) << e.what();
  }
  // The session still works.
  EXPECT_EQ(gt::ones({2}).sum().item(), 2.0);
}

TEST_F(ShardingTest, LoadConfigReportsEveryProblemWithItsLine) {
  const std::string good = gt::testing::WriteTempFile(
      "signals.yaml", "layer1:\n  shard:\n    axis: 0\n    workers: [0, 1]\n  backward: layer1_bwd\n"
                      "layer1_bwd:\n  shard: {axis: 0, workers: [2, 3]}\n  compile: true\n");
  EXPECT_EQ(gt::load_config(good), (std::vector<std::string>{"layer1", "layer1_bwd"}));
  ASSERT_TRUE(gt::get_config("layer1").has_value());
  EXPECT_EQ(gt::get_config("layer1")->backward, "layer1_bwd");
  gt::Tensor x = In("layer1", [] { return std::vector<gt::Tensor>{gt::ones({4, 2})}; })[0];
  EXPECT_EQ(x.sum().item(), 8.0);
  const std::string bad = gt::testing::WriteTempFile(
      "bad-signals.yaml", "a:\n  shard: {axis: x, workers: [0]}\nb:\n  colour: red\nc:\n  backward: nowhere\n");
  try {
    gt::load_config(bad);
    ADD_FAILURE() << "bad config accepted";
  } catch (const gt::Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("3 problems"), std::string::npos) << what;
    EXPECT_NE(what.find(":6: c.backward: unknown signal 'nowhere'"), std::string::npos) << what;
    EXPECT_NE(what.find(":2: a.shard.axis"), std::string::npos) << what;
    EXPECT_NE(what.find(":4: b.colour"), std::string::npos) << what;
  }
}

// The seeds' pipeline: forward on workers [0, 1], the gradient computation
// under the backward signal on [2, 3]. The gradients equal the one-worker
// run's; the forward's all-reduce (the mean) runs on two workers and the
// backward's (the weight and bias gradients sum over the batch) on the two
// others. (The metrics ports are in port order, not worker-index order, so
// the check is on the two sets being disjoint.)
TEST_F(ShardingTest, BackwardSignalRunsGradientsOnItsWorkers) {
  gt::register_config("stage1_bwd", {.shard = gt::ShardConfig{0, {2, 3}}});
  gt::register_config("stage1", {.shard = gt::ShardConfig{0, {0, 1}}, .backward = "stage1_bwd"});
  const std::map<std::string, std::string> all_reduce = {{"collective", "all_reduce"}};
  // Workers publish their metrics after the batch that answered a sync: poll
  // until `n` workers show new all-reduces since `before` (or 5 s pass).
  auto reduces_since = [&](const std::vector<double>& before, int n) {
    std::vector<double> d;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    do {
      gt::sync();
      d = Delta(PerWorker("gt_collectives_total", all_reduce), before);
    } while (std::count_if(d.begin(), d.end(), [](double v) { return v > 0; }) < n &&
             std::chrono::steady_clock::now() < deadline);
    return d;
  };
  auto run = [&](const std::string& signal, std::vector<double>* forward, std::vector<double>* backward) {
    gt::Tensor w = gt::randn({16, 8}, DType::kFloat32, 21).requires_grad_();
    gt::Tensor b = gt::randn({8}, DType::kFloat32, 22).requires_grad_();
    gt::Tensor loss;
    gt::sync();
    std::vector<double> start = PerWorker("gt_collectives_total", all_reduce);
    {
      std::optional<gt::SignalScope> scope;
      if (!signal.empty()) scope.emplace(signal);
      gt::Tensor x = gt::randn({12, 16}, DType::kFloat32, 23);
      loss = ((x.matmul(w) + b).tanh() * 0.5).mean();
    }
    // The mean over the split rows, and the weight and bias gradients (sums
    // over them), are pending sums until their values are needed: here.
    if (forward) {
      (void)loss.item();
      *forward = reduces_since(start, 2);
    }
    std::vector<double> before = PerWorker("gt_collectives_total", all_reduce);
    loss.backward();
    if (backward) {
      gt::Tensor used = w.grad() * w.grad() + (b.grad() * b.grad()).sum();
      *backward = reduces_since(before, 2);
    }
    return std::make_tuple(w.grad(), b.grad(), loss);
  };
  std::vector<double> forward, backward;
  auto [gw, gb, loss] = run("stage1", &forward, &backward);
  auto [gw1, gb1, loss1] = run("", nullptr, nullptr);
  ExpectClose(loss, loss1, "loss");
  ExpectClose(gw, gw1, "weight grad");
  ExpectClose(gb, gb1, "bias grad");
  int forward_workers = 0, backward_workers = 0;
  for (size_t i = 0; i < forward.size(); ++i) {
    forward_workers += forward[i] > 0;
    backward_workers += backward[i] > 0;
    EXPECT_FALSE(forward[i] > 0 && backward[i] > 0)
        << "a forward worker ran a backward all-reduce: forward " << ::testing::PrintToString(forward) << " backward "
        << ::testing::PrintToString(backward);
  }
  EXPECT_EQ(forward_workers, 2) << ::testing::PrintToString(forward);
  EXPECT_EQ(backward_workers, 2) << ::testing::PrintToString(backward);
  bool found = false;
  for (const gt::TapeEntry& e : gt::tape()) {
    if (e.output != loss.id()) continue;
    found = true;
    EXPECT_EQ(e.signal, "stage1");
    EXPECT_EQ(e.backward_signal, "stage1_bwd");
  }
  EXPECT_TRUE(found) << "the loss is not on the tape";
}

// A client that leaves takes its state in the sharding stage with it: its
// configs and placement records are gone (the dispatcher's gauges), and the
// workers freed its shards.
TEST_F(ShardingTest, DepartedClientStateIsDropped) {
  using gt::Instruction;
  using gt::Op;
  gt::sync();
  gt::sync();
  const double clients_before = Dispatcher("gt_sharding_clients");
  const double tensors_before = Dispatcher("gt_sharding_tracked_tensors");
  const std::vector<double> live_before = SettledLiveTensors();
  zmq::context_t context(1);
  {
    gt::testing::RawClient leaver(context, Cluster().endpoint());
    Instruction configure = gt::testing::MakeInstruction(Op::kConfigure, 1, {}, {});
    configure.signal = "leaving";
    configure.attrs.axes = {0};
    configure.attrs.shape = {0, 1, 2, 3};
    Instruction make = gt::testing::MakeInstruction(Op::kZeros, 2, {1}, {});
    make.signal = "leaving";
    make.attrs.shape = {8, 4};
    Instruction twice = gt::testing::MakeInstruction(Op::kMul, 3, {2}, {1});
    twice.attrs.scalar = 2;
    twice.attrs.scalar_side = gt::ScalarSide::kRight;
    leaver.Send({configure, make, twice});
    ASSERT_TRUE(leaver.Sync().has_value());
    EXPECT_EQ(Dispatcher("gt_sharding_clients"), clients_before + 1);
    EXPECT_EQ(Dispatcher("gt_sharding_tracked_tensors"), tensors_before + 2);
    leaver.Bye();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((Dispatcher("gt_sharding_clients") != clients_before ||
          Dispatcher("gt_sharding_tracked_tensors") != tensors_before) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(Dispatcher("gt_sharding_clients"), clients_before);
  EXPECT_EQ(Dispatcher("gt_sharding_tracked_tensors"), tensors_before);
  std::vector<double> live;
  do {
    gt::sync();
    gt::sync();
    live = SettledLiveTensors();
  } while (live != live_before && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(live, live_before) << "the departed client's shards are still on the workers";
}

TEST_F(ShardingTest, UnknownBackwardSignalIsNamedAtScopeUse) {
  gt::register_config("fwd_typo", {.shard = gt::ShardConfig{0, {0, 1}}, .backward = "bwd_tpyo"});
  try {
    gt::SignalScope scope("fwd_typo");
    ADD_FAILURE() << "the scope opened";
  } catch (const gt::Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("signal 'fwd_typo': backward: unknown signal 'bwd_tpyo'"), std::string::npos) << what;
  }
  try {
    gt::SignalScope scope("plain", {.backward = "nowhere"});
    ADD_FAILURE() << "the scope opened";
  } catch (const gt::Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("signal 'plain': backward: unknown signal 'nowhere'"), std::string::npos) << what;
  }
  EXPECT_EQ(gt::current_signal(), "");
}

}  // namespace
