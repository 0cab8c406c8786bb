// The sharding stage driven in-process (no hosts, no LibTorch): configs and
// membership go in as instructions, a recording emitter keeps what the stage
// emits, and each test asserts which instructions go to which worker and
// which collectives a row of the strategy table (modifiers/sharding/
// sharding.h) emits. Every expectation names per-worker instructions, so
// none of them holds with the stage passing ops on unsharded.
// Part of sharding_strategy_test; the transformer strategies (batched matmul,
// heads, tril, index_add, cat, adam_step, constants) are in
// sharding_strategy_transformer_test.cc, the fixture in sharding_strategy_fixture.h.
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gt/op_attrs.h"
#include "sharding_strategy_fixture.h"
#include "strategy_table.h"

namespace gt::sharding {
namespace {
using namespace strategy_test;

TEST_F(ShardingStrategyTest, CreationInAShardedScopeMakesOneShardPerWorker) {
  const std::vector<Instruction> made = Randn(1, {4, 3}, "rows");
  EXPECT_EQ(Summary(made), (std::vector<std::string>{"randn@0", "randn@1"}));
  for (const Instruction& piece : made) {
    EXPECT_EQ(piece.attrs.shape, (Shape{2, 3}));
    EXPECT_GE(piece.results.at(0), kPhysicalIdBase) << "a shard gets a physical id, not the client's";
  }
  EXPECT_EQ(Summary(Randn(2, {4, 3}, "rep")), (std::vector<std::string>{"ones@0", "ones@1"}));
}

// A row-sharded @ B (B replicated): shard-local, no communication.
TEST_F(ShardingStrategyTest, RowShardedMatmulRunsOnEachShardWithoutCollective) {
  const std::vector<TensorId> a = Pieces(Randn(1, {4, 3}, "rows"));
  const std::vector<TensorId> b = Pieces(Randn(2, {3, 5}, "rep"));
  const std::vector<Instruction> out = Send(Make(Op::kMatmul, {3}, {1, 2}));
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"matmul@0", "matmul@1"}));
  EXPECT_EQ(out[0].operands, (std::vector<TensorId>{a[0], b[0]}));
  EXPECT_EQ(out[1].operands, (std::vector<TensorId>{a[1], b[1]}));
  // The result stays sharded on rows: a row-wise relu is shard-local too.
  EXPECT_EQ(Summary(Send(Make(Op::kRelu, {4}, {3}))), (std::vector<std::string>{"relu@0", "relu@1"}));
}

// A row-sharded @ B sharded: B all-gathered, then shard-local.
TEST_F(ShardingStrategyTest, BothShardedMatmulAllGathersB) {
  const std::vector<TensorId> a = Pieces(Randn(1, {4, 3}, "rows"));
  const std::vector<TensorId> b = Pieces(Randn(2, {3, 5}, "rows"));
  const std::vector<Instruction> out = Send(Make(Op::kMatmul, {3}, {1, 2}));
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"all_gather@0", "all_gather@1", "matmul@0", "matmul@1",
                                                    "free@0", "free@1"}));
  for (size_t r = 0; r < 2; ++r) {
    const Instruction& gather = out[r];
    EXPECT_EQ(gather.operands, (std::vector<TensorId>{b[r]}));
    EXPECT_EQ(gather.attrs.numbers, (std::vector<double>{0, 1})) << "the group, in rank order";
    EXPECT_EQ(gather.attrs.axes, (std::vector<int64_t>{static_cast<int64_t>(r), 0, 2, 1}))
        << "rank, dim, the pieces' sizes (torch.chunk of 3 in 2)";
    ASSERT_TRUE(gather.payload);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(gather.payload->data()), gather.payload->size()),
              std::string(kRendezvousForTest) + "#1")
        << "the rendezvous and the membership's generation (the first membership is the first)";
    const Instruction& matmul = out[2 + r];
    EXPECT_EQ(matmul.operands, (std::vector<TensorId>{a[r], gather.results.at(0)}));
    EXPECT_EQ(out[4 + r].operands, gather.results) << "the gathered copy is a temporary";
  }
}

// A worker lost and replaced under its index (membership 0..3, then without
// 1, then 0..3 again) puts the group in a new generation, so the survivors
// meet the replacement in a new Gloo group, not on the dead one's links.
TEST_F(ShardingStrategyTest, AMembershipChangeStartsANewCollectiveGeneration) {
  auto generation_of_gather = [&](TensorId a, TensorId b, TensorId result) {
    const std::vector<Instruction> out = Send(Make(Op::kMatmul, {result}, {a, b}));
    Result<CollectiveSpec> spec = ReadCollective(out.at(0));
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    return spec.ok() ? spec->generation : 0;
  };
  Pieces(Randn(1, {4, 3}, "rows"));
  Pieces(Randn(2, {3, 5}, "rows"));
  EXPECT_EQ(generation_of_gather(1, 2, 3), 1u);
  for (Shape live : {Shape{0, 2, 3}, Shape{0, 1, 2, 3}}) {
    Instruction membership;
    membership.op = Op::kMembership;
    membership.attrs.shape = live;
    Send(std::move(membership));
  }
  Instruction same;
  same.op = Op::kMembership;
  same.attrs.shape = {0, 1, 2, 3};
  Send(std::move(same));  // no change: the same generation
  Pieces(Randn(4, {4, 3}, "rows"));
  Pieces(Randn(5, {3, 5}, "rows"));
  EXPECT_EQ(generation_of_gather(4, 5, 6), 3u);
}

// Worker 1 lost: a tensor with a piece there is lost whole (its piece on
// worker 0 freed, a later use naming the worker), one on other workers is
// untouched, and the router gets one note naming the client's tensors.
TEST_F(ShardingStrategyTest, ALostWorkerLosesEveryTensorWithAPieceThere) {
  const std::vector<TensorId> rows = Pieces(Randn(1, {4, 3}, "rows"));
  const std::vector<TensorId> copies = Pieces(Randn(2, {4, 3}, "rep"));
  Pieces(Randn(3, {4, 3}, "far"));
  marked_lost.clear();
  const std::vector<Instruction> out = Send(MakeMembership({0, 2, 3}, LostWorker{1, "worker-1"}));
  // Generation 1 (the first membership) ends: groups forming in it (or
  // before) with worker 1 are told.
  EXPECT_EQ(marked_lost, (std::vector<std::pair<uint64_t, int>>{{1, 1}}));
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"free@0", "free@0", "membership@-1", "membership@-1"}));
  std::set<TensorId> freed;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out[i].client, 1u);
    freed.insert(out[i].operands.begin(), out[i].operands.end());
  }
  EXPECT_EQ(freed, (std::set<TensorId>{rows[0], copies[0]}));
  const Instruction& note = out[2];
  ASSERT_TRUE(IsLostTensorsNote(note));
  EXPECT_EQ(note.client, 1u);
  EXPECT_EQ(note.operands, (std::vector<TensorId>{1, 2}));
  EXPECT_EQ(MembershipLostWorker(note)->name, "worker-1");
  EXPECT_FALSE(IsLostTensorsNote(out[3])) << "the announcement itself goes on";
  Status use = SendStatus(Make(Op::kRelu, {4}, {1}));
  EXPECT_NE(use.message().find("operand %1 was lost with worker worker-1"), std::string::npos) << use.ToString();
  EXPECT_EQ(Summary(Send(Make(Op::kRelu, {5}, {3}))), (std::vector<std::string>{"relu@2", "relu@3"}));
}

// A inner-sharded @ B row-sharded: partial products, a pending sum, all-reduced
// (once) when an op needs its value.
TEST_F(ShardingStrategyTest, InnerShardedMatmulLeavesAPendingSum) {
  const std::vector<TensorId> a = Pieces(Randn(1, {4, 6}, "cols"));
  const std::vector<TensorId> b = Pieces(Randn(2, {6, 5}, "rows"));
  const std::vector<Instruction> out = Send(Make(Op::kMatmul, {3}, {1, 2}));
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"matmul@0", "matmul@1"})) << "no communication yet";
  for (size_t r = 0; r < 2; ++r) EXPECT_EQ(out[r].operands, (std::vector<TensorId>{a[r], b[r]}));
  // The first op that needs the value all-reduces the addends and frees them.
  const std::vector<Instruction> relu = Send(Make(Op::kRelu, {4}, {3}));
  ASSERT_EQ(Summary(relu), (std::vector<std::string>{"all_reduce@0", "all_reduce@1", "relu@0", "relu@1", "free@0",
                                                     "free@1"}));
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(relu[r].operands, out[r].results) << "the partial product is reduced";
    EXPECT_EQ(relu[r].attrs.scalar, 0) << "sum";
    EXPECT_EQ(relu[r].attrs.shape, (Shape{4, 5}));
    EXPECT_EQ(relu[4 + r].operands, out[r].results) << "the partial product is freed";
  }
  // The sum is now a copy on each worker: later uses and a fetch need no collective.
  EXPECT_EQ(Summary(Send(Make(Op::kNeg, {5}, {3}))), (std::vector<std::string>{"neg@0", "neg@1"}));
  EXPECT_EQ(Summary(Send(Make(Op::kFetch, {}, {3}))), (std::vector<std::string>{"fetch@0"}));
}

// Ops linear in a pending sum keep it pending; redistributing it to a split
// over its workers reduce-scatters it.
TEST_F(ShardingStrategyTest, PendingSumsAddScaleAndReduceScatter) {
  Pieces(Randn(1, {4, 6}, "cols"));
  Pieces(Randn(2, {6, 4}, "rows"));
  Send(Make(Op::kMatmul, {3}, {1, 2}));
  Send(Make(Op::kMatmul, {4}, {1, 2}));
  EXPECT_EQ(Summary(Send(Make(Op::kAdd, {5}, {3, 4}))), (std::vector<std::string>{"add@0", "add@1"}));
  Instruction scaled = Make(Op::kMul, {6}, {5});
  scaled.attrs.scalar = 0.5;
  scaled.attrs.scalar_side = ScalarSide::kRight;
  EXPECT_EQ(Summary(Send(scaled)), (std::vector<std::string>{"mul@0", "mul@1"}));
  Instruction split = Make(Op::kRedistribute, {7}, {6});
  split.attrs.shape = {4, 4};
  split.attrs.axes = {1, 0, 0, 1};
  const std::vector<Instruction> rs = Send(split);
  ASSERT_EQ(Summary(rs), (std::vector<std::string>{"reduce_scatter@0", "reduce_scatter@1"}));
  EXPECT_EQ(rs[0].attrs.axes, (std::vector<int64_t>{0, 0, 2, 2})) << "{rank, dim, sizes}";
  EXPECT_EQ(rs[1].attrs.shape, (Shape{4, 4})) << "each member's addend is whole";
  // A sum of a pending sum and a copy needs the value: all-reduced first.
  Randn(8, {4, 4}, "rep");
  EXPECT_EQ(Summary(Send(Make(Op::kAdd, {9}, {6, 8}))),
            (std::vector<std::string>{"all_reduce@0", "all_reduce@1", "add@0", "add@1", "free@0", "free@1"}));
}

// settle sums the pending sums it names in one all-reduce per group of
// alike ones (DDP's bucketing): flattened, concatenated, reduced, cut apart.
TEST_F(ShardingStrategyTest, SettleSumsAlikePendingSumsInOneAllReduce) {
  Pieces(Randn(1, {4, 6}, "cols"));
  Pieces(Randn(2, {6, 5}, "rows"));
  Pieces(Randn(3, {6, 3}, "rows"));
  Send(Make(Op::kMatmul, {4}, {1, 2}));  // pending [4, 5]
  Send(Make(Op::kMatmul, {5}, {1, 3}));  // pending [4, 3]
  Randn(6, {4, 4}, "rep");               // not pending: left as it is
  const std::vector<Instruction> out = Send(Make(Op::kSettle, {}, {4, 5, 6, 99}));
  EXPECT_EQ(CountOp(out, Op::kAllReduce), 2u) << "one all-reduce, an instruction per member";
  EXPECT_EQ(CountOp(out, Op::kCat), 2u);
  for (const Instruction& inst : out) {
    if (inst.op == Op::kAllReduce) {
      EXPECT_EQ(inst.attrs.shape, (Shape{4 * 5 + 4 * 3}));
    }
  }
  // Both are copies on each worker now: their uses need no collective.
  EXPECT_EQ(Summary(Send(Make(Op::kNeg, {7}, {4}))), (std::vector<std::string>{"neg@0", "neg@1"}));
  EXPECT_EQ(Summary(Send(Make(Op::kNeg, {8}, {5}))), (std::vector<std::string>{"neg@0", "neg@1"}));
  // With nothing pending it emits nothing.
  EXPECT_TRUE(Send(Make(Op::kSettle, {}, {4, 5})).empty());
}

TEST_F(ShardingStrategyTest, ReductionOverTheShardedAxisLeavesAPendingSum) {
  Randn(1, {4, 6}, "rows");
  Instruction over_rows = Make(Op::kSum, {2}, {1});
  over_rows.attrs.axes = {0};
  const std::vector<Instruction> out = Send(over_rows);
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"sum@0", "sum@1"}));
  const std::vector<Instruction> fetch = Send(Make(Op::kFetch, {}, {2}));
  ASSERT_EQ(Summary(fetch), (std::vector<std::string>{"all_reduce@0", "all_reduce@1", "fetch@0", "free@0", "free@1"}));
  EXPECT_EQ(fetch[0].operands, out[0].results);
  EXPECT_EQ(fetch[1].operands, out[1].results);

  Instruction mean = Make(Op::kMean, {3}, {1});
  mean.attrs.axes = {0};
  EXPECT_EQ(Summary(Send(mean)), (std::vector<std::string>{"sum@0", "sum@1", "div@0", "div@1", "free@0", "free@1"}))
      << "a mean is each local sum divided by the whole count: a pending sum";
  Instruction max = Make(Op::kMax, {4}, {1});
  max.attrs.axes = {0};
  EXPECT_EQ(Summary(Send(max)), (std::vector<std::string>{"max@0", "max@1", "all_reduce@0", "all_reduce@1", "free@0",
                                                          "free@1"}))
      << "a max is not a sum: reduced at once";
}

TEST_F(ShardingStrategyTest, ReductionOverAnotherAxisIsShardLocal) {
  Randn(1, {4, 6}, "rows");
  Instruction over_columns = Make(Op::kSum, {2}, {1});
  over_columns.attrs.axes = {1};
  EXPECT_EQ(Summary(Send(over_columns)), (std::vector<std::string>{"sum@0", "sum@1"}));
}

TEST_F(ShardingStrategyTest, ElementwiseOnMatchingShardsIsShardLocal) {
  const std::vector<TensorId> a = Pieces(Randn(1, {4, 3}, "rows"));
  const std::vector<TensorId> b = Pieces(Randn(2, {4, 3}, "rows"));
  const std::vector<Instruction> out = Send(Make(Op::kAdd, {3}, {1, 2}));
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"add@0", "add@1"}));
  EXPECT_EQ(out[0].operands, (std::vector<TensorId>{a[0], b[0]}));
  EXPECT_EQ(out[1].operands, (std::vector<TensorId>{a[1], b[1]}));
}

TEST_F(ShardingStrategyTest, SoftmaxAlongTheShardedAxisAllReducesMaxThenSum) {
  Randn(1, {4, 6}, "rows");
  Instruction softmax = Make(Op::kSoftmax, {2}, {1});
  softmax.attrs.axes = {0};
  const std::vector<Instruction> out = Send(softmax);
  const std::vector<std::string> summary = Summary(out);
  ASSERT_GE(summary.size(), 14u);
  EXPECT_EQ(std::vector<std::string>(summary.begin(), summary.begin() + 14),
            (std::vector<std::string>{"max@0", "max@1", "all_reduce@0", "all_reduce@1", "sub@0", "sub@1", "exp@0",
                                      "exp@1", "sum@0", "sum@1", "all_reduce@0", "all_reduce@1", "div@0", "div@1"}));
  EXPECT_EQ(out[2].attrs.scalar, 1) << "max";
  EXPECT_EQ(out[10].attrs.scalar, 0) << "sum";
  EXPECT_EQ(CountOp(out, Op::kFree), 12u) << "every intermediate is freed";
}

// layer_norm normalizes rows: cut before the normalized dims, each piece is
// normalized alone; cut through them, the rows are assembled first.
TEST_F(ShardingStrategyTest, LayerNormOfRowPiecesIsShardLocalAndOfColumnPiecesWhole) {
  const std::vector<TensorId> rows = Pieces(Randn(1, {4, 6}, "rows"));
  Instruction norm = Make(Op::kLayerNorm, {2}, {1});
  norm.attrs.axes = {1};
  norm.attrs.scalar = 1e-5;
  std::vector<Instruction> out = Send(norm);
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"layer_norm@0", "layer_norm@1"}));
  EXPECT_EQ(out[0].operands, (std::vector<TensorId>{rows[0]}));
  EXPECT_EQ(out[1].operands, (std::vector<TensorId>{rows[1]}));
  // Its backward with the gradient cut the other way (as g * weight comes
  // under FSDP): the rows lead, the gradient is re-cut like them.
  Randn(3, {4, 6}, "cols");
  Instruction backward = Make(Op::kLayerNormBackward, {4}, {3, 1});
  backward.attrs = norm.attrs;
  out = Send(backward);
  std::vector<const Instruction*> pieces;
  for (const Instruction& inst : out)
    if (inst.op == Op::kLayerNormBackward) pieces.push_back(&inst);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0]->operands.back(), rows[0]);
  EXPECT_EQ(pieces[1]->operands.back(), rows[1]);
  // Normalized over the cut dim: whole on one worker.
  Randn(5, {4, 6}, "cols");
  Instruction across = Make(Op::kLayerNorm, {6}, {5});
  across.attrs = norm.attrs;
  out = Send(across);
  EXPECT_EQ(CountOp(out, Op::kLayerNorm), 1u);
  EXPECT_EQ(CountOp(out, Op::kAllGather), 2u) << "one all-gather, an instruction for each member";
}

// A fetch of a sharded tensor: all-gather, then fetch from the first shard's worker.
TEST_F(ShardingStrategyTest, FetchOfAShardedTensorAllGathersOntoTheFirstShardsWorker) {
  const std::vector<TensorId> a = Pieces(Randn(1, {4, 3}, "rows"));
  const std::vector<Instruction> out = Send(Make(Op::kFetch, {}, {1}));
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"all_gather@0", "all_gather@1", "fetch@0", "free@0", "free@1"}));
  EXPECT_EQ(out[0].operands, (std::vector<TensorId>{a[0]}));
  EXPECT_EQ(out[1].operands, (std::vector<TensorId>{a[1]}));
  EXPECT_EQ(out[2].operands, out[0].results) << "the fetch reads the gathered tensor on worker 0";
}

// An op in a scope whose config names other workers: its operand is moved there first.
TEST_F(ShardingStrategyTest, OperandOutsideTheScopesWorkersIsMovedIn) {
  const std::vector<Instruction> made = Randn(1, {4, 3}, "");
  ASSERT_EQ(Summary(made), (std::vector<std::string>{"randn@0"})) << "whole on the client's worker";
  Instruction relu = Make(Op::kRelu, {2}, {1});
  relu.signal = "far";
  const std::vector<Instruction> out = Send(relu);
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"broadcast@0", "broadcast@2", "relu@2", "free@0", "free@2"}));
  EXPECT_EQ(out[0].operands, (std::vector<TensorId>{1}));
  EXPECT_EQ(out[2].operands, out[1].results);
  EXPECT_EQ(out[2].results, (std::vector<TensorId>{2})) << "whole: the client's own id";
}

// Frees reach every shard; a whole tensor's free goes on to the router.
TEST_F(ShardingStrategyTest, FreeOfAShardedTensorFreesEachShard) {
  const std::vector<TensorId> a = Pieces(Randn(1, {4, 3}, "rows"));
  const std::vector<Instruction> out = Send(Make(Op::kFree, {}, {1}));
  ASSERT_EQ(Summary(out), (std::vector<std::string>{"free@0", "free@1"}));
  EXPECT_EQ(out[0].operands, (std::vector<TensorId>{a[0]}));
  EXPECT_EQ(out[1].operands, (std::vector<TensorId>{a[1]}));
}

// Attention scores: [B, H, T, d] @ [B, H, d, T] both cut on the heads
// (dim 1) multiply shard by shard.
TEST_F(ShardingStrategyTest, ClientWithoutConfigsIsPassedOn) {
  Instruction zeros = Make(Op::kZeros, {1}, {});
  zeros.attrs.shape = {4, 3};
  zeros.client = 2;
  out_.emitted.clear();
  ASSERT_TRUE(stage_->Process(Instruction(zeros), out_).ok());
  ASSERT_EQ(out_.emitted.size(), 1u);
  EXPECT_GE(out_.emitted[0].worker, 0) << "made on the client's worker";
  Instruction matmul = Make(Op::kMatmul, {2}, {1, 1});
  matmul.client = 2;
  out_.emitted.clear();
  ASSERT_TRUE(stage_->Process(Instruction(matmul), out_).ok());
  EXPECT_EQ(Summary(out_.emitted), (std::vector<std::string>{"matmul@-1"})) << "the router places it";
}

TEST_F(ShardingStrategyTest, AnOpOnATensorWhoseOpFailedIsRefusedNamingThatOp) {
  Configure("nowhere", {0}, {7}, false);
  Instruction zeros = Make(Op::kZeros, {1}, {});
  zeros.attrs.shape = {4, 3};
  zeros.signal = "nowhere";
  const Status made = SendStatus(zeros);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.message().find("worker index 7 is not a live worker"), std::string::npos) << made.ToString();
  const uint64_t failed_seq = seq_;
  const Status relu = SendStatus(Make(Op::kRelu, {2}, {1}));
  EXPECT_NE(relu.message().find("does not exist because op #" + std::to_string(failed_seq) + " failed"),
            std::string::npos)
      << relu.ToString();
  EXPECT_TRUE(out_.emitted.empty());
}

TEST_F(ShardingStrategyTest, ClientsMayNotSendCollectivesOrPhysicalIds) {
  EXPECT_EQ(SendStatus(Make(Op::kAllReduce, {1}, {})).code(), Code::kInvalidArgument);
  EXPECT_EQ(SendStatus(Make(Op::kRelu, {kPhysicalIdBase}, {})).code(), Code::kInvalidArgument);
}

// The table's rows (sharding.h) name the strategies that run them.
TEST(StrategyTable, RowsNameTheirStrategies) {
  EXPECT_EQ(StrategyFor(Op::kAdd), &Elementwise);
  EXPECT_EQ(StrategyFor(Op::kRelu), &Elementwise);
  EXPECT_EQ(StrategyFor(Op::kCopyInto), &Elementwise);
  EXPECT_EQ(StrategyFor(Op::kMatmul), &Matmul);
  EXPECT_EQ(StrategyFor(Op::kCat), &Cat);
  EXPECT_EQ(StrategyFor(Op::kFetch), &Whole);
  EXPECT_EQ(StrategyFor(Op::kHotStart), &Whole);
  EXPECT_NE(StrategyFor(Op::kSoftmax), &Elementwise) << "softmax is unary but has its own row";
  EXPECT_EQ(StrategyFor(Op::kGelu), &Elementwise);
  EXPECT_NE(StrategyFor(Op::kLayerNorm), &Elementwise) << "layer_norm normalizes rows: its own row";
  EXPECT_NE(StrategyFor(Op::kSum), &Whole);
  EXPECT_NE(StrategyFor(Op::kReshape), &Whole);
  EXPECT_NE(StrategyFor(Op::kSlice), &Whole);
  for (Op op : {Op::kConv2d, Op::kConv2dBackward, Op::kMaxPool2d, Op::kAvgPool2dBackward, Op::kAdaptiveAvgPool2d})
    EXPECT_EQ(StrategyFor(op), &Batch) << OpName(op) << " runs per sample";
  EXPECT_EQ(StrategyFor(Op::kVar), &Whole) << "a variance over a cut dim needs every piece";
}

}  // namespace
}  // namespace gt::sharding
