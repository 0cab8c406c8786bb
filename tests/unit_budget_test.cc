// The unit cache budget's bookkeeping (plugins/torch/unit_budget.h, issue
// 39): least recently run units lose their compiled state first, a unit's
// charge follows its definers, a unit no session defined is forgotten, and
// a definition that cannot fit is refused naming the limit. No LibTorch.
#include "unit_budget.h"

#include <gtest/gtest.h>

namespace gt::torch_backend {
namespace {

constexpr uint64_t kKiB = 1024;

TEST(UnitBudget, EvictsTheLeastRecentlyRunCompiledStatesFirst) {
  UnitBudget budget(100 * kKiB);
  for (uint64_t key = 1; key <= 3; ++key) {
    budget.Add(key, /*client=*/7, kKiB);
    budget.SetCompiled(key, 30 * kKiB);
  }
  EXPECT_EQ(budget.held(), 93 * kKiB);
  budget.Touch(1);  // 2 is now the least recently run
  EXPECT_EQ(budget.Evict(30 * kKiB, std::nullopt), std::vector<uint64_t>{2});
  EXPECT_EQ(budget.held(), 63 * kKiB);
  // The unit being rebuilt is never its own victim.
  EXPECT_EQ(budget.Evict(70 * kKiB, uint64_t{3}), std::vector<uint64_t>{1});
  EXPECT_TRUE(budget.Holds(1) && budget.Holds(2));  // templates stay
}

TEST(UnitBudget, RefusesWhatCannotFitEvenAfterEveryEvictionNamingTheLimit) {
  UnitBudget budget(64 * kKiB);
  budget.Add(1, 7, 40 * kKiB);
  EXPECT_FALSE(budget.Refusal(kKiB, 20 * kKiB));
  std::optional<std::string> why = budget.Refusal(kKiB, 30 * kKiB);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("unit_cache_mib"), std::string::npos) << *why;
  EXPECT_FALSE(UnitBudget(0).Refusal(1 << 30, 1 << 30));  // 0: no limit
}

TEST(UnitBudget, ChargesTheFirstDefinerThenTheNextAndForgetsWithTheLast) {
  UnitBudget budget(0);
  budget.Add(1, /*client=*/7, 2 * kKiB);
  budget.SetCompiled(1, 10 * kKiB);
  budget.AddDefiner(1, 8);
  budget.Add(2, 7, kKiB);
  EXPECT_EQ(budget.ChargedTo(7), 13 * kKiB);
  EXPECT_EQ(budget.ChargedTo(8), 0u);
  EXPECT_EQ(budget.DropClient(7), std::vector<uint64_t>{2});  // 1 is still 8's
  EXPECT_EQ(budget.ChargedTo(8), 12 * kKiB);
  EXPECT_EQ(budget.DropClient(8), std::vector<uint64_t>{1});
  EXPECT_EQ(budget.held(), 0u);
}

}  // namespace
}  // namespace gt::torch_backend
