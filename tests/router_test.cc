// The dispatcher's parts in-process, without a socket: admission (roles and
// quotas, in the client's own terms), the router (id checks,
// target worker, units, refusals), the worker registry's batches, sync
// tracking and the failed-tensor ledger. What the router sends is read back
// from the per-worker batches it fills; what goes to clients is recorded by
// a PeerSender.
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dispatcher/admission.h"
#include "dispatcher/client_table.h"
#include "ir/codec.h"
#include "gt/op_attrs.h"
#include "gt/unit.h"
#include "dispatcher/router.h"
#include "dispatcher/stats_fanout.h"
#include "dispatcher/sync_tracker.h"
#include "dispatcher/worker_registry.h"

namespace gt {
namespace {

// Messages to peers, by routing id.
class RecordingSender final : public PeerSender {
 public:
  bool Send(const std::string& route, const wire::Envelope& env, const std::vector<BlobPtr>&) override {
    sent[route].push_back(env);
    return reachable;
  }
  std::map<std::string, std::vector<wire::Envelope>> sent;
  bool reachable = true;
};

class RouterTest : public ::testing::Test {
 protected:
  RouterTest() : syncs_(workers_, sender_, "dispatcher-test"), router_(clients_, workers_, syncs_, [this] { Flush(); }) {
    workers_.Register("w0", "worker-0", "", "");
    workers_.Register("w1", "worker-1", "", "");
  }

  ClientState& NewClient(const std::string& route) {
    bool created = false;
    return clients_.ForRoute(route, 0, &created);
  }

  // What each worker got since the last call, decoded.
  std::map<std::string, std::vector<Instruction>> TakeBatches() {
    router_.EndBatch();
    auto out = std::move(batches_);
    batches_.clear();
    return out;
  }

  static Instruction Op1(Op op, ClientId client, uint64_t seq, std::vector<TensorId> operands, TensorId result) {
    Instruction inst;
    inst.op = op;
    inst.client = client;
    inst.seq = seq;
    inst.operands = std::move(operands);
    inst.results = {result};
    inst.attrs.shape = {2, 2};
    return inst;
  }

  void Flush() {
    workers_.Flush([this](const WorkerState& w) {
      for (const wire::Instruction& wi : w.outgoing.instructions()) {
        Result<Instruction> inst = DecodeInstruction(wi, w.payloads);
        EXPECT_TRUE(inst.ok()) << inst.status().ToString();
        if (inst.ok()) batches_[w.name].push_back(std::move(*inst));
      }
      return true;
    });
  }

  ClientTable clients_;
  WorkerRegistry workers_;
  RecordingSender sender_;
  SyncTracker syncs_;
  Router router_;
  std::map<std::string, std::vector<Instruction>> batches_;
};

TEST_F(RouterTest, ClientsArePlacedRoundRobinAndOpsFollowTheirOperands) {
  ClientState& a = NewClient("a");
  ClientState& b = NewClient("b");
  ASSERT_TRUE(router_.Accept(Op1(Op::kZeros, a.id, 1, {}, 1)).ok());
  ASSERT_TRUE(router_.Accept(Op1(Op::kZeros, b.id, 1, {}, 1)).ok());
  ASSERT_TRUE(router_.Accept(Op1(Op::kRelu, a.id, 2, {1}, 2)).ok());
  auto batches = TakeBatches();
  ASSERT_EQ(batches["worker-0"].size(), 2u);
  ASSERT_EQ(batches["worker-1"].size(), 1u);
  EXPECT_EQ(batches["worker-0"][0].client, a.id);
  EXPECT_EQ(batches["worker-0"][1].op, Op::kRelu);
  EXPECT_EQ(batches["worker-1"][0].client, b.id);
  EXPECT_EQ(a.tensors.at(2), 0u);
  EXPECT_EQ(b.tensors.at(1), 1u);
}

TEST_F(RouterTest, RefusesUnknownIdsAndTakenResultsAndRemembersWhatFailed) {
  ClientState& c = NewClient("c");
  Status unknown = router_.Accept(Op1(Op::kRelu, c.id, 1, {7}, 2));
  EXPECT_EQ(unknown.code(), Code::kNotFound);
  EXPECT_NE(unknown.message().find("unknown tensor %7"), std::string::npos) << unknown.message();
  // %2 was never made: a use names op #1, the one that failed.
  Status after = router_.Accept(Op1(Op::kNeg, c.id, 2, {2}, 3));
  EXPECT_EQ(after.code(), Code::kFailedPrecondition);
  EXPECT_NE(after.message().find("operand %2 does not exist because op #1 failed"), std::string::npos) << after.message();
  ASSERT_TRUE(router_.Accept(Op1(Op::kOnes, c.id, 3, {}, 4)).ok());
  Status taken = router_.Accept(Op1(Op::kOnes, c.id, 4, {}, 4));
  EXPECT_EQ(taken.code(), Code::kInvalidArgument);
  EXPECT_EQ(c.tensors.count(4), 1u) << "a refused op keeps the live tensor its result id names";
  auto batches = TakeBatches();
  EXPECT_EQ(batches["worker-0"].size() + batches["worker-1"].size(), 1u) << "only the accepted op reaches a worker";
}

TEST_F(RouterTest, TheFirstOperandAtFaultIsNamedWhateverItsFault) {
  ClientState& c = NewClient("c");
  ASSERT_FALSE(router_.Accept(Op1(Op::kRelu, c.id, 1, {9}, 2)).ok());  // %2 failed (op #1)
  Status unknown_first = router_.Accept(Op1(Op::kAdd, c.id, 2, {7, 2}, 3));
  EXPECT_EQ(unknown_first.code(), Code::kNotFound) << unknown_first.message();
  Status failed_first = router_.Accept(Op1(Op::kAdd, c.id, 3, {2, 7}, 4));
  EXPECT_EQ(failed_first.code(), Code::kFailedPrecondition) << failed_first.message();
}

TEST_F(RouterTest, AnOpPlacedOnADeadWorkerIsRefusedNamingIt) {
  ClientState& c = NewClient("c");
  ASSERT_TRUE(workers_.MarkLost(1));
  Instruction placed = Op1(Op::kZeros, c.id, 1, {}, 1);
  placed.worker = 1;
  Status s = router_.Accept(std::move(placed));
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("worker index 1 is not a live worker (1 live)"), std::string::npos) << s.message();
}

TEST_F(RouterTest, AUnitGoesToAWorkerOnceBeforeItsFirstRunAndItsInputsAreConsumed) {
  ClientState& c = NewClient("c");
  ASSERT_TRUE(router_.Accept(Op1(Op::kZeros, c.id, 1, {}, 1)).ok());
  Status missing = router_.Accept(MakeRunUnit(c.id, 2, 42, {1}, {2}, {}));
  EXPECT_EQ(missing.code(), Code::kNotFound);
  const std::string bytes = "template";
  ASSERT_TRUE(router_.Accept(MakeDefineUnit(c.id, 3, 42, CopyToBlob(bytes.data(), bytes.size()))).ok());
  ASSERT_TRUE(router_.Accept(MakeRunUnit(c.id, 4, 42, {1}, {3}, {})).ok());
  ASSERT_TRUE(router_.Accept(MakeRunUnit(c.id, 5, 42, {3}, {4}, {0})).ok());
  auto batches = TakeBatches();
  const std::vector<Instruction>& w0 = batches["worker-0"];
  ASSERT_EQ(w0.size(), 4u);  // zeros, define, run, run
  EXPECT_EQ(w0[1].op, Op::kDefineUnit);
  EXPECT_EQ(UnitKey(w0[1]), 42u);
  EXPECT_EQ(w0[2].op, Op::kRunUnit);
  EXPECT_EQ(w0[3].op, Op::kRunUnit);
  EXPECT_EQ(c.tensors.count(3), 0u) << "the second run consumed %3";
  EXPECT_EQ(c.tensors.count(4), 1u);
}

TEST_F(RouterTest, ARefusedRunStillFreesTheInputsItWouldHaveConsumed) {
  ClientState& c = NewClient("c");
  ASSERT_TRUE(router_.Accept(Op1(Op::kZeros, c.id, 1, {}, 1)).ok());
  TakeBatches();
  Status s = router_.Accept(MakeRunUnit(c.id, 2, 99, {1}, {2}, {0}));  // no unit 99
  EXPECT_EQ(s.code(), Code::kNotFound);
  auto batches = TakeBatches();
  ASSERT_EQ(batches["worker-0"].size(), 1u);
  EXPECT_EQ(batches["worker-0"][0].op, Op::kFree);
  EXPECT_EQ(batches["worker-0"][0].operands, std::vector<TensorId>{1});
  EXPECT_EQ(c.tensors.count(1), 0u);
  EXPECT_TRUE(c.failed.Contains(2));
}

TEST_F(RouterTest, ASyncIsAnsweredWhenEveryTouchedWorkerAcknowledgesOrIsLost) {
  ClientState& a = NewClient("a");
  ClientState& b = NewClient("b");
  ASSERT_TRUE(router_.Accept(Op1(Op::kZeros, a.id, 1, {}, 1)).ok());  // worker-0
  ASSERT_TRUE(router_.Accept(Op1(Op::kZeros, b.id, 1, {}, 1)).ok());  // worker-1
  Instruction placed = Op1(Op::kZeros, a.id, 2, {}, 2);
  placed.worker = 1;
  ASSERT_TRUE(router_.Accept(std::move(placed)).ok());
  ASSERT_TRUE(router_.Accept(MakeSync(a.id, 3, 7)).ok());
  auto batches = TakeBatches();
  ASSERT_EQ(batches["worker-0"].back().op, Op::kSync);
  ASSERT_EQ(batches["worker-1"].back().op, Op::kSync);
  EXPECT_TRUE(sender_.sent["a"].empty()) << "answered before the workers acknowledged";
  wire::Envelope ack;
  ack.set_kind(wire::Envelope::SYNC_ACK);
  ack.set_client(a.id);
  ack.set_sync_id(7);
  wire::OpError* broken = ack.add_errors();  // e.g. a collective with the dying worker
  broken->set_seq(2);
  broken->set_message("connection reset by peer");
  syncs_.OnAck(a, 0, ack);
  EXPECT_TRUE(sender_.sent["a"].empty());
  ASSERT_TRUE(workers_.MarkLost(1));
  router_.OnWorkerLost(1, "killed");
  ASSERT_EQ(sender_.sent["a"].size(), 1u);
  const wire::Envelope& done = sender_.sent["a"][0];
  EXPECT_EQ(done.kind(), wire::Envelope::SYNC_DONE);
  EXPECT_EQ(done.sync_id(), 7u);
  ASSERT_EQ(done.errors_size(), 2);
  EXPECT_EQ(done.errors(0).code(), static_cast<uint32_t>(Code::kUnavailable));
  EXPECT_EQ(done.errors(0).message(), "worker worker-1 was lost (killed); this client's tensors on it are gone: %2")
      << "the cause first, though it came last";
  EXPECT_EQ(done.errors(1).seq(), 2u);
  // A client with nothing outstanding is answered at once, and told what it lost.
  ASSERT_TRUE(router_.Accept(MakeSync(b.id, 2, 1)).ok());
  ASSERT_EQ(sender_.sent["b"].size(), 1u) << "its only worker is gone: nothing to wait for";
  ASSERT_EQ(sender_.sent["b"][0].errors_size(), 1);
  EXPECT_EQ(sender_.sent["b"][0].errors(0).message(),
            "worker worker-1 was lost (killed); this client's tensors on it are gone: %1");
}

TEST_F(RouterTest, TensorsLostWithAWorkerAreNamedAtUseFreedQuietlyAndAReplacementTakesItsIndex) {
  ClientState& a = NewClient("a");
  ClientState& b = NewClient("b");
  ASSERT_TRUE(router_.Accept(Op1(Op::kZeros, a.id, 1, {}, 1)).ok());  // worker-0
  ASSERT_TRUE(router_.Accept(Op1(Op::kZeros, b.id, 1, {}, 1)).ok());  // worker-1
  ASSERT_TRUE(router_.Accept(Op1(Op::kRelu, b.id, 2, {1}, 2)).ok());
  TakeBatches();
  ASSERT_TRUE(workers_.MarkLost(1));
  router_.OnWorkerLost(1, "its connection closed");
  // Client a had nothing there: nothing to report, its tensors untouched.
  EXPECT_TRUE(a.errors.empty());
  EXPECT_EQ(a.tensors.count(1), 1u);
  EXPECT_EQ(b.errors.size(), 1u);
  // A use of a lost tensor names the op, the tensor and the worker.
  Status use = router_.Accept(Op1(Op::kNeg, b.id, 3, {2}, 3));
  EXPECT_EQ(use.code(), Code::kUnavailable);
  EXPECT_NE(use.message().find("operand %2 was lost with worker worker-1, which died"), std::string::npos)
      << use.message();
  // Freeing what was lost sends nothing and is no error.
  EXPECT_TRUE(router_.Accept(MakeFree(b.id, 4, {1, 2})).ok());
  EXPECT_TRUE(TakeBatches().empty());
  // A replacement under the same name gets index 1 back, and new tensors.
  EXPECT_EQ(workers_.Register("w1-new", "worker-1", "", ""), 1u);
  Instruction placed = Op1(Op::kZeros, b.id, 5, {}, 4);
  placed.worker = 1;
  ASSERT_TRUE(router_.Accept(std::move(placed)).ok());
  auto batches = TakeBatches();
  ASSERT_EQ(batches["worker-1"].size(), 1u);
  EXPECT_EQ(b.tensors.at(4), 1u);
  // A name never seen gets a new index.
  EXPECT_EQ(workers_.Register("w2", "worker-2", "", ""), 2u);
}

// A sharding stage's shards reach the router under physical ids; its note
// after the membership that lost the worker names the client's tensors
// instead, and a client without a note still gets its shards counted.
TEST_F(RouterTest, ALostTensorsNoteNamesTheStagesTensorsInPlaceOfTheirShards) {
  ClientState& a = NewClient("a");
  ClientState& b = NewClient("b");
  for (ClientState* c : {&a, &b}) {
    Instruction shard = Op1(Op::kZeros, c->id, 1, {}, kPhysicalIdBase + 3);
    shard.worker = 1;
    ASSERT_TRUE(router_.Accept(std::move(shard)).ok());
  }
  Instruction whole = Op1(Op::kZeros, a.id, 2, {}, 9);
  whole.worker = 1;
  ASSERT_TRUE(router_.Accept(std::move(whole)).ok());
  TakeBatches();
  ASSERT_TRUE(workers_.MarkLost(1));
  const LostWorker lost{1, "worker-1"};
  ASSERT_TRUE(router_.Accept(MakeMembership({0}, lost)).ok()) << "an announcement is the stages' business";
  ASSERT_TRUE(router_.Accept(MakeLostTensorsNote(a.id, lost, {5, 9})).ok());
  router_.OnWorkerLost(1, "killed");
  ASSERT_EQ(a.errors.size(), 1u);
  EXPECT_EQ(a.errors[0].message(), "worker worker-1 was lost (killed); this client's tensors on it are gone: %5, %9");
  ASSERT_EQ(b.errors.size(), 1u);
  EXPECT_EQ(b.errors[0].message(),
            "worker worker-1 was lost (killed); this client's tensors on it are gone: 1 shard(s) of sharded tensors");
  EXPECT_TRUE(a.lost_notes.empty()) << "a note is used once";
}

TEST_F(RouterTest, ADropReachesEveryLiveWorkerTheClientEverUsed) {
  ClientState& c = NewClient("c");
  ASSERT_TRUE(router_.Accept(Op1(Op::kZeros, c.id, 1, {}, 1)).ok());
  Instruction placed = Op1(Op::kZeros, c.id, 2, {}, 2);
  placed.worker = 1;
  ASSERT_TRUE(router_.Accept(std::move(placed)).ok());
  ASSERT_TRUE(router_.Accept(MakeSync(c.id, 3, 1)).ok());
  TakeBatches();
  ASSERT_TRUE(router_.Accept(MakeDropClient(c.id)).ok());
  auto batches = TakeBatches();
  ASSERT_EQ(batches["worker-0"].size(), 1u);
  ASSERT_EQ(batches["worker-1"].size(), 1u);
  EXPECT_EQ(batches["worker-0"][0].op, Op::kDropClient);
}

TEST_F(RouterTest, ClientsUnitsAreKeyedByTheirTemplatesBytes) {
  ClientState& a = NewClient("a");
  ClientState& b = NewClient("b");
  const std::string bytes = "same template";
  // Two clients choose different keys for one template, and one key for two.
  Instruction define_a = MakeDefineUnit(a.id, 1, 5, CopyToBlob(bytes.data(), bytes.size()));
  Instruction define_b = MakeDefineUnit(b.id, 1, 9, CopyToBlob(bytes.data(), bytes.size()));
  ClientTable::KeyUnitByContent(a, define_a);
  ClientTable::KeyUnitByContent(b, define_b);
  EXPECT_EQ(UnitKey(define_a), UnitKey(define_b)) << "the same template shares one key";
  EXPECT_NE(UnitKey(define_a), 5u);
  const std::string other = "another template";
  Instruction redefine_b = MakeDefineUnit(b.id, 2, 5, CopyToBlob(other.data(), other.size()));
  ClientTable::KeyUnitByContent(b, redefine_b);
  EXPECT_NE(UnitKey(redefine_b), UnitKey(define_a)) << "b's key 5 never reaches a's unit";
  // A run names the client's own key and is mapped through its definitions.
  Instruction run_a = MakeRunUnit(a.id, 3, 5, {}, {1}, {});
  ClientTable::KeyUnitByContent(a, run_a);
  EXPECT_EQ(UnitKey(run_a), UnitKey(define_a));
}

TEST_F(RouterTest, StatsAreAnsweredWithEveryLiveWorkersSnapshotOrTheMissingOnes) {
  StatsFanout stats(workers_, sender_, [] {
    wire::HostSnapshot own;
    own.set_instance("dispatcher-test");
    return own;
  });
  wire::Envelope request;
  request.set_kind(wire::Envelope::STATS);
  request.set_request_id(77);
  stats.Begin("client", request);
  ASSERT_EQ(sender_.sent["w0"].size(), 1u);
  ASSERT_EQ(sender_.sent["w1"].size(), 1u);
  const uint64_t asked = sender_.sent["w1"][0].request_id();
  EXPECT_TRUE(sender_.sent["client"].empty()) << "answered before the workers";
  wire::Envelope reply;
  reply.set_kind(wire::Envelope::STATS_REPLY);
  reply.set_request_id(asked);
  reply.add_snapshots()->set_instance("worker-1");
  stats.OnReply(1, reply);
  EXPECT_TRUE(sender_.sent["client"].empty());
  ASSERT_TRUE(workers_.MarkLost(0));
  stats.OnWorkerLost(0);
  ASSERT_EQ(sender_.sent["client"].size(), 1u);
  const wire::Envelope& answer = sender_.sent["client"][0];
  EXPECT_EQ(answer.request_id(), 77u);
  ASSERT_EQ(answer.snapshots_size(), 2);
  EXPECT_EQ(answer.snapshots(0).instance(), "dispatcher-test");
  EXPECT_EQ(answer.snapshots(1).instance(), "worker-1");
  ASSERT_EQ(answer.missing_size(), 1);
  EXPECT_EQ(answer.missing(0), "worker-0");
  // A request no live worker can answer in time is answered at its deadline.
  request.set_timeout_ms(1);
  stats.Begin("client", request);
  EXPECT_EQ(sender_.sent["client"].size(), 1u);
  stats.Expire(StatsFanout::Clock::now() + std::chrono::seconds(1));
  ASSERT_EQ(sender_.sent["client"].size(), 2u);
  EXPECT_EQ(sender_.sent["client"][1].missing(0), "worker-1");
}

TEST(FailedTensorsTest, NamesTheFirstFailedOperandAndForgetsFreedIds) {
  FailedTensors ledger;
  Instruction use;
  use.op = Op::kAdd;
  use.seq = 9;
  use.operands = {3, 5};
  EXPECT_TRUE(ledger.CheckOperands(use).ok());
  ledger.Record(5, 4);
  Status s = ledger.CheckOperands(use);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("operand %5 does not exist because op #4 failed"), std::string::npos) << s.message();
  EXPECT_TRUE(ledger.Forget(5));
  EXPECT_FALSE(ledger.Forget(5));
  EXPECT_TRUE(ledger.CheckOperands(use).ok());
}

TEST(OpAttrsTest, TypedViewsRoundTrip) {
  ConfigureSpec spec;
  spec.signal = "layer1";
  spec.shard_axis = 1;
  spec.workers = {0, 2};
  spec.replicated = false;
  spec.compile = true;
  spec.backward = "layer1_bwd";
  ConfigureSpec back = ReadConfigure(MakeConfigure(5, spec));
  EXPECT_EQ(back.signal, "layer1");
  EXPECT_EQ(back.shard_axis, std::optional<int64_t>(1));
  EXPECT_EQ(back.workers, (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(back.compile);
  EXPECT_FALSE(back.forget);
  EXPECT_EQ(back.backward, "layer1_bwd");
  ConfigureSpec forget;
  forget.signal = "x";
  forget.forget = true;
  EXPECT_TRUE(ReadConfigure(MakeConfigure(6, forget)).forget);

  CollectiveSpec gather;
  gather.group = {3, 1};
  gather.rank = 1;
  gather.rendezvous = "127.0.0.1:29500";
  gather.store_key = "0f1e2d3c";
  gather.generation = 7;
  gather.dim = 0;
  gather.sizes = {2, 3};
  Result<CollectiveSpec> read = ReadCollective(MakeCollective(Op::kAllGather, gather));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->group, gather.group);
  EXPECT_EQ(read->rank, 1);
  EXPECT_EQ(read->rendezvous, gather.rendezvous);
  EXPECT_EQ(read->store_key, "0f1e2d3c");
  EXPECT_EQ(read->generation, 7u);
  // The store key prefixes the group's keys: a lost mark under another key is not this group's.
  EXPECT_NE(LostMemberKey("0f1e2d3c", 3), LostMemberKey("", 3));
  EXPECT_NE(LostMemberKey("0f1e2d3c", 3).find("0f1e2d3c"), std::string::npos);
  EXPECT_EQ(read->sizes, gather.sizes);
  Instruction bad = MakeCollective(Op::kAllGather, gather);
  bad.attrs.axes.pop_back();
  EXPECT_EQ(ReadCollective(bad).status().code(), Code::kInvalidArgument);
  for (const char* payload : {"127.0.0.1:29500", "127.0.0.1:29500#", "127.0.0.1:29500#x1", "#3"}) {
    Instruction odd = MakeCollective(Op::kAllGather, gather);
    odd.payload = CopyToBlob(payload, std::string(payload).size());
    EXPECT_EQ(ReadCollective(odd).status().code(), Code::kInvalidArgument) << payload;
  }
  gather.rank = 2;
  EXPECT_EQ(ReadCollective(MakeCollective(Op::kAllGather, gather)).status().code(), Code::kInvalidArgument);

  HotMarker marker = ReadHotMarker(MakeHotMarker(Op::kHotStart, HotMarker{77, 12}));
  EXPECT_EQ(marker.sequence_id, 77u);
  EXPECT_EQ(marker.length, std::optional<int64_t>(12));
  EXPECT_FALSE(MarksHotSequence(MakeHotMarker(Op::kHotEnd, HotMarker{})));

  Instruction run = MakeRunUnit(1, 2, 3, {10, 11}, {12}, {1});
  EXPECT_EQ(ConsumedOperands(run), std::vector<TensorId>{11});
  EXPECT_EQ(MembershipWorkers(MakeMembership({0, 2})), (std::vector<int>{0, 2}));
}

// Quotas count the client's own instructions and ids: a sharded op is one,
// however many pieces a stage makes of it; a sync answers what was admitted
// before it; frees, syncs and markers always pass.
TEST_F(RouterTest, AdmissionCountsTheClientsOwnInstructionsAndTensors) {
  Admission admission(ClientLimits{3, 4, 0}, QuotaMetrics{}, QuotaMetrics{});
  ClientState& c = NewClient("q");
  ASSERT_TRUE(admission.Admit(c, Op1(Op::kZeros, c.id, 1, {}, 1)).ok());
  ASSERT_TRUE(admission.Admit(c, Op1(Op::kRelu, c.id, 2, {1}, 2)).ok());
  ASSERT_TRUE(admission.Admit(c, Op1(Op::kNeg, c.id, 3, {2}, 3)).ok());
  Status fourth = admission.Admit(c, Op1(Op::kExp, c.id, 4, {3}, 4));  // a fourth live tensor
  EXPECT_EQ(fourth.code(), Code::kResourceExhausted);
  EXPECT_NE(fourth.message().find("limits.max_live_tensors = 3"), std::string::npos) << fourth.message();
  EXPECT_TRUE(c.failed.FailedOp(4).has_value());  // a later use of %4 names op #4
  EXPECT_TRUE(admission.Admit(c, MakeFree(c.id, 5, {1})).ok());
  EXPECT_EQ(c.live.size(), 2u);
  // Four admitted and unanswered: the next op waits for a sync, which itself passes.
  Status busy = admission.Admit(c, Op1(Op::kExp, c.id, 6, {3}, 5));
  EXPECT_EQ(busy.code(), Code::kResourceExhausted);
  EXPECT_NE(busy.message().find("limits.max_inflight = 4"), std::string::npos) << busy.message();
  ASSERT_TRUE(admission.Admit(c, MakeSync(c.id, 7, 1)).ok());
  ASSERT_TRUE(router_.Accept(MakeSync(c.id, 7, 1)).ok());  // no worker touched: answered at once
  EXPECT_EQ(c.answered, 5u);
  EXPECT_TRUE(admission.Admit(c, Op1(Op::kExp, c.id, 8, {3}, 5)).ok());
}

TEST_F(RouterTest, AdmissionRefusesWhatOnlyTheDispatcherSends) {
  Admission admission;
  ClientState& c = NewClient("r");
  Status membership = admission.Admit(c, MakeMembership({0, 1}));
  EXPECT_EQ(membership.code(), Code::kInvalidArgument);
  EXPECT_NE(membership.message().find("reserved for the dispatcher"), std::string::npos) << membership.message();
  Instruction placed = Op1(Op::kZeros, c.id, 1, {}, 1);
  placed.worker = 1;
  EXPECT_EQ(admission.Admit(c, placed).code(), Code::kInvalidArgument);
  // Counts the stages index without looking (found by the dispatcher fuzzer).
  Instruction no_result = Op1(Op::kSqueeze, c.id, 2, {}, 1);
  no_result.results.clear();
  EXPECT_EQ(admission.Admit(c, no_result).code(), Code::kInvalidArgument);
  Instruction fill = Op1(Op::kFill, c.id, 3, {}, 1);
  fill.results.clear();
  Status empty_fill = admission.Admit(c, fill);
  EXPECT_EQ(empty_fill.code(), Code::kInvalidArgument);
  EXPECT_NE(empty_fill.message().find("expected 1 operand(s), got 0"), std::string::npos) << empty_fill.message();
  EXPECT_TRUE(c.live.empty());
  EXPECT_EQ(c.admitted, 0u);
}

// A free is never refused whole: what the client holds is freed (one free
// per worker), an id it does not hold is named. Admission has forgotten
// them all, so a refused free would leave tensors its quota no longer sees.
TEST_F(RouterTest, AFreeFreesWhatTheClientHoldsAndNamesTheRest) {
  ClientState& c = NewClient("f");
  ASSERT_TRUE(router_.Accept(Op1(Op::kZeros, c.id, 1, {}, 1)).ok());
  Instruction placed = Op1(Op::kZeros, c.id, 2, {}, 2);
  placed.worker = 1;
  ASSERT_TRUE(router_.Accept(placed).ok());
  TakeBatches();
  Status free = router_.Accept(MakeFree(c.id, 3, {1, 999, 2}));
  EXPECT_EQ(free.code(), Code::kNotFound);
  EXPECT_NE(free.message().find("unknown tensor %999"), std::string::npos) << free.message();
  EXPECT_TRUE(c.tensors.empty());
  auto batches = TakeBatches();
  ASSERT_EQ(batches["worker-0"].size(), 1u);
  ASSERT_EQ(batches["worker-1"].size(), 1u);
  EXPECT_EQ(batches["worker-0"][0].operands, std::vector<TensorId>{1});
  EXPECT_EQ(batches["worker-1"][0].operands, std::vector<TensorId>{2});
}

}  // namespace
}  // namespace gt
