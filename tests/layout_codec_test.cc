// The layout codec (gt/layout.h) shared by the client, the sharding stage and
// the Python bindings, and the typed inspect attribute (gt/op_attrs.h): each
// form round-trips, keeps its wire numbers, and malformed input is an error.
#include "gt/layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gt/op_attrs.h"

namespace gt {
namespace {

using layout::AxisKind;
using layout::AxisPlacement;
using layout::Kind;
using layout::Layout;

Layout Mesh(std::vector<AxisPlacement> axes) {
  Layout l;
  l.kind = Kind::kOnMesh;
  l.workers = {0, 1, 2, 3};
  l.mesh_shape = {2, 2};
  l.mesh_axes = std::move(axes);
  return l;
}

TEST(LayoutCodecTest, TargetsKeepTheirWireNumbers) {
  Layout split{Kind::kSplit, 1, {0, 2}, {}, {}, {}};
  EXPECT_EQ(layout::EncodeTarget(split), (std::vector<int64_t>{1, 1, 0, 2}));
  Layout whole{Kind::kWhole, 0, {-1}, {}, {}, {}};
  EXPECT_EQ(layout::EncodeTarget(whole), (std::vector<int64_t>{0, 0, -1}));
  const Layout mesh = Mesh({{AxisKind::kShard, 0}, {AxisKind::kReplicate, 0}});
  EXPECT_EQ(layout::EncodeTarget(mesh), (std::vector<int64_t>{4, 2, 2, 1, 0, 2, 0, 0, 1, 2, 3}));
}

TEST(LayoutCodecTest, TargetsRoundTrip) {
  for (const Layout& l : {Layout{Kind::kSplit, -1, {3, 1}, {}, {}, {}}, Layout{Kind::kCopies, 0, {0, 1, 2}, {}, {}, {}},
                          Mesh({{AxisKind::kReplicate, 0}, {AxisKind::kShard, 1}})}) {
    Result<Layout> back = layout::DecodeTarget(layout::EncodeTarget(l));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, l);
  }
}

TEST(LayoutCodecTest, MalformedTargetsAreRefusedNamingTheForm) {
  const std::vector<std::vector<int64_t>> bad = {
      {}, {1, 0}, {3, 0, 0}, {7, 0, 0}, {-1, 0, 0},
      {4, 2, 2, 1, 0, 2, 0, 0, 1, 2},      // three workers for a 2 x 2 mesh
      {4, 0, 2, 1, 0, 2, 0},               // no rows
  };
  for (const std::vector<int64_t>& axes : bad) {
    Result<Layout> l = layout::DecodeTarget(axes);
    ASSERT_FALSE(l.ok()) << ::testing::PrintToString(axes);
    EXPECT_EQ(l.status().code(), Code::kInvalidArgument);
    EXPECT_NE(l.status().message().find("expected"), std::string::npos);
  }
  // Partial() cannot be asked for.
  EXPECT_NE(layout::DecodeTarget(std::vector<int64_t>{4, 1, 2, 3, 0, 2, 0, 0, 1}).status().message().find(
                "neither 1 (Shard) nor 2 (Replicate)"),
            std::string::npos);
}

TEST(LayoutCodecTest, AnswersRoundTrip) {
  const std::vector<Layout> layouts = {
      Layout{Kind::kWhole, 0, {2}, {}, {}, {}},
      Layout{Kind::kSplit, 0, {0, 1, 2}, {3, 3, 2}, {}, {}},
      Layout{Kind::kPendingSum, 0, {0, 1}, {}, {}, {}},
      Mesh({{AxisKind::kPartial, 0}, {AxisKind::kShard, 1}}),
  };
  for (const Layout& l : layouts) {
    Result<Layout> back = layout::DecodeAnswer(layout::EncodeAnswer(l));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, l);
  }
  EXPECT_EQ(layout::EncodeAnswer(layouts[1]), (std::vector<int64_t>{1, 0, 3, 0, 1, 2, 3, 3, 2}));
}

TEST(LayoutCodecTest, MalformedAnswersAreRefused) {
  const std::vector<std::vector<int64_t>> bad = {
      {}, {0, 0, 1}, {0, 0, 0, 1}, {0, 0, 5, 1}, {9, 0, 1, 0},
      {1, 0, 2, 0, 1, 4},                          // a split without a size per worker
      {0, 0, 1, 0, 7},                             // values after a whole tensor's worker
      {4, 0, 4, 0, 1, 2, 3, 2, 2, 1, 0},           // a mesh missing an axis
      {4, 0, 4, 0, 1, 2, 3, 3, 1, 1, 0, 2, 0},     // 3 x 1 is not 4 workers
      {4, 0, 4, 0, 1, 2, 3, 2, 2, 5, 0, 2, 0},     // an unknown axis kind
  };
  for (const std::vector<int64_t>& v : bad) {
    Result<Layout> l = layout::DecodeAnswer(v);
    EXPECT_FALSE(l.ok()) << ::testing::PrintToString(v);
  }
}

TEST(LayoutCodecTest, RecordingsRoundTripAndCountTheirEntries) {
  std::vector<int64_t> log;
  layout::AppendRecorded(log, {7, 5, Op::kAllReduce, ReduceOp::kMax, 64, {0, 1}});
  layout::AppendRecorded(log, {8, 8, Op::kAllGather, ReduceOp::kSum, 32, {2, 3, 1}});
  EXPECT_EQ(log.size(), layout::RecordedValues(2) + layout::RecordedValues(3));
  const std::vector<int64_t> answer = layout::EncodeRecording(log, 4);
  EXPECT_EQ(answer[0], 2);
  Result<layout::Recording> r = layout::DecodeRecording(answer);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->dropped, 4u);
  ASSERT_EQ(r->entries.size(), 2u);
  EXPECT_EQ(r->entries[0].op, Op::kAllReduce);
  EXPECT_EQ(r->entries[0].reduce, ReduceOp::kMax);
  EXPECT_EQ(r->entries[0].made_by, 5u);
  EXPECT_EQ(r->entries[1].workers, (std::vector<int64_t>{2, 3, 1}));
  std::vector<int64_t> cut = answer;
  cut.pop_back();  // the last member missing
  EXPECT_FALSE(layout::DecodeRecording(cut).ok());
  std::vector<int64_t> unknown = answer;
  unknown[4] = static_cast<int64_t>(Op::kCount);  // the first entry's op
  EXPECT_FALSE(layout::DecodeRecording(unknown).ok());
}

TEST(InspectAttributeTest, TheModeIsTypedAndAnUnknownOneIsAnError) {
  for (InspectMode mode : {InspectMode::kLayout, InspectMode::kStartRecording, InspectMode::kStopRecording}) {
    const Instruction inspect = MakeInspect(mode);
    EXPECT_EQ(inspect.op, Op::kInspect);
    EXPECT_EQ(inspect.attrs.seed, 0u);  // not where the mode rides
    Result<InspectMode> back = ReadInspect(inspect);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, mode);
  }
  EXPECT_EQ(MakeInspect(InspectMode::kLayout, {12}).operands, (std::vector<TensorId>{12}));
  Instruction odd = MakeInspect(InspectMode::kLayout);
  odd.attrs.axes = {9};
  Result<InspectMode> unknown = ReadInspect(odd);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown inspect request 9"), std::string::npos);
  EXPECT_FALSE(ReadInspect(Instruction{}).ok());
}

TEST(InspectAttributeTest, AnAnswerIsTheValuesBytes) {
  Instruction inspect = MakeInspect(InspectMode::kStopRecording);
  EXPECT_EQ(InspectAnswer(inspect), nullptr);
  SetInspectAnswer(inspect, {0, 3});
  ASSERT_NE(InspectAnswer(inspect), nullptr);
  ASSERT_EQ(InspectAnswer(inspect)->size(), 2 * sizeof(int64_t));
  int64_t second = 0;
  std::memcpy(&second, InspectAnswer(inspect)->data() + sizeof(int64_t), sizeof(int64_t));
  EXPECT_EQ(second, 3);
}

}  // namespace
}  // namespace gt
