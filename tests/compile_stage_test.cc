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

Instruction Make(Op op, std::vector<TensorId> results, std::vector<TensorId> operands) {
  Instruction inst = testing::MakeInstruction(op, 0, std::move(results), std::move(operands));
  inst.client = 7;
  return inst;
}

Instruction Ones(TensorId id) {
  Instruction ones = Make(Op::kOnes, {id}, {});
  ones.attrs.shape = {2, 3};
  return ones;
}

// The id the hotpath stage marks t = a + b; r = t * a; free t with: its
// signature's hash, as the stage computes it.
uint64_t HotId() {
  sequence::MetaTracker tracker;
  tracker.Observe(Ones(1));
  tracker.Observe(Ones(2));
  sequence::Builder builder;
  for (const Instruction& inst : {Make(Op::kAdd, {3}, {1, 2}), Make(Op::kMul, {4}, {3, 1}), Make(Op::kFree, {}, {3})})
    EXPECT_TRUE(builder.TryAdd(inst, tracker));
  return builder.Finish().id;
}

Instruction Marker(Op op) {
  static const uint64_t id = HotId();
  Instruction inst = Make(op, {}, {});
  inst.attrs.seed = id;
  inst.attrs.axes = {3};
  return inst;
}

class CompileStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StageContext context{HostKind::kDispatcher, "dispatcher", "compile", nullptr, &registry_};
    Result<CompileMetrics> metrics = CompileMetrics::Build(context);
    ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
    stage_ = std::make_unique<CompileStage>(CompileOptions{1}, *metrics);
    for (TensorId input : {1, 2}) ASSERT_TRUE(stage_->Process(Ones(input), out_).ok());  // a and b: float32 [2, 3]
    out_.out.clear();
  }

  // A marked region: t = x + y; r = t * z; free t. What the stage emits.
  std::vector<Instruction> Region(TensorId x, TensorId y, TensorId z, TensorId t, TensorId r) {
    out_.out.clear();
    for (Instruction inst : {Marker(Op::kHotStart), Make(Op::kAdd, {t}, {x, y}), Make(Op::kMul, {r}, {t, z}),
                             Make(Op::kFree, {}, {t}), Marker(Op::kHotEnd)})
      EXPECT_TRUE(stage_->Process(std::move(inst), out_).ok());
    EXPECT_TRUE(stage_->EndBatch(out_).ok());
    return std::move(out_.out);
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
  out_.out.clear();
  for (Instruction inst : {Marker(Op::kHotStart), Make(Op::kAdd, {9}, {1, 2}), Make(Op::kMul, {10}, {1, 1}),
                           Make(Op::kFree, {}, {9}), Marker(Op::kHotEnd)})
    ASSERT_TRUE(stage_->Process(std::move(inst), out_).ok());
  EXPECT_EQ(Ops(out_.out), eager);
  EXPECT_EQ(Replays(), 0);
  // A region that matches still replays after those.
  EXPECT_EQ(Ops(Region(1, 2, 1, 11, 12)), (std::vector<Op>{Op::kRunUnit}));
  EXPECT_EQ(Replays(), 1);
  // The free names an input instead of the sum.
  out_.out.clear();
  for (Instruction inst : {Marker(Op::kHotStart), Make(Op::kAdd, {13}, {1, 2}), Make(Op::kMul, {14}, {13, 1}),
                           Make(Op::kFree, {}, {2}), Marker(Op::kHotEnd)})
    ASSERT_TRUE(stage_->Process(std::move(inst), out_).ok());
  EXPECT_EQ(Ops(out_.out), eager);
}

}  // namespace
}  // namespace gt::compile
