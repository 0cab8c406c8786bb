// The sharding stage's strategies for transformer ops, driven in-process (no
// hosts, no LibTorch; sharding_strategy_fixture.h): batched matmul cut on a
// batch dim, reshapes into heads, tril's diagonal per shard, index_add's
// partial sums, cat with constants, adam_step where its state lives, zeros
// remade instead of gathered. Part of sharding_strategy_test.
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gt/op_attrs.h"
#include "sharding_strategy_fixture.h"

namespace gt::sharding {
namespace {
using namespace strategy_test;

TEST_F(ShardingStrategyTest, BatchedMatmulCutOnABatchDimIsShardLocal) {
  Configure("heads", {1}, {0, 1}, false);
  const std::vector<TensorId> q = Pieces(Randn(1, {2, 4, 3, 5}, "heads"));
  const std::vector<TensorId> k = Pieces(Randn(2, {2, 4, 5, 3}, "heads"));
  const std::vector<Instruction> out = Send(Make(Op::kMatmul, {3}, {1, 2}));
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"matmul@0", "matmul@1"}));
  EXPECT_EQ(out[1].operands, (std::vector<TensorId>{q[1], k[1]}));
  // A [T, T] operand broadcasts over the batch dims: copied, not cut.
  Randn(4, {3, 3}, "rep");
  EXPECT_EQ(Summary(Send(Make(Op::kMatmul, {5}, {3, 4}))), (std::vector<std::string>{"matmul@0", "matmul@1"}));
}

// [B, T, H*d] cut on features (whole heads per shard) <-> [B, T, H, d] cut on heads.
TEST_F(ShardingStrategyTest, ReshapeSplittingTheShardedDimIntoHeadsIsShardLocal) {
  Configure("features", {2}, {0, 1}, false);
  Randn(1, {2, 3, 8}, "features");
  Instruction heads = Make(Op::kReshape, {2}, {1});
  heads.attrs.shape = {2, 3, 4, 2};
  const std::vector<Instruction> out = Send(heads);
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"reshape@0", "reshape@1"}));
  EXPECT_EQ(out[0].attrs.shape, (Shape{2, 3, 2, 2})) << "two of the four heads";
  Instruction back = Make(Op::kReshape, {3}, {2});
  back.attrs.shape = {6, 8};  // merges the dims before the cut: not whole rows of anything here
  EXPECT_EQ(CountOp(Send(back), Op::kAllGather), 2u) << "[6, 8] cannot keep [B, T] shards' ranges";
  Instruction merged = Make(Op::kReshape, {4}, {2});
  merged.attrs.shape = {2, 3, 8};
  const std::vector<Instruction> again = Send(merged);
  ASSERT_EQ(Summary(again), (std::vector<std::string>{"reshape@0", "reshape@1"}));
  EXPECT_EQ(again[1].attrs.shape, (Shape{2, 3, 4}));
}

// tril of a matrix cut on rows: shard r keeps what the whole would, its
// diagonal moved by its first row; on columns, moved back by its first column.
TEST_F(ShardingStrategyTest, TrilMovesTheDiagonalByEachShardsOffset) {
  Randn(1, {5, 5}, "rows");  // rows [0, 3) and [3, 5)
  Instruction tril = Make(Op::kTril, {2}, {1});
  tril.attrs.axes = {-1};
  const std::vector<Instruction> out = Send(tril);
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"tril@0", "tril@1"}));
  EXPECT_EQ(out[0].attrs.axes, (std::vector<int64_t>{-1}));
  EXPECT_EQ(out[1].attrs.axes, (std::vector<int64_t>{2}));
  Randn(3, {5, 5}, "cols");
  Instruction triu = Make(Op::kTriu, {4}, {3});
  triu.attrs.axes = {1};
  const std::vector<Instruction> cols = Send(triu);
  ASSERT_EQ(Summary(cols), (std::vector<std::string>{"triu@0", "triu@1"}));
  EXPECT_EQ(cols[1].attrs.axes, (std::vector<int64_t>{-2}));
}

// An embedding's gradient under data parallelism: the index and the source
// cut on the batch, the base whole on worker 0. Worker 0 adds into the base,
// worker 1 into zeros it makes, and one all-reduce sums them.
TEST_F(ShardingStrategyTest, IndexAddWithACutIndexLeavesPartialsForOneAllReduce) {
  Instruction base = Make(Op::kRandn, {1}, {});
  base.attrs.shape = {10, 3};
  Send(base);  // no scope: whole on the client's worker
  Instruction index = Make(Op::kZeros, {2}, {});
  index.attrs.shape = {4};
  index.attrs.dtype = DType::kInt64;
  index.signal = "rows";
  Send(index);
  Randn(3, {4, 3}, "rows");
  Instruction add = Make(Op::kIndexAdd, {4}, {1, 2, 3});
  add.attrs.axes = {0};
  const std::vector<std::string> summary = Summary(Send(add));
  ASSERT_GE(summary.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(summary.begin(), summary.begin() + 3),
            (std::vector<std::string>{"zeros@1", "index_add@0", "index_add@1"}));
  EXPECT_EQ(std::count(summary.begin(), summary.end(), "broadcast@0"), 0);
  EXPECT_EQ(std::count(summary.begin(), summary.end(), "all_reduce@0"), 0) << "a pending sum";
  const std::vector<std::string> fetch = Summary(Send(Make(Op::kFetch, {}, {4})));
  ASSERT_GE(fetch.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(fetch.begin(), fetch.begin() + 3),
            (std::vector<std::string>{"all_reduce@0", "all_reduce@1", "fetch@0"}));
}

// An embedding's gradient in data parallelism: a pending sum (summed over
// the split batch) added into zeros at positions every member holds is a
// pending sum itself: each member adds its addend into zeros of its own.
TEST_F(ShardingStrategyTest, IndexAddOfAPendingSumIntoZerosStaysPending) {
  Pieces(Randn(1, {4, 6}, "cols"));
  Pieces(Randn(2, {6, 3}, "rows"));
  const std::vector<Instruction> product = Send(Make(Op::kMatmul, {3}, {1, 2}));  // pending [4, 3]
  Instruction zeros = Make(Op::kZeros, {4}, {});
  zeros.attrs.shape = {10, 3};
  Send(zeros);  // no scope: whole on the client's worker, and a constant
  Instruction positions = Make(Op::kOnes, {5}, {});
  positions.attrs.shape = {4};
  positions.attrs.dtype = DType::kInt64;
  positions.signal = "rep";  // a copy on each member
  Send(positions);
  Instruction add = Make(Op::kIndexAdd, {6}, {4, 5, 3});
  add.attrs.axes = {0};
  const std::vector<Instruction> out = Send(add);
  EXPECT_EQ(Summary(out), (std::vector<std::string>{"zeros@0", "index_add@0", "zeros@1", "index_add@1", "free@0",
                                                    "free@1"}))
      << "no collective: zeros made on each member (and freed after)";
  EXPECT_EQ(out[1].operands.back(), product[0].results[0]);
  EXPECT_EQ(out[3].operands.back(), product[1].results[0]);
  // Its value is summed once, when needed.
  const std::vector<std::string> fetch = Summary(Send(Make(Op::kFetch, {}, {6})));
  ASSERT_GE(fetch.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(fetch.begin(), fetch.begin() + 3),
            (std::vector<std::string>{"all_reduce@0", "all_reduce@1", "fetch@0"}));
}

// A slice's gradient: zeros around the sharded gradient, joined along the
// sliced dim. The zeros (whole, unwritten) are made in pieces beside the
// shards, and the cat stays shard-local.
TEST_F(ShardingStrategyTest, CatOfAShardAndWholeZerosIsShardLocal) {
  const std::vector<TensorId> g = Pieces(Randn(1, {4, 3}, "rows"));
  Instruction zeros = Make(Op::kZeros, {2}, {});
  zeros.attrs.shape = {4, 2};
  Send(zeros);  // no scope: whole on the client's worker
  Instruction cat = Make(Op::kCat, {3}, {2, 1});
  cat.attrs.axes = {1};
  const std::vector<Instruction> out = Send(cat);
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"zeros@0", "zeros@1", "cat@0", "cat@1", "free@0", "free@1"}));
  EXPECT_EQ(out[0].attrs.shape, (Shape{2, 2}));
  EXPECT_EQ(out[3].operands, (std::vector<TensorId>{out[1].results.at(0), g[1]}));
}

// An optimizer step writes its parameter and both moment estimates where
// they live: laid out alike it runs shard by shard (the gradient cut like
// the parameter); state laid out otherwise is refused, not written as a copy.
TEST_F(ShardingStrategyTest, AdamStepRunsWhereItsStateLivesOrIsRefused) {
  const std::vector<TensorId> p = Pieces(Randn(1, {4, 3}, "rows"));
  Randn(2, {4, 3}, "rows");
  const std::vector<TensorId> m = Pieces(Randn(3, {4, 3}, "rows"));
  const std::vector<TensorId> v = Pieces(Randn(4, {4, 3}, "rows"));
  Instruction step = Make(Op::kAdamStep, {}, {1, 2, 3, 4});
  step.attrs.numbers = {1e-3, 0.9, 0.999, 1e-8, 0.01, 0.1, 0.001};
  const std::vector<Instruction> out = Send(step);
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"adam_step@0", "adam_step@1"}));
  EXPECT_EQ(out[1].operands[0], p[1]);
  EXPECT_EQ(out[1].operands[2], m[1]);
  EXPECT_EQ(out[1].operands[3], v[1]);
  Randn(5, {4, 3}, "cols");
  Instruction misplaced = Make(Op::kAdamStep, {}, {1, 2, 5, 4});
  misplaced.attrs.numbers = step.attrs.numbers;
  const Status refused = SendStatus(misplaced);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("must be laid out alike"), std::string::npos) << refused.ToString();
  EXPECT_TRUE(out_.emitted.empty()) << "nothing runs";
}

// A tensor made by zeros and never written is made again where it is needed
// (here whole, for a fetch) instead of gathered; once written, it is gathered.
TEST_F(ShardingStrategyTest, AnUnwrittenZerosIsRemadeNotGathered) {
  Instruction zeros = Make(Op::kZeros, {1}, {});
  zeros.attrs.shape = {4, 3};
  zeros.signal = "rows";
  Send(zeros);
  EXPECT_EQ(Summary(Send(Make(Op::kFetch, {}, {1}))), (std::vector<std::string>{"zeros@0", "fetch@0", "free@0"}));
  Instruction fill = Make(Op::kFill, {}, {1});
  fill.attrs.scalar = 2;
  Send(fill);
  EXPECT_EQ(CountOp(Send(Make(Op::kFetch, {}, {1})), Op::kAllGather), 2u) << "written: its values must travel";
}

// The contrast: a client that registered no config is passed on unsharded.

}  // namespace
}  // namespace gt::sharding
