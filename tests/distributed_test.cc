// gt::distributed from C++ (client/include/gt/distributed.h), against four
// gt-worker processes: the same semantics as the Python package's tests
// (tests/python/test_distributed.py) through the C++ API itself. Layouts
// as the dispatcher reports them, the collectives each change takes (from
// the record), pending sums reduce-scattered, and values against plain
// arithmetic on the same numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "connected_cluster.h"
#include "gt/distributed.h"
#include "gt/gt.h"

namespace {

namespace gd = gt::distributed;

class DistributedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gt::testing::ConnectedCluster::Start(4); }
  static void TearDownTestSuite() { gt::testing::ConnectedCluster::Stop(); }
  void SetUp() override { ASSERT_TRUE(gt::testing::ConnectedCluster::ready()) << gt::testing::ConnectedCluster::NotReady(); }
};

std::vector<float> Iota(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

std::vector<std::string> Kinds(const std::vector<gd::CollectiveRecord>& records) {
  std::vector<std::string> out;
  for (const gd::CollectiveRecord& r : records) out.push_back(r.kind);
  return out;
}

TEST_F(DistributedTest, LayoutsAndTheCollectivesThatChangeThem) {
  const gd::DeviceMesh mesh({0, 1, 2, 3}, "data");
  const std::vector<float> values = Iota(10 * 6);
  gt::Tensor x = gt::tensor(values, {10, 6});
  gd::Layout whole = gd::layout(x);
  EXPECT_EQ(whole.mesh.workers().size(), 1u);
  EXPECT_EQ(whole.placements, std::vector<gd::Placement>{gd::Replicate()});

  gd::start_recording();
  gt::Tensor rows = gd::distribute_tensor(x, mesh, {gd::Shard(0)});
  gt::Tensor cols = gd::redistribute(rows, mesh, {gd::Shard(1)});
  gt::Tensor copies = gd::redistribute(cols, mesh, {gd::Replicate()});
  gt::Tensor back = gd::full_tensor(copies);
  const std::vector<gd::CollectiveRecord> record = gd::stop_recording();
  // distribute: a broadcast (then local slices); rows -> cols: an all-gather (then slices); cols (on
  // 0, 1, 2) -> copies on all four: an all-gather among them and a broadcast to worker 3; full_tensor:
  // none (worker 0 holds a copy).
  EXPECT_EQ(Kinds(record), (std::vector<std::string>{"broadcast", "all_gather", "all_gather", "broadcast"}));
  for (const gd::CollectiveRecord& r : record) {
    EXPECT_EQ(r.op, "redistribute");
    EXPECT_EQ(r.bytes, 10 * 6 * 4) << "the whole tensor's bytes";
    EXPECT_FALSE(r.backward);
  }

  gd::Layout split = gd::layout(rows);
  EXPECT_EQ(split.mesh.workers(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(split.placements, std::vector<gd::Placement>{gd::Shard(0)});
  EXPECT_EQ(split.shard_sizes, (std::vector<int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(gd::layout(cols).mesh.workers(), (std::vector<int>{0, 1, 2})) << "6 columns: torch.chunk makes 3 pieces";
  EXPECT_EQ(gd::layout(copies).placements, std::vector<gd::Placement>{gd::Replicate()});
  EXPECT_EQ(gd::layout(back).mesh.workers().size(), 1u);
  for (const gt::Tensor& t : {rows, cols, copies, back}) EXPECT_EQ(t.to_vector<float>(), values);
}

TEST_F(DistributedTest, APendingSumIsReduceScatteredIntoASplit) {
  const gd::DeviceMesh mesh({0, 1, 2, 3});
  // [8, 4] split on columns @ [4, 8] split on rows: each worker holds a [8, 8] addend.
  const std::vector<float> a = Iota(8 * 4), b = Iota(4 * 8);
  gt::Tensor left = gd::distribute_tensor(gt::tensor(a, {8, 4}), mesh, {gd::Shard(1)});
  gt::Tensor right = gd::distribute_tensor(gt::tensor(b, {4, 8}), mesh, {gd::Shard(0)});
  gd::start_recording();
  gt::Tensor product = left.matmul(right);
  gt::Tensor split = gd::redistribute(product * 2.0, mesh, {gd::Shard(0)});
  const std::vector<gd::CollectiveRecord> record = gd::stop_recording();
  EXPECT_EQ(gd::layout(product).placements, std::vector<gd::Placement>{gd::Partial()});
  ASSERT_EQ(Kinds(record), std::vector<std::string>{"reduce_scatter"});
  EXPECT_EQ(record[0].op, "matmul") << "the record names the op that made the pending sum";
  EXPECT_NE(record[0].needed_by.find("redistribute"), std::string::npos) << record[0].needed_by;
  std::vector<float> want(8 * 8, 0.0f);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j)
      for (int k = 0; k < 4; ++k) want[static_cast<size_t>(i * 8 + j)] += 2 * a[static_cast<size_t>(i * 4 + k)] * b[static_cast<size_t>(k * 8 + j)];
  EXPECT_EQ(split.to_vector<float>(), want);
  EXPECT_EQ(gd::layout(split).shard_sizes, (std::vector<int64_t>{2, 2, 2, 2}));
}

// A 2-D mesh with a placement per axis: a data-parallel batch times a
// column-parallel weight is cut on both dims with no collective; the second
// (row-parallel) matmul leaves a pending sum along the model axis only,
// summed within each row of the mesh when it is fetched.
TEST_F(DistributedTest, TwoDimensionalMeshPlacements) {
  const gd::DeviceMesh grid({{0, 1}, {2, 3}}, {"data", "model"});
  const std::vector<float> xv = Iota(4 * 6), wv = Iota(6 * 8);
  gt::Tensor x = gd::distribute_tensor(gt::tensor(xv, {4, 6}), grid, {gd::Shard(0), gd::Replicate()});
  gt::Tensor w = gd::distribute_tensor(gt::tensor(wv, {6, 8}), grid, {gd::Replicate(), gd::Shard(1)});
  gd::start_recording();
  gt::Tensor h = x.matmul(w);
  EXPECT_TRUE(gd::stop_recording().empty()) << "[Shard(0), Replicate()] @ [Replicate(), Shard(1)] is local";
  const gd::Layout hl = gd::layout(h);
  EXPECT_EQ(hl.mesh.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(hl.mesh.workers(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(hl.placements, (std::vector<gd::Placement>{gd::Shard(0), gd::Shard(1)}));
  gt::Tensor back = gd::distribute_tensor(gt::tensor(Iota(8 * 6), {8, 6}), grid, {gd::Replicate(), gd::Shard(0)});
  gt::Tensor y = h.matmul(back);
  EXPECT_EQ(gd::layout(y).placements, (std::vector<gd::Placement>{gd::Shard(0), gd::Partial()}));
  gd::start_recording();
  const std::vector<float> got = y.to_vector<float>();
  const std::vector<gd::CollectiveRecord> summed = gd::stop_recording();
  ASSERT_GE(summed.size(), 2u);
  EXPECT_EQ(summed[0].kind, "all_reduce");
  EXPECT_EQ(summed[0].workers, (std::vector<int>{0, 1})) << "the pending sum is summed along the model axis";
  EXPECT_EQ(summed[1].workers, (std::vector<int>{2, 3}));
  std::vector<double> hv(4 * 8, 0.0), want(4 * 6, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j)
      for (int k = 0; k < 6; ++k) hv[static_cast<size_t>(i * 8 + j)] += xv[static_cast<size_t>(i * 6 + k)] * wv[static_cast<size_t>(k * 8 + j)];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j)
      for (int k = 0; k < 8; ++k) want[static_cast<size_t>(i * 6 + j)] += hv[static_cast<size_t>(i * 8 + k)] * (k * 6 + j);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-3 * std::abs(want[i]) + 1e-3) << i;
}

TEST_F(DistributedTest, WhatCannotBeHeldIsRefused) {
  gt::Tensor x = gt::ones({4, 4});
  const gd::DeviceMesh grid({{0, 1}, {2, 3}}, {"data", "model"});
  try {  // one row cannot be cut in two: torch.chunk gives one piece
    (void)gd::distribute_tensor(gt::ones({1, 4}), grid, {gd::Shard(0), gd::Replicate()}).sum().item();
    FAIL() << "a cut that leaves a worker without a piece was accepted";
  } catch (const gt::Error& e) {
    EXPECT_EQ(e.code(), gt::Code::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("does not give a piece to each"), std::string::npos) << e.what();
  }
  // A placement per axis in a signal config: a mesh layout, not a split.
  const gt::SignalConfig mixed = gd::signal_config(grid, {gd::Shard(0), gd::Replicate()});
  ASSERT_TRUE(mixed.mesh.has_value());
  EXPECT_FALSE(mixed.shard.has_value());
  EXPECT_EQ(mixed.mesh->workers, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(mixed.mesh->shard_dims, (std::vector<std::optional<int64_t>>{0, std::nullopt}));
  EXPECT_THROW((void)gd::distribute_tensor(x, grid, {gd::Shard(0)}), gt::Error) << "one placement per axis";
  EXPECT_THROW((void)gd::distribute_tensor(x, gd::DeviceMesh({0, 1}), {gd::Partial()}), gt::Error);
  EXPECT_THROW((void)gd::distribute_tensor(x, gd::DeviceMesh({0, 1}), {gd::Shard(2)}), gt::Error);
  EXPECT_THROW(gd::DeviceMesh({0, 0}), gt::Error);
  // The same rules as signal configs: alike placements on a grid flatten to one split.
  const gt::SignalConfig config = gd::signal_config(grid, {gd::Shard(0), gd::Shard(0)});
  ASSERT_TRUE(config.shard.has_value());
  EXPECT_EQ(config.shard->workers, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(gd::signal_config(grid, {gd::Replicate(), gd::Replicate()}).replicated);
  // The client is undisturbed.
  EXPECT_EQ(gd::distribute_tensor(x, grid, {gd::Shard(0), gd::Shard(0)}).sum().item(), 16.0);
}

}  // namespace
