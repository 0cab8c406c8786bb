// The compile stage in-process, fed marked regions as the hotpath stage
// marks them (the marker carries the signature's id): the first occurrence
// defines a unit, a later one with fresh ids replays it (matched by ops and
// wiring alone), and a region marked with that id whose instructions wire up
// differently (what a stage between hotpath and compile could make of one)
// is passed on eagerly, never run as the unit.
#include <gtest/gtest.h>

#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "cluster.h"
#include "compile.h"

namespace gt::compile {
namespace {

class Collect final : public Emitter {
 public:
  void Emit(Instruction&& inst) override { out.push_back(std::move(inst)); }
  std::vector<Instruction> out;
};

Instruction Make(Op op, std::vector<TensorId> results, std::vector<TensorId> operands, ClientId client = 7) {
  Instruction inst = testing::MakeInstruction(op, 0, std::move(results), std::move(operands));
  inst.client = client;
  return inst;
}

Instruction Ones(TensorId id, ClientId client = 7) {
  Instruction ones = Make(Op::kOnes, {id}, {}, client);
  ones.attrs.shape = {2, 3};
  return ones;
}

// The id the hotpath stage marks `body` with (inputs 1 and 2 known): its
// signature's hash, as the stage computes it.
uint64_t HotId(const std::vector<Instruction>& body) {
  sequence::MetaTracker tracker;
  tracker.Observe(Ones(1, body[0].client));
  tracker.Observe(Ones(2, body[0].client));
  sequence::Builder builder;
  for (const Instruction& inst : body) {
    EXPECT_TRUE(builder.TryAdd(inst, tracker));
    tracker.Observe(inst);
  }
  return builder.Finish().id;
}

// t = x + y; r = t * z; free t
std::vector<Instruction> Step(TensorId x, TensorId y, TensorId z, TensorId t, TensorId r) {
  return {Make(Op::kAdd, {t}, {x, y}), Make(Op::kMul, {r}, {t, z}), Make(Op::kFree, {}, {t})};
}

class CompileStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StageContext context{HostKind::kDispatcher, "dispatcher", "compile", nullptr, &registry_};
    Result<CompileMetrics> metrics = CompileMetrics::Build(context);
    ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
    stage_ = std::make_unique<CompileStage>(CompileOptions{1}, *metrics);
    for (ClientId client : {7, 8})  // a and b of each client: float32 [2, 3]
      for (TensorId input : {1, 2}) ASSERT_TRUE(stage_->Process(Ones(input, client), out_).ok());
    out_.out.clear();
  }

  // `body` between markers carrying `id`. What the stage emits.
  std::vector<Instruction> Marked(uint64_t id, std::vector<Instruction> body) {
    out_.out.clear();
    Instruction start = Make(Op::kHotStart, {}, {}, body[0].client);
    start.attrs.seed = id;
    start.attrs.axes = {static_cast<int64_t>(body.size())};
    Instruction end = start;
    end.op = Op::kHotEnd;
    EXPECT_TRUE(stage_->Process(std::move(start), out_).ok());
    for (Instruction& inst : body) EXPECT_TRUE(stage_->Process(std::move(inst), out_).ok());
    EXPECT_TRUE(stage_->Process(std::move(end), out_).ok());
    EXPECT_TRUE(stage_->EndBatch(out_).ok());
    return std::move(out_.out);
  }
  // A Step between markers carrying the id of Step(1, 2, 1, 3, 4).
  std::vector<Instruction> Region(TensorId x, TensorId y, TensorId z, TensorId t, TensorId r) {
    static const uint64_t id = HotId(Step(1, 2, 1, 3, 4));
    return Marked(id, Step(x, y, z, t, r));
  }

  // gt_compile_replays_total: regions matched to a unit by ops and wiring.
  double Replays() {
    for (const prometheus::MetricFamily& family : registry_.Collect())
      if (family.name == "gt_compile_replays_total" && !family.metric.empty()) return family.metric[0].counter.value;
    return -1;
  }

  prometheus::Registry registry_;
  std::unique_ptr<CompileStage> stage_;
  Collect out_;
};

std::vector<Op> Ops(const std::vector<Instruction>& instructions) {
  std::vector<Op> ops;
  for (const Instruction& inst : instructions) ops.push_back(inst.op);
  return ops;
}

TEST_F(CompileStageTest, DefinesOnceThenReplaysWithFreshIds) {
  std::vector<Instruction> first = Region(1, 2, 1, 3, 4);
  ASSERT_EQ(Ops(first), (std::vector<Op>{Op::kDefineUnit, Op::kRunUnit}));
  EXPECT_EQ(first[1].operands, (std::vector<TensorId>{1, 2}));
  EXPECT_EQ(first[1].results, (std::vector<TensorId>{4}));

  std::vector<Instruction> again = Region(1, 2, 1, 5, 6);
  ASSERT_EQ(Ops(again), (std::vector<Op>{Op::kRunUnit}));
  EXPECT_EQ(again[0].attrs.seed, first[1].attrs.seed);
  EXPECT_EQ(again[0].operands, (std::vector<TensorId>{1, 2}));
  EXPECT_EQ(again[0].results, (std::vector<TensorId>{6}));
  EXPECT_EQ(Replays(), 1);
  // The inputs swapped: the same unit, bound the other way round.
  std::vector<Instruction> swapped = Region(2, 1, 2, 7, 8);
  ASSERT_EQ(Ops(swapped), (std::vector<Op>{Op::kRunUnit}));
  EXPECT_EQ(swapped[0].operands, (std::vector<TensorId>{2, 1}));
  EXPECT_EQ(Replays(), 2);
}

TEST_F(CompileStageTest, ARegionThatWiresUpDifferentlyRunsEagerly) {
  ASSERT_EQ(Ops(Region(1, 2, 1, 3, 4)), (std::vector<Op>{Op::kDefineUnit, Op::kRunUnit}));
  const std::vector<Op> eager = {Op::kAdd, Op::kMul, Op::kFree};
  // The multiply reads b where the unit reads a.
  EXPECT_EQ(Ops(Region(1, 2, 2, 5, 6)), eager);
  // The multiply reads an input where the unit reads the sum.
  const uint64_t id = HotId(Step(1, 2, 1, 3, 4));
  EXPECT_EQ(Ops(Marked(id, {Make(Op::kAdd, {9}, {1, 2}), Make(Op::kMul, {10}, {1, 1}), Make(Op::kFree, {}, {9})})), eager);
  // One tensor bound to both inputs.
  EXPECT_EQ(Ops(Region(1, 1, 1, 5, 6)), eager);
  // The sum reuses the id of a live input, and the multiply reads it twice.
  EXPECT_EQ(Ops(Region(1, 2, 1, 1, 6)), eager);
  EXPECT_EQ(Replays(), 0);
  // A region that matches still replays after those.
  EXPECT_EQ(Ops(Region(1, 2, 1, 11, 12)), (std::vector<Op>{Op::kRunUnit}));
  EXPECT_EQ(Replays(), 1);
  // The free names an input instead of the sum.
  EXPECT_EQ(Ops(Marked(id, {Make(Op::kAdd, {13}, {1, 2}), Make(Op::kMul, {14}, {13, 1}), Make(Op::kFree, {}, {2})})),
            eager);
}

// t = a + b; u = t * a; r = t + u, replayed with u given t's id: the last
// add would read the product twice, the unit reads the sum and the product.
TEST_F(CompileStageTest, AProductionOverwrittenInTheRegionRunsEagerly) {
  auto body = [](TensorId t, TensorId u, TensorId r) {
    return std::vector<Instruction>{Make(Op::kAdd, {t}, {1, 2}), Make(Op::kMul, {u}, {t, 1}), Make(Op::kAdd, {r}, {t, u})};
  };
  const uint64_t id = HotId(body(3, 4, 5));
  ASSERT_EQ(Ops(Marked(id, body(3, 4, 5))), (std::vector<Op>{Op::kDefineUnit, Op::kRunUnit}));
  EXPECT_EQ(Ops(Marked(id, body(20, 20, 21))), (std::vector<Op>{Op::kAdd, Op::kMul, Op::kAdd}));
  EXPECT_EQ(Replays(), 0);
}

// Units are shared by clients with the same signature. One client's region
// that gave both its outputs one id must not make another client's replays
// name one tensor twice.
TEST_F(CompileStageTest, AClientReusingIdsDoesNotBreakAnotherClientsReplays) {
  auto body = [](ClientId client, TensorId a, TensorId b) {
    return std::vector<Instruction>{Make(Op::kNeg, {a}, {1}, client), Make(Op::kNeg, {b}, {a}, client)};
  };
  const uint64_t id = HotId(body(7, 10, 11));
  ASSERT_EQ(id, HotId(body(7, 10, 10)));
  (void)Marked(id, body(7, 10, 10));
  (void)Marked(id, body(8, 11, 12));
  std::vector<Instruction> replay = Marked(id, body(8, 13, 14));
  ASSERT_FALSE(replay.empty());
  ASSERT_EQ(replay.back().op, Op::kRunUnit);
  EXPECT_EQ(replay.back().results, (std::vector<TensorId>{13, 14}));
}

}  // namespace
}  // namespace gt::compile
