// The hotpath/compile stages' shared sequence code, in-process: the id map
// the builder wires sequences with, against std::unordered_map under random
// inserts, erases and clears; and the builder's signatures (fresh ids, same
// signature; other shapes, another) and its undo of an instruction whose
// operand it does not know.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "cluster.h"
#include "id_map.h"
#include "sequence.h"

namespace gt::sequence {
namespace {

TEST(IdMapTest, AgreesWithUnorderedMapUnderRandomOperations) {
  std::mt19937_64 random(7);
  IdMap map;
  std::unordered_map<TensorId, TensorId> reference;
  for (int round = 0; round < 20; ++round) {
    // Few distinct ids, so probe runs collide, erases shift them and the map grows.
    const TensorId range = 64 + 200 * round;
    for (int op = 0; op < 3000; ++op) {
      const TensorId id = random() % range;
      switch (random() % 3) {
        case 0: {
          auto [value, added] = map.TryEmplace(id, id * 3 + 1);
          auto [it, reference_added] = reference.try_emplace(id, id * 3 + 1);
          ASSERT_EQ(added, reference_added);
          ASSERT_EQ(*value, it->second);
          break;
        }
        case 1:
          map.Erase(id);
          reference.erase(id);
          break;
        default: {
          TensorId* value = map.Find(id);
          auto it = reference.find(id);
          ASSERT_EQ(value != nullptr, it != reference.end()) << "id " << id;
          if (value) {
            ASSERT_EQ(*value, it->second);
          }
        }
      }
    }
    for (const auto& [id, value] : reference) ASSERT_NE(map.Find(id), nullptr);
    map.Clear();
    reference.clear();
    for (TensorId id = 0; id < range; ++id) ASSERT_EQ(map.Find(id), nullptr);
  }
}

Instruction Make(Op op, std::vector<TensorId> results, std::vector<TensorId> operands) {
  Instruction inst = testing::MakeInstruction(op, 0, std::move(results), std::move(operands));
  inst.client = 1;
  return inst;
}

// A tracker that knows tensors `ids` of client 1 as float32 of `shape`.
MetaTracker Knowing(const std::vector<TensorId>& ids, const Shape& shape) {
  MetaTracker tracker;
  for (TensorId id : ids) tracker.Set(1, id, TensorMeta{shape, DType::kFloat32});
  return tracker;
}

// c = a + b; d = c * a; free c: with the given ids.
Sequence Step(Builder& builder, const MetaTracker& tracker, TensorId a, TensorId b, TensorId c, TensorId d) {
  EXPECT_TRUE(builder.TryAdd(Make(Op::kAdd, {c}, {a, b}), tracker));
  EXPECT_TRUE(builder.TryAdd(Make(Op::kMul, {d}, {c, a}), tracker));
  EXPECT_TRUE(builder.TryAdd(Make(Op::kFree, {}, {c}), tracker));
  return builder.Finish();
}

TEST(BuilderTest, FreshIdsGiveTheSameSignatureAndOtherShapesAnother) {
  Builder builder;
  MetaTracker small = Knowing({1, 2, 10, 20}, {2, 3});
  Sequence first = Step(builder, small, 1, 2, 3, 4);
  Sequence again = Step(builder, small, 10, 20, 30, 40);
  EXPECT_EQ(first.signature, again.signature);
  EXPECT_EQ(first.id, again.id);
  EXPECT_EQ(again.inputs, (std::vector<TensorId>{10, 20}));
  EXPECT_EQ(again.outputs, (std::vector<TensorId>{40}));
  MetaTracker large = Knowing({1, 2}, {4, 3});
  Sequence other = Step(builder, large, 1, 2, 3, 4);
  EXPECT_NE(first.signature, other.signature);
  // Swapping the operands of the add rewires the sequence.
  EXPECT_TRUE(builder.TryAdd(Make(Op::kAdd, {3}, {2, 1}), small));
  EXPECT_TRUE(builder.TryAdd(Make(Op::kMul, {4}, {3, 1}), small));
  EXPECT_TRUE(builder.TryAdd(Make(Op::kFree, {}, {3}), small));
  EXPECT_NE(first.signature, builder.Finish().signature);
}

TEST(BuilderTest, AnInstructionWithAnUnknownOperandAddsNothing) {
  Builder builder;
  MetaTracker tracker = Knowing({1, 2}, {2, 3});
  ASSERT_TRUE(builder.TryAdd(Make(Op::kAdd, {3}, {1, 2}), tracker));
  // 2 is an input already, 9 is unknown: the instruction is undone whole.
  EXPECT_FALSE(builder.TryAdd(Make(Op::kAdd, {5}, {2, 9}), tracker));
  EXPECT_EQ(builder.size(), 1u);
  Sequence partial = builder.Finish();

  Builder clean;
  ASSERT_TRUE(clean.TryAdd(Make(Op::kAdd, {3}, {1, 2}), tracker));
  Sequence expected = clean.Finish();
  EXPECT_EQ(partial.signature, expected.signature);
  EXPECT_EQ(partial.inputs, expected.inputs);
  EXPECT_EQ(partial.operands, expected.operands);
}

}  // namespace
}  // namespace gt::sequence
