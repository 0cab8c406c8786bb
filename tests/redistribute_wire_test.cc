// redistribute and inspect from a client that lies (raw wire, no client
// library checks), on a process cluster of four workers: a stated shape or
// dtype that is not the tensor's, an operand that does not exist, a
// recording asked for with a result. Each gets a clear error at the next
// sync point, promptly (well inside the workers' collective timeout), no
// host dies, and another client's work is undisturbed. (Found by a hostile
// review: a lying shape made a worker's Gloo abort the process; an unknown
// operand made every member wait out the collective timeout.)
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cluster.h"
#include "gt/instruction.h"
#include "gt/op.h"
#include "gt/op_attrs.h"

namespace gt::testing {
namespace {

constexpr int kPromptMs = 8000;  // the workers wait 60 s for a collective's members

class RedistributeWireTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new ProcessCluster(ShardingClusterOptions("redistribute", 4));
    ready_ = cluster_->WaitForWorkers(4);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(ready_) << "four workers did not register"; }
  void TearDown() override { EXPECT_TRUE(cluster_->AllAlive()) << "a host died"; }

  Instruction Redistribute(TensorId result, TensorId x, Shape shape, DType dtype, std::vector<int64_t> layout) {
    Instruction r = MakeInstruction(Op::kRedistribute, seq_++, {result}, {x});
    r.attrs.shape = std::move(shape);
    r.attrs.dtype = dtype;
    r.attrs.axes = std::move(layout);
    return r;
  }
  Instruction Floats(TensorId id, const std::vector<float>& values, Shape shape = {}) {
    Instruction f = FromFloats(id, values, std::move(shape));
    f.seq = seq_++;
    return f;
  }
  // The errors of a sync that must come promptly; empty when it did not come.
  std::vector<std::string> SyncErrors(RawClient& client) {
    std::optional<wire::Envelope> done = client.Sync(nullptr, kPromptMs);
    EXPECT_TRUE(done.has_value()) << "no answer within " << kPromptMs << " ms";
    std::vector<std::string> errors;
    if (done)
      for (const auto& e : done->errors()) errors.push_back(e.message());
    return errors;
  }
  // Another client's work, start to end.
  void OtherClientWorks() {
    RawClient other(context_, cluster_->endpoint());
    other.Send({FromFloats(1, {1, 2, 3, 4}), MakeInstruction(Op::kAdd, 2, {2}, {1, 1})});
    EXPECT_EQ(FetchFloats(other, 2, 3), (std::vector<float>{2, 4, 6, 8}));
  }

  static bool Mentions(const std::vector<std::string>& errors, const std::string& what) {
    for (const std::string& e : errors)
      if (e.find(what) != std::string::npos) return true;
    return false;
  }

  static ProcessCluster* cluster_;
  static bool ready_;
  zmq::context_t context_{1};
  uint64_t seq_ = 1;
};

ProcessCluster* RedistributeWireTest::cluster_ = nullptr;
bool RedistributeWireTest::ready_ = false;

TEST_F(RedistributeWireTest, AStatedShapeThatIsNotTheTensorsIsRefused) {
  RawClient liar(context_, cluster_->endpoint());
  liar.Send({Floats(2, {1, 2, 3, 4, 5, 6, 7, 8}, {2, 4})});  // before any config: no record at the dispatcher
  liar.Send({Redistribute(30, 2, {4, 2}, DType::kFloat32, {1, 0, 0, 1})});
  liar.Send({Redistribute(31, 30, {4, 2}, DType::kFloat32, {2, 0, 0, 1, 2, 3})});  // an all-gather of the pieces
  std::vector<std::string> errors = SyncErrors(liar);
  EXPECT_TRUE(Mentions(errors, "not of the shape and dtype the instruction states")) << ::testing::PrintToString(errors);
  // Made after its first redistribute, a tensor has a record: the dispatcher itself refuses the lie.
  liar.Send({Floats(3, {1, 2, 3})});
  liar.Send({Redistribute(32, 3, {8}, DType::kFloat32, {1, 0, 0, 1, 2, 3})});  // bigger than it is
  errors = SyncErrors(liar);
  EXPECT_TRUE(Mentions(errors, "the operand is [3] float32, the instruction says [8] float32"))
      << ::testing::PrintToString(errors);
  liar.Send({Redistribute(33, 4, {4}, DType::kInt64, {1, 0, 0, 1})});  // unknown, and a dtype
  errors = SyncErrors(liar);
  EXPECT_TRUE(Mentions(errors, "%4")) << ::testing::PrintToString(errors);
  OtherClientWorks();
}

TEST_F(RedistributeWireTest, AStatedDtypeThatIsNotTheTensorsIsRefused) {
  RawClient liar(context_, cluster_->endpoint());
  liar.Send({Floats(1, {1, 2, 3, 4})});
  liar.Send({Redistribute(2, 1, {4}, DType::kInt64, {1, 0, 0, 1, 2, 3})});
  liar.Send({Redistribute(3, 2, {4}, DType::kInt64, {2, 0, 0, 1, 2, 3})});
  std::vector<std::string> errors = SyncErrors(liar);
  EXPECT_TRUE(Mentions(errors, "not of the shape and dtype the instruction states")) << ::testing::PrintToString(errors);
  OtherClientWorks();
}

TEST_F(RedistributeWireTest, AnUnknownOperandFailsPromptly) {
  RawClient client(context_, cluster_->endpoint());
  client.Send({Floats(1, {1, 2, 3, 4})});
  client.Send({Redistribute(40, 999, {4}, DType::kFloat32, {2, 0, 0, 1, 2, 3})});  // a broadcast from nothing
  std::vector<std::string> errors = SyncErrors(client);
  EXPECT_TRUE(Mentions(errors, "%999")) << ::testing::PrintToString(errors);
  // A refused redistribute leaves no record behind: 998 is still unknown.
  client.Send({Redistribute(42, 998, {4}, DType::kFloat32, {9, 0, 0})});
  Instruction inspect = MakeInspect(InspectMode::kLayout, {998});
  inspect.seq = seq_++;
  client.Send({inspect});
  errors = SyncErrors(client);
  EXPECT_TRUE(Mentions(errors, "expected attrs {layout")) << ::testing::PrintToString(errors);
  EXPECT_TRUE(Mentions(errors, "%998")) << ::testing::PrintToString(errors);
  OtherClientWorks();
}

TEST_F(RedistributeWireTest, InspectMakesNoTensor) {
  RawClient client(context_, cluster_->endpoint());
  Instruction inspect = MakeInspect(InspectMode::kStartRecording);
  inspect.seq = seq_++;
  inspect.results = {77};
  client.Send({inspect});
  EXPECT_TRUE(Mentions(SyncErrors(client), "inspect makes no tensor"));
  OtherClientWorks();
}

}  // namespace
}  // namespace gt::testing
