// The sharding stage's part of a distributed checkpoint, in-process (no
// hosts, no LibTorch): a client's plan is split by piece, each part sent to
// the worker holding that piece and naming the piece, its paths resolved
// under checkpoint_root; a path outside it, or a piece the tensor does not
// have, is refused before any worker sees it.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gt/op_attrs.h"
#include "gt/stage.h"
#include "rendezvous.h"
#include "sharding.h"
#include "sharding_stage.h"

namespace gt::sharding {
namespace {

class RecordingEmitter final : public Emitter {
 public:
  void Emit(Instruction&& inst) override { emitted.push_back(std::move(inst)); }
  std::vector<Instruction> emitted;
};

class NoRendezvous final : public Rendezvous {
 public:
  const std::string& address() const override { return address_; }
  void MarkLost(uint64_t, int) override {}

 private:
  std::string address_ = "rendezvous.test:29500/abc";
};

Result<std::unique_ptr<Rendezvous>> StartNoRendezvous(const std::string&, int64_t) {
  return std::unique_ptr<Rendezvous>(new NoRendezvous());
}

std::string Text(const Instruction& inst) {
  return inst.payload ? std::string(reinterpret_cast<const char*>(inst.payload->data()), inst.payload->size()) : "";
}

class ShardingCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.Set(kOptionRendezvousHost, std::string("127.0.0.1"));
    options_.Set(kOptionRendezvousPort, int64_t{0});
    options_.Set(kOptionExplain, false);
    options_.Set(kOptionAutoShard, false);
    options_.Set(kOptionCheckpointRoot, std::string("/srv/ckpt"));
    const StageContext context{HostKind::kDispatcher, "dispatcher-test", "sharding", &options_, nullptr};
    Result<std::unique_ptr<Stage>> stage = ShardingStage::Create(context, &StartNoRendezvous);
    ASSERT_TRUE(stage.ok()) << stage.status().ToString();
    stage_ = std::move(*stage);
    Instruction membership;
    membership.op = Op::kMembership;
    membership.attrs.shape = {0, 1, 2, 3};
    ASSERT_TRUE(Send(std::move(membership)).ok());
    Instruction configure;  // "rows": axis 0 over workers 2 and 3
    configure.op = Op::kConfigure;
    configure.signal = "rows";
    configure.attrs.axes = {0};
    configure.attrs.shape = {2, 3};
    ASSERT_TRUE(Send(std::move(configure)).ok());
    Instruction randn;
    randn.op = Op::kRandn;
    randn.results = {5};
    randn.attrs.shape = {4, 3};
    randn.signal = "rows";
    ASSERT_TRUE(Send(std::move(randn)).ok());
    for (const Instruction& piece : out_.emitted) pieces_.push_back(piece.results.at(0));
    ASSERT_EQ(pieces_.size(), 2u);
  }

  Status Send(Instruction inst) {
    if (inst.op != Op::kMembership) inst.client = 1;
    inst.seq = ++seq_;
    out_.emitted.clear();
    return stage_->Process(std::move(inst), out_);
  }

  Status Checkpoint(Op op, std::vector<TensorId> operands, const std::string& plan) {
    Instruction inst;
    inst.op = op;
    inst.operands = std::move(operands);
    inst.payload = CopyToBlob(plan.data(), plan.size());
    return Send(std::move(inst));
  }

  OptionValues options_;
  std::unique_ptr<Stage> stage_;
  RecordingEmitter out_;
  uint64_t seq_ = 0;
  std::vector<TensorId> pieces_;  // tensor 5's, on workers 2 and 3
};

TEST_F(ShardingCheckpointTest, EachPieceGoesToItsWorkerWithItsPathsResolved) {
  ASSERT_TRUE(Checkpoint(Op::kCheckpointWrite, {5}, "write 1 run/a.1.bin\nwrite 0 /srv/ckpt/run/a.0.bin\n").ok());
  ASSERT_EQ(out_.emitted.size(), 2u);
  EXPECT_EQ(out_.emitted[0].worker, 2);
  EXPECT_EQ(out_.emitted[0].operands, std::vector<TensorId>{pieces_[0]});
  EXPECT_EQ(Text(out_.emitted[0]), "write 0 /srv/ckpt/run/a.0.bin\n");
  EXPECT_EQ(out_.emitted[1].worker, 3);
  EXPECT_EQ(out_.emitted[1].operands, std::vector<TensorId>{pieces_[1]});
  EXPECT_EQ(Text(out_.emitted[1]), "write 1 /srv/ckpt/run/a.1.bin\n");
  // A read fills only the pieces its plan names.
  ASSERT_TRUE(Checkpoint(Op::kCheckpointRead, {5}, "read 1 2 4 3 2 0 0 0 2 3 run/a.0.bin\n").ok());
  ASSERT_EQ(out_.emitted.size(), 1u);
  EXPECT_EQ(out_.emitted[0].worker, 3);
  EXPECT_EQ(Text(out_.emitted[0]), "read 1 2 4 3 2 0 0 0 2 3 /srv/ckpt/run/a.0.bin\n");
}

TEST_F(ShardingCheckpointTest, TheMetadataGoesToOneWorkerWithItsText) {
  ASSERT_TRUE(Checkpoint(Op::kCheckpointWrite, {}, "metadata run/.metadata\n{\"tensors\": {}}\n").ok());
  ASSERT_EQ(out_.emitted.size(), 1u);
  EXPECT_GE(out_.emitted[0].worker, 0);
  EXPECT_EQ(Text(out_.emitted[0]), "metadata /srv/ckpt/run/.metadata\n{\"tensors\": {}}\n");
}

TEST_F(ShardingCheckpointTest, RefusedBeforeAnyWorkerSeesIt) {
  struct Case {
    Op op;
    std::vector<TensorId> operands;
    const char* plan;
    const char* says;
  };
  for (const Case& c : {Case{Op::kCheckpointWrite, {5}, "write 0 /etc/a.bin\n", "/etc/a.bin is outside"},
                        Case{Op::kCheckpointRead, {}, "metadata ../x/.metadata\n", "../x/.metadata is outside"},
                        Case{Op::kCheckpointWrite, {5}, "write 2 run/a.2.bin\n", "piece 2 of a tensor in 2 piece(s)"},
                        Case{Op::kCheckpointWrite, {5}, "read 0 0 run/a\n", "mixes verbs"},
                        Case{Op::kCheckpointWrite, {}, "write 0 run/a\n", "one metadata line"},
                        Case{Op::kCheckpointRead, {5}, "", "carries no checkpoint plan"}}) {
    Instruction inst;
    inst.op = c.op;
    inst.operands = c.operands;
    if (*c.plan) inst.payload = CopyToBlob(c.plan, std::string(c.plan).size());
    Status status = Send(std::move(inst));
    ASSERT_FALSE(status.ok()) << c.plan;
    EXPECT_NE(status.message().find(c.says), std::string::npos) << status.message();
    EXPECT_TRUE(out_.emitted.empty()) << c.plan;
  }
}

}  // namespace
}  // namespace gt::sharding
