// The sharding stage across a dispatcher restart, in-process: the tags it
// gives the pieces it places (piece_tags.h) at the end of each batch, and a
// new stage rebuilding its records from them (ShardingStage::Restore) that
// then places ops exactly as the old one would; every malformed or
// contradictory tag refuses the session.
#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <tuple>

#include "piece_tags.h"
#include "sharding_strategy_fixture.h"

namespace gt::sharding::strategy_test {
namespace {

// Keeps what the stage emits and the tags it gives.
class TagRecorder final : public Emitter {
 public:
  void Emit(Instruction&& inst) override { emitted.push_back(std::move(inst)); }
  void Tag(PieceTag&& tag) override { tags.push_back(std::move(tag)); }
  std::vector<Instruction> emitted;
  std::vector<PieceTag> tags;
};

class ShardingRestoreTest : public ShardingStrategyTest {
 protected:
  // The tags the stage gives at the end of the current batch.
  std::vector<PieceTag> EndBatchTags() {
    TagRecorder r;
    EXPECT_TRUE(stage_->EndBatch(r).ok());
    return r.tags;
  }

  // What the workers hold after the tags `tags` (the last per piece wins; an
  // empty one forgets): one HeldPiece per tagged piece, shaped as its tag says.
  static RestoredSession HeldFrom(const std::vector<PieceTag>& tags) {
    std::map<TensorId, PieceTag> last;
    for (const PieceTag& t : tags) {
      if (t.placement.empty()) last.erase(t.id);
      else last[t.id] = t;
    }
    RestoredSession session;
    session.client = 1;
    for (const auto& [id, t] : last) {
      Result<DecodedTag> d = DecodePieceTag(t.placement);
      EXPECT_TRUE(d.ok()) << d.status().ToString();
      if (!d.ok()) continue;
      session.held.push_back({t.worker, id, PieceShape(d->tensor, d->member), d->tensor.meta.dtype, t.logical,
                              t.pieces, t.placement});
    }
    return session;
  }

  // A second stage, as a restarted dispatcher makes it: the same workers
  // and configs, then Restore(session).
  std::unique_ptr<Stage> Restarted(const RestoredSession& session, Status& restored, TagRecorder& out) {
    const StageContext context{HostKind::kDispatcher, "dispatcher-test", "sharding", &options_, nullptr};
    Result<std::unique_ptr<Stage>> created = ShardingStage::Create(context, &StartAddressOnlyRendezvousForTest);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    std::unique_ptr<Stage> stage = std::move(*created);
    Instruction membership;
    membership.op = Op::kMembership;
    membership.attrs.shape = {0, 1, 2, 3};
    EXPECT_TRUE(stage->Process(std::move(membership), out).ok());
    out.emitted.clear();
    restored = stage->Restore(session, out);
    return stage;
  }

  // The same instruction through the old stage and `other`: what each emitted.
  std::pair<std::vector<std::string>, std::vector<std::string>> Both(Stage& other, Instruction inst) {
    inst.client = 1;
    inst.seq = ++seq_;
    Instruction copy = inst;
    out_.emitted.clear();
    EXPECT_TRUE(stage_->Process(std::move(inst), out_).ok());
    TagRecorder r;
    EXPECT_TRUE(other.Process(std::move(copy), r).ok());
    return {Summary(out_.emitted), Summary(r.emitted)};
  }

  // Sharded %10, replicated %11 and the pending sum %14 = %12 (cut on
  // columns) @ %13 (cut on rows); the tags the batch gave.
  std::vector<PieceTag> MakePlacedTensors() {
    Randn(10, {4, 3}, "rows");
    Randn(11, {3, 2}, "rep");
    Randn(12, {4, 6}, "cols");
    Randn(13, {6, 2}, "rows");
    Send(Make(Op::kMatmul, {14}, {12, 13}));
    return EndBatchTags();
  }
};

TEST_F(ShardingRestoreTest, TagsEveryPieceOfARecordAtTheBatchEnd) {
  const std::vector<TensorId> pieces = Pieces(Randn(10, {4, 3}, "rows"));
  const std::vector<PieceTag> tags = EndBatchTags();
  ASSERT_EQ(tags.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(tags[k].worker, static_cast<int>(k));
    EXPECT_EQ(tags[k].id, pieces[k]);
    EXPECT_EQ(tags[k].logical, 10u);
    EXPECT_EQ(tags[k].pieces, 2u);
    Result<DecodedTag> d = DecodePieceTag(tags[k].placement);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->member, k);
    EXPECT_EQ(d->tensor.placement.ToString(), "sharded(axis 0) on [0, 1] sizes [2, 2]");
    EXPECT_EQ(d->tensor.meta.shape, (Shape{4, 3}));
  }
  EXPECT_TRUE(EndBatchTags().empty()) << "an unchanged record is not told again";
  Send(Make(Op::kFree, {}, {10}));
  const std::vector<PieceTag> forgotten = EndBatchTags();
  ASSERT_EQ(forgotten.size(), 2u);
  for (const PieceTag& t : forgotten) EXPECT_TRUE(t.placement.empty()) << "a freed record's pieces are forgotten";
}

TEST_F(ShardingRestoreTest, ARestartedStagePlacesOpsAsTheOldOneWould) {
  const RestoredSession session = HeldFrom(MakePlacedTensors());
  ASSERT_EQ(session.held.size(), 2u + 2u + 2u + 2u + 2u);
  Status restored;
  TagRecorder out;
  std::unique_ptr<Stage> again = Restarted(session, restored, out);
  ASSERT_TRUE(restored.ok()) << restored.ToString();
  EXPECT_TRUE(out.emitted.empty()) << "every piece had a record: nothing to free";
  // Its configs come back with the RESUME.
  for (const auto& [signal, axis, workers, replicated] :
       std::vector<std::tuple<std::string, std::vector<int64_t>, Shape, bool>>{
           {"rows", {0}, {0, 1}, false}, {"cols", {1}, {0, 1}, false}, {"rep", {}, {0, 1}, true}}) {
    Instruction configure;
    configure.op = Op::kConfigure;
    configure.client = 1;
    configure.signal = signal;
    configure.attrs.axes = axis;
    configure.attrs.shape = workers;
    configure.attrs.keepdims = replicated;
    ASSERT_TRUE(again->Process(std::move(configure), out).ok());
  }
  // Shard-local, a broadcast operand, a pending sum all-reduced, a fetch gathered.
  for (Instruction inst : {Make(Op::kRelu, {20}, {10}), Make(Op::kMatmul, {21}, {10, 11}), Make(Op::kExp, {22}, {14}),
                           Make(Op::kFetch, {}, {10})}) {
    auto [before, after] = Both(*again, inst);
    EXPECT_EQ(before, after) << inst.Describe();
  }
}

TEST_F(ShardingRestoreTest, FreesPiecesNoRecordHolds) {
  RestoredSession session = HeldFrom(MakePlacedTensors());
  session.held.push_back({1, kPhysicalIdBase + 999, {2, 2}, DType::kFloat32, 0, 0, ""});
  Status restored;
  TagRecorder out;
  std::unique_ptr<Stage> again = Restarted(session, restored, out);
  ASSERT_TRUE(restored.ok()) << restored.ToString();
  ASSERT_EQ(out.emitted.size(), 1u);
  EXPECT_EQ(out.emitted[0].op, Op::kFree);
  EXPECT_EQ(out.emitted[0].worker, 1);
  EXPECT_EQ(out.emitted[0].operands, std::vector<TensorId>{kPhysicalIdBase + 999});
}

// A rejoining worker whose old index a fresh worker took comes back under
// another: its pieces are found there, and told their new records.
TEST_F(ShardingRestoreTest, FollowsAWorkerThatCameBackUnderAnotherIndex) {
  RestoredSession session = HeldFrom(MakePlacedTensors());
  for (HeldPiece& piece : session.held)
    if (piece.worker == 1) piece.worker = 3;
  Status restored;
  TagRecorder out;
  std::unique_ptr<Stage> again = Restarted(session, restored, out);
  ASSERT_TRUE(restored.ok()) << restored.ToString();
  ASSERT_FALSE(out.tags.empty());
  for (const PieceTag& tag : out.tags) {
    Result<DecodedTag> d = DecodePieceTag(tag.placement);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(tag.worker, d->tensor.placement.workers[d->member]);
    EXPECT_FALSE(Contains(d->tensor.placement.workers, 1)) << d->tensor.placement.ToString();
  }
  Instruction relu = Make(Op::kRelu, {20}, {10});
  relu.client = 1;
  relu.seq = 100;
  out.emitted.clear();
  ASSERT_TRUE(again->Process(std::move(relu), out).ok());
  EXPECT_EQ(Summary(out.emitted), (std::vector<std::string>{"relu@0", "relu@3"}));
}

// Each way a session's tags can be wrong, applied to a good session.
TEST_F(ShardingRestoreTest, RefusesMalformedOrContradictoryTags) {
  const RestoredSession good = HeldFrom(MakePlacedTensors());
  auto first_of = [&](TensorId logical) {
    return static_cast<size_t>(std::find_if(good.held.begin(), good.held.end(),
                                            [&](const HeldPiece& p) { return p.logical == logical; }) -
                               good.held.begin());
  };
  const size_t a = first_of(10), b = first_of(11);
  struct Case {
    const char* what;
    std::function<void(RestoredSession&)> spoil;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"a flipped magic byte", [&](RestoredSession& s) { s.held[a].placement[0] = 'x'; }, "malformed placement tag"},
      {"a truncated tag", [&](RestoredSession& s) { s.held[a].placement.pop_back(); }, "malformed placement tag"},
      {"a byte too many", [&](RestoredSession& s) { s.held[a].placement.push_back('\0'); }, "bytes after its end"},
      {"another tensor's record", [&](RestoredSession& s) { s.held[a].placement = s.held[b].placement; },
       "another tensor"},
      {"a piece held in another shape", [&](RestoredSession& s) { s.held[a].shape = {3, 3}; }, "the worker holds"},
      {"a piece on another worker", [&](RestoredSession& s) { s.held[a].worker = 3; }, "places that piece elsewhere"},
      {"a piece missing", [&](RestoredSession& s) { s.held.erase(s.held.begin() + static_cast<long>(a)); },
       "of its 2 pieces"},
      {"the client sees another shape", [&](RestoredSession& s) { s.live.push_back({10, {5, 3}, DType::kFloat32}); },
       "by the client"},
  };
  for (const Case& c : cases) {
    RestoredSession spoiled = good;
    c.spoil(spoiled);
    Status restored;
    TagRecorder out;
    std::unique_ptr<Stage> again = Restarted(spoiled, restored, out);
    EXPECT_EQ(restored.code(), Code::kInvalidArgument) << c.what;
    EXPECT_NE(restored.message().find(c.says), std::string::npos) << c.what << ": " << restored.message();
    EXPECT_TRUE(out.emitted.empty()) << c.what;
    // Nothing of the client is kept: a fetch of %10 is of an unrecorded tensor, not a gathered one.
    Instruction fetch = Make(Op::kFetch, {}, {10});
    fetch.client = 1;
    ASSERT_TRUE(again->Process(std::move(fetch), out).ok());
    EXPECT_EQ(CountOp(out.emitted, Op::kAllGather), 0u) << c.what;
  }
}

TEST(PieceTagTest, NoPrefixOfATagDecodes) {
  Tensor t{TensorMeta{{4, 3}, DType::kFloat32}, Placement{Placement::Kind::kSharded, {0, 1}, {kPhysicalIdBase, kPhysicalIdBase + 1}, 0, {2, 2}}};
  const std::string tag = PieceTagOf(EncodeRecord(10, t), 1);
  ASSERT_TRUE(DecodePieceTag(tag).ok());
  for (size_t n = 0; n < tag.size(); ++n) EXPECT_FALSE(DecodePieceTag(tag.substr(0, n)).ok()) << n;
  Tensor lying = t;
  lying.placement.sizes = {2, 1};  // adds up to 3, not 4
  EXPECT_FALSE(DecodePieceTag(PieceTagOf(EncodeRecord(10, lying), 0)).ok());
  EXPECT_FALSE(DecodePieceTag(PieceTagOf(EncodeRecord(10, t), 2)).ok()) << "member 2 of 2 pieces";
  EXPECT_FALSE(DecodePieceTag(PieceTagOf(EncodeRecord(kPhysicalIdBase, t), 0)).ok()) << "a physical logical id";
}

// A hostile worker's record whose arithmetic wraps (review 4, F1 and F2):
// mesh sides whose int64 product is the piece count, shard sizes whose sum
// wraps to the dim. Both are refused before anything multiplies or adds them.
TEST(PieceTagTest, ARecordWhoseArithmeticWrapsIsRefused) {
  Tensor mesh{TensorMeta{{4, 4}, DType::kFloat32}, Placement{}};
  mesh.placement.kind = Placement::Kind::kMesh;
  mesh.placement.workers = {0};
  mesh.placement.ids = {kPhysicalIdBase};
  mesh.placement.mesh_shape = {280001728286195853, 1000005};  // the product wraps to 1
  mesh.placement.mesh_axes = {MeshAxis{}, MeshAxis{}};
  EXPECT_NE(CheckRecord(10, mesh).message().find("rows x columns"), std::string::npos);

  const int64_t big = std::numeric_limits<int64_t>::max();
  Tensor sharded{TensorMeta{{10}, DType::kFloat32},
                 Placement{Placement::Kind::kSharded, {0, 1, 2}, {kPhysicalIdBase, kPhysicalIdBase + 1, kPhysicalIdBase + 2},
                           0, {big, big, 12}}};  // adds up to 10 in wrapping arithmetic
  EXPECT_NE(CheckRecord(10, sharded).message().find("a shard size outside 0..10"), std::string::npos);
  sharded.placement.sizes = {4, 3, 3};
  EXPECT_TRUE(CheckRecord(10, sharded).ok());
}

}  // namespace
}  // namespace gt::sharding::strategy_test
