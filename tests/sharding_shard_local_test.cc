// Ops that stay on the shards through the real stack (sharding_test_fixture.h:
// a gt-dispatcher with the sharding modifier, four gt-worker processes):
// softmax, slice, select and cat along and across the sharded axis, reshapes
// and dimension moves, a select before the sharded axis shifting it; each
// against the same program on one worker. Part of sharding_test.
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

// Shard-local where the math allows: softmax, slice and select along an
// unsharded axis, cat of identically sharded operands along one. No
// collective runs and every worker gains exactly one tensor per result
// (its shard); a select along the sharded axis runs on the one shard that
// holds the index. The values match the one-worker run.
TEST_F(ShardingTest, SoftmaxSliceSelectCatStayOnTheShards) {
  gt::register_config("rows4", {.shard = gt::ShardConfig{0, {0, 1, 2, 3}}});
  auto inputs = [](const std::string& signal) {
    return In(signal, [] {
      return std::vector<gt::Tensor>{gt::randn({10, 6}, DType::kFloat32, 31), gt::randn({10, 4}, DType::kFloat32, 32)};
    });
  };
  auto local_ops = [](const gt::Tensor& x, const gt::Tensor& y) {
    return std::vector<gt::Tensor>{x.softmax(1),     x.log_softmax(-1), x.slice(1, 1, 5),
                                   x.select(1, 2),   gt::cat({x, y}, 1), gt::cat({y, x}, -1).softmax(1)};
  };
  std::vector<gt::Tensor> sharded_in = inputs("rows4");
  gt::sync();
  gt::sync();
  const std::vector<double> live_before = SettledLiveTensors();
  const double collectives_before = Sum(PerWorker("gt_collectives_total"));
  std::vector<gt::Tensor> sharded = local_ops(sharded_in[0], sharded_in[1]);
  gt::Tensor picked = sharded_in[0].select(0, 7);  // rows 6..8 live on the third shard
  gt::sync();
  gt::sync();
  // Each result is one shard per worker (the second cat's intermediate was freed
  // by the client already), plus the one selected row on one worker.
  std::vector<double> grown = Delta(SettledLiveTensors(), live_before);
  EXPECT_EQ(Sum(grown), 6.0 * kWorkers + 1) << ::testing::PrintToString(grown);
  for (double g : grown) EXPECT_GE(g, 6.0) << ::testing::PrintToString(grown);
  EXPECT_EQ(Sum(PerWorker("gt_collectives_total")), collectives_before) << "a shard-local op ran a collective";

  std::vector<gt::Tensor> whole_in = inputs("");
  std::vector<gt::Tensor> whole = local_ops(whole_in[0], whole_in[1]);
  for (size_t i = 0; i < whole.size(); ++i) ExpectClose(sharded[i], whole[i], "shard-local result " + std::to_string(i));
  ExpectClose(picked, whole_in[0].select(0, 7), "select along the sharded axis");
  // Along the sharded axis cat is assembled first; softmax and slices stay
  // on the shards (SoftmaxAndSlicesAlongTheShardedAxisStayOnTheShards).
  const gt::Tensor& x = sharded_in[0];
  const gt::Tensor& x1 = whole_in[0];
  ExpectClose(x.softmax(0), x1.softmax(0), "softmax along the shards");
  ExpectClose(x.slice(0, 2, 9), x1.slice(0, 2, 9), "slice along the shards");
  ExpectClose(gt::cat({x, x}, 0), gt::cat({x1, x1}, 0), "cat along the shards");
  ExpectClose(x.select(0, -1), x1.select(0, -1), "select of the last row");
  // Mixed layouts (sharded with whole) are assembled too.
  ExpectClose(gt::cat({x, whole_in[1]}, 1), gt::cat({x1, whole_in[1]}, 1), "cat of sharded and whole");
}

// Along the sharded axis: softmax agrees on the max and the sum by two
// all-reduces and stays sharded; a slice keeps the pieces of the range each
// shard holds, sharded over those shards, without any communication.
TEST_F(ShardingTest, SoftmaxAndSlicesAlongTheShardedAxisStayOnTheShards) {
  gt::register_config("rows4", {.shard = gt::ShardConfig{0, {0, 1, 2, 3}}});  // 10 rows: sizes 3, 3, 3, 1
  gt::Tensor x = In("rows4", [] { return std::vector<gt::Tensor>{gt::randn({10, 6}, DType::kFloat32, 51)}; })[0];
  gt::Tensor x1 = gt::randn({10, 6}, DType::kFloat32, 51);
  gt::sync();
  gt::sync();
  std::vector<double> live = SettledLiveTensors();
  double collectives = Sum(PerWorker("gt_collectives_total"));
  gt::Tensor soft = x.softmax(0), log_soft = x.log_softmax(0);
  gt::sync();
  gt::sync();
  std::vector<double> grown = Delta(SettledLiveTensors(), live);
  EXPECT_EQ(grown, std::vector<double>(kWorkers, 2.0)) << "one shard of each result per worker";
  EXPECT_EQ(Sum(PerWorker("gt_collectives_total")) - collectives, 2.0 * 2 * kWorkers) << "max and sum, 4 members each";
  ExpectClose(soft, x1.softmax(0), "softmax along the shards");
  ExpectClose(log_soft, x1.log_softmax(0), "log_softmax along the shards");

  gt::sync();  // the fetches' gathered temporaries are freed: count from here
  gt::sync();
  live = SettledLiveTensors();
  collectives = Sum(PerWorker("gt_collectives_total"));
  gt::Tensor every_third = x.slice(0, 1, 10, 3);  // rows 1, 4, 7: on workers 0, 1, 2
  gt::Tensor middle = x.slice(0, 2, 9);           // rows 2..8: on workers 0, 1, 2
  gt::sync();
  gt::sync();
  grown = Delta(SettledLiveTensors(), live);
  std::sort(grown.begin(), grown.end());  // scrapes come in process order, not worker order
  EXPECT_EQ(grown, (std::vector<double>{0, 2, 2, 2})) << "two pieces on each of the three workers holding rows";
  EXPECT_EQ(Sum(PerWorker("gt_collectives_total")), collectives) << "a slice ran a collective";
  ExpectClose(every_third, x1.slice(0, 1, 10, 3), "every third row");
  ExpectClose(middle, x1.slice(0, 2, 9), "rows 2..8");
  // Results with uneven shards keep working: elementwise with each other, reductions, fetches.
  ExpectClose((middle * 2.0).sum({0}), (x1.slice(0, 2, 9) * 2.0).sum({0}), "sum over uneven shards");
  ExpectClose(x.slice(0, 4, 5), x1.slice(0, 4, 5), "one row: whole on its worker");
  // Positions: along the other axis per shard; along the sharded one on the whole axis.
  EXPECT_EQ(x.argmax(1).to_vector<int64_t>(), x1.argmax(1).to_vector<int64_t>());
  EXPECT_EQ(x.argmin(0).to_vector<int64_t>(), x1.argmin(0).to_vector<int64_t>());
  EXPECT_EQ(x.argmax().item(), x1.argmax().item());
}

// Reshapes that keep each shard's rows whole, unsqueeze, squeeze of another
// dim and permute stay on the shards (no collective); a reshape that would
// cut a shard's rows is assembled, and right either way.
TEST_F(ShardingTest, ReshapesAndDimensionMovesStayOnTheShards) {
  gt::register_config("rows4", {.shard = gt::ShardConfig{0, {0, 1, 2, 3}}});  // 8 rows: sizes 2 each
  gt::Tensor x = In("rows4", [] { return std::vector<gt::Tensor>{gt::randn({8, 3, 4}, DType::kFloat32, 61)}; })[0];
  gt::Tensor x1 = gt::randn({8, 3, 4}, DType::kFloat32, 61);
  gt::sync();
  gt::sync();
  const double collectives = Sum(PerWorker("gt_collectives_total"));
  std::vector<gt::Tensor> local = {x.reshape({24, 4}), x.reshape({4, 24}), x.reshape({24, 4}).reshape({8, 3, 4}),
                                   x.reshape({1, 96}), x.unsqueeze(0), x.unsqueeze(-1).squeeze(3),
                                   x.permute({2, 0, 1})};
  gt::sync();
  gt::sync();
  EXPECT_EQ(Sum(PerWorker("gt_collectives_total")), collectives) << "a shard-local reshape ran a collective";
  std::vector<gt::Tensor> want = {x1.reshape({24, 4}), x1.reshape({4, 24}), x1.reshape({24, 4}).reshape({8, 3, 4}),
                                  x1.reshape({1, 96}), x1.unsqueeze(0), x1.unsqueeze(-1).squeeze(3),
                                  x1.permute({2, 0, 1})};
  for (size_t i = 0; i < local.size(); ++i) ExpectClose(local[i], want[i], "shard-local move " + std::to_string(i));
  // The moved axis is where the next op finds it: a reduction over it all-reduces.
  ExpectClose(x.permute({2, 0, 1}).sum({1}), x1.permute({2, 0, 1}).sum({1}), "sum over the permuted shard axis");
  ExpectClose(x.reshape({24, 4}).mean({0}), x1.reshape({24, 4}).mean({0}), "mean over the merged shard axis");
  // Rows cut mid-shard (2 rows of 12 per shard into rows of 32): assembled, still right.
  ExpectClose(x.reshape({3, 32}), x1.reshape({3, 32}), "reshape across shard boundaries");
}

// A select that drops a dim in front of the sharded one shifts the shard
// axis: the result is sharded on axis 0, and a reduction over it all-reduces.
TEST_F(ShardingTest, SelectBeforeTheShardedAxisShiftsIt) {
  gt::register_config("cols2", {.shard = gt::ShardConfig{1, {1, 2}}});
  gt::Tensor z = In("cols2", [] { return std::vector<gt::Tensor>{gt::randn({3, 8, 2}, DType::kFloat32, 41)}; })[0];
  gt::Tensor z1 = gt::randn({3, 8, 2}, DType::kFloat32, 41);
  ExpectClose(z.select(0, 1), z1.select(0, 1), "select dim 0");
  ExpectClose(z.select(0, 2).sum({0}), z1.select(0, 2).sum({0}), "sum over the shifted shard axis");
  ExpectClose(z.select(2, 0).softmax(0), z1.select(2, 0).softmax(0), "select after the shard axis, softmax along it");
  ExpectClose(z.slice(2, 1, 2).log_softmax(2), z1.slice(2, 1, 2).log_softmax(2), "slice then log_softmax");
}

}  // namespace
