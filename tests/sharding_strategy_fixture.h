// What the sharding_strategy_test files share: the sharding stage driven
// in-process (no hosts, no LibTorch) with a recording emitter and a
// rendezvous that hosts nothing; configs and membership go in as
// instructions (ShardingStrategyTest).
#pragma once

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gt/op_attrs.h"
#include "gt/stage.h"
#include "rendezvous.h"
#include "sharding.h"
#include "sharding_stage.h"
#include "strategy_table.h"

namespace gt::sharding::strategy_test {

constexpr const char* kRendezvousForTest = "rendezvous.test:29500/abc123";

// Keeps everything the stage emits, in order.
class RecordingEmitter final : public Emitter {
 public:
  void Emit(Instruction&& inst) override { emitted.push_back(std::move(inst)); }
  std::vector<Instruction> emitted;
};

// What the stage marked lost in its rendezvous: (generation, worker).
inline std::vector<std::pair<uint64_t, int>> marked_lost;

// A rendezvous that hosts nothing: the stage only names its address.
class AddressOnlyRendezvous final : public Rendezvous {
 public:
  const std::string& address() const override { return address_; }
  void MarkLost(uint64_t generation, int worker) override { marked_lost.emplace_back(generation, worker); }

 private:
  std::string address_ = kRendezvousForTest;
};

inline Result<std::unique_ptr<Rendezvous>> StartAddressOnlyRendezvousForTest(const std::string&, int64_t) {
  return std::unique_ptr<Rendezvous>(new AddressOnlyRendezvous());
}

// "matmul@1" for each instruction: its op and the worker it is sent to.
inline std::vector<std::string> Summary(const std::vector<Instruction>& insts) {
  std::vector<std::string> out;
  for (const Instruction& inst : insts) out.push_back(std::string(OpName(inst.op)) + "@" + std::to_string(inst.worker));
  return out;
}

inline size_t CountOp(const std::vector<Instruction>& insts, Op op) {
  size_t n = 0;
  for (const Instruction& inst : insts) n += inst.op == op;
  return n;
}

class ShardingStrategyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    marked_lost.clear();
    ::unsetenv("GT_EXPLAIN");
    ::unsetenv("GT_AUTO_SHARD");
    options_.Set(kOptionRendezvousHost, std::string("127.0.0.1"));
    options_.Set(kOptionRendezvousPort, int64_t{0});
    options_.Set(kOptionExplain, false);
    options_.Set(kOptionAutoShard, false);
    options_.Set(kOptionCheckpointRoot, std::string("/srv/ckpt"));
    const StageContext context{HostKind::kDispatcher, "dispatcher-test", "sharding", &options_, nullptr};
    Result<std::unique_ptr<Stage>> stage = ShardingStage::Create(context, &StartAddressOnlyRendezvousForTest);
    ASSERT_TRUE(stage.ok()) << stage.status().ToString();
    stage_ = std::move(*stage);
    Instruction membership;
    membership.op = Op::kMembership;
    membership.attrs.shape = {0, 1, 2, 3};
    Send(std::move(membership));
    // Client 1 places its tensors: a config for each layout the tests use.
    Configure("rows", {0}, {0, 1}, false);   // shard axis 0 over workers 0 and 1
    Configure("cols", {1}, {0, 1}, false);   // shard axis 1 over workers 0 and 1
    Configure("rep", {}, {0, 1}, true);      // replicated on workers 0 and 1
    Configure("far", {0}, {2, 3}, false);    // shard axis 0 over workers 2 and 3
  }

  // What the stage emitted for `inst` (stamped with client 1 and the next
  // seq); fails the test when the stage refuses it.
  std::vector<Instruction> Send(Instruction inst) {
    Status status = SendStatus(std::move(inst));
    EXPECT_TRUE(status.ok()) << status.ToString();
    return out_.emitted;
  }
  Status SendStatus(Instruction inst) {
    if (inst.op != Op::kMembership) inst.client = 1;
    inst.seq = ++seq_;
    out_.emitted.clear();
    return stage_->Process(std::move(inst), out_);
  }

  void Configure(const std::string& signal, std::vector<int64_t> axis, Shape workers, bool replicated) {
    Instruction configure;
    configure.op = Op::kConfigure;
    configure.signal = signal;
    configure.attrs.axes = std::move(axis);
    configure.attrs.shape = std::move(workers);
    configure.attrs.keepdims = replicated;
    EXPECT_TRUE(Send(std::move(configure)).empty());
  }

  // A tensor made in place as client tensor `id` in scope `signal`; what it
  // emitted. randn (the workers' generators) where shards are made, ones
  // where copies are (a sharded randn is no constant the stage could remake
  // instead of moving; a replicated ones is one copy on each worker).
  std::vector<Instruction> Randn(TensorId id, Shape shape, const std::string& signal) {
    Instruction randn;
    randn.op = signal == "rep" ? Op::kOnes : Op::kRandn;
    randn.results = {id};
    randn.attrs.shape = std::move(shape);
    randn.signal = signal;
    return Send(std::move(randn));
  }

  static Instruction Make(Op op, std::vector<TensorId> results, std::vector<TensorId> operands) {
    Instruction inst;
    inst.op = op;
    inst.results = std::move(results);
    inst.operands = std::move(operands);
    return inst;
  }

  // The per-worker ids of a creation's pieces, in the order it emitted them.
  static std::vector<TensorId> Pieces(const std::vector<Instruction>& creation) {
    std::vector<TensorId> ids;
    for (const Instruction& inst : creation) ids.push_back(inst.results.at(0));
    return ids;
  }

  OptionValues options_;
  std::unique_ptr<Stage> stage_;
  RecordingEmitter out_;
  uint64_t seq_ = 0;
};

}  // namespace gt::sharding::strategy_test
