// Surviving a dispatcher restart, the parts without sockets: the
// dispatcher's ResumeBook (matching RESUMEs to rejoining workers'
// inventories, and every refusal), the worker's RejoinBook and
// DispatcherLink, and the worker registry's rejoin slots and session notes.
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <zmq.h>

#include "dispatcher/session_resume.h"
#include "dispatcher/worker_registry.h"
#include "gt/op_attrs.h"
#include "gt/stage.h"
#include "host/manifest.h"
#include "ir/codec.h"
#include "worker/worker_rejoin.h"
#include "resume_test_support.h"

namespace gt {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint64_t kToken = 0x1234567890abcdefull;

using resume_test::Claim;
using resume_test::Inventory;

TEST(SessionDigestTest, IsNotTheTokenAndTellsTokensApart) {
  EXPECT_NE(SessionDigest(kToken), kToken);
  EXPECT_NE(SessionDigest(kToken), SessionDigest(kToken + 1));
  EXPECT_EQ(SessionDigest(kToken), SessionDigest(kToken));
}

TEST(ResumeBookTest, ResumesUnderTheWorkersClientIdWithEveryTensorLocated) {
  ResumeBook book(milliseconds(1000), milliseconds(60000));
  const auto now = Clock::now();
  ASSERT_TRUE(book.Add(0, Inventory(7, kToken, {1, 2}, 5), now).ok());
  ASSERT_TRUE(book.Add(1, Inventory(7, kToken, {3}, 9), now).ok());
  EXPECT_EQ(book.max_client(), 7u);
  ResumeBook::Verdict v = book.Decide(Claim(kToken, {{1, 1}, {2, 2}, {3, 3}}, 4), now, now);
  ASSERT_EQ(v.kind, ResumeBook::Verdict::kResume) << v.why.ToString();
  EXPECT_EQ(v.session.id, 7u);
  EXPECT_EQ(v.session.received_seq, 9u);  // the highest seq any worker received
  EXPECT_EQ(v.session.tensors.at(1), 0u);
  EXPECT_EQ(v.session.tensors.at(3), 1u);
  EXPECT_EQ(v.session.workers.size(), 2u);
  EXPECT_TRUE(book.empty());  // taken out: a second RESUME of it is not given the same tensors
}

TEST(ResumeBookTest, WaitsForTheWorkersThenNamesTheMissingTensors) {
  ResumeBook book(milliseconds(1000), milliseconds(60000));
  const auto asked = Clock::now();
  ASSERT_TRUE(book.Add(0, Inventory(7, kToken, {1}, 5), asked).ok());
  const ResumeClaim claim = Claim(kToken, {{1, 1}, {2, 2}}, 4);
  EXPECT_EQ(book.Decide(claim, asked, asked).kind, ResumeBook::Verdict::kWait);
  ResumeBook::Verdict v = book.Decide(claim, asked, asked + milliseconds(1001));
  ASSERT_EQ(v.kind, ResumeBook::Verdict::kRefuse);
  EXPECT_EQ(v.why.code(), Code::kNotFound);
  EXPECT_NE(v.why.message().find("tensors 2 "), std::string::npos) << v.why.message();
}

TEST(ResumeBookTest, TensorsTheReplayMakesNeedNotBeOnAnyWorker) {
  ResumeBook book(milliseconds(1000), milliseconds(60000));
  const auto now = Clock::now();
  ASSERT_TRUE(book.Add(0, Inventory(7, kToken, {1}, 5), now).ok());
  // Tensor 2 was made at seq 6: no worker received it, the replay makes it.
  ResumeBook::Verdict v = book.Decide(Claim(kToken, {{1, 1}, {2, 6}}, 4), now, now);
  ASSERT_EQ(v.kind, ResumeBook::Verdict::kResume);
  EXPECT_EQ(v.session.tensors.count(2), 0u);
  EXPECT_EQ(v.session.received_seq, 5u);
}

TEST(ResumeBookTest, RefusesAnUnknownTokenAfterTheWaitAndNoTokenAtOnce) {
  ResumeBook book(milliseconds(1000), milliseconds(60000));
  const auto asked = Clock::now();
  ASSERT_TRUE(book.Add(0, Inventory(7, kToken, {1}, 5), asked).ok());
  const ResumeClaim stranger = Claim(kToken + 1, {{1, 1}}, 4);
  EXPECT_EQ(book.Decide(stranger, asked, asked).kind, ResumeBook::Verdict::kWait);
  ResumeBook::Verdict v = book.Decide(stranger, asked, asked + milliseconds(1001));
  ASSERT_EQ(v.kind, ResumeBook::Verdict::kRefuse);
  EXPECT_NE(v.why.message().find("unknown or expired session"), std::string::npos) << v.why.message();
  ResumeBook::Verdict none = book.Decide(Claim(0, {}, 0), asked, asked);
  ASSERT_EQ(none.kind, ResumeBook::Verdict::kRefuse);
  EXPECT_NE(none.why.message().find("no session token"), std::string::npos);
  EXPECT_FALSE(book.empty());  // the real session still waits for its client
}

TEST(ResumeBookTest, RefusesAnotherKeysSession) {
  ResumeBook book(milliseconds(1000), milliseconds(60000));
  const auto now = Clock::now();
  ASSERT_TRUE(book.Add(0, Inventory(7, kToken, {1}, 5, "alice-key"), now).ok());
  ResumeBook::Verdict v = book.Decide(Claim(kToken, {{1, 1}}, 4, "mallory-key"), now, now);
  ASSERT_EQ(v.kind, ResumeBook::Verdict::kRefuse);
  EXPECT_NE(v.why.message().find("another client key"), std::string::npos);
  EXPECT_EQ(book.Decide(Claim(kToken, {{1, 1}}, 4, "alice-key"), now, now).kind, ResumeBook::Verdict::kResume);
}

TEST(ResumeBookTest, AClientWithNothingBeforeItsLastSyncStartsAfresh) {
  ResumeBook book(milliseconds(1000), milliseconds(60000));
  const auto now = Clock::now();
  ResumeBook::Verdict v = book.Decide(Claim(kToken, {{4, 12}}, 10), now, now);
  ASSERT_EQ(v.kind, ResumeBook::Verdict::kResume);
  EXPECT_EQ(v.session.id, 0u);              // a fresh ClientId
  EXPECT_EQ(v.session.received_seq, 10u);   // nothing of the replay is dropped
}

TEST(ResumeBookTest, RefusesMalformedAndContradictoryInventories) {
  ResumeBook book(milliseconds(1000), milliseconds(60000));
  const auto now = Clock::now();
  wire::SessionInventory bad_dtype = Inventory(7, kToken, {1}, 5);
  bad_dtype.mutable_tensors(0)->set_dtype(99);
  Status s = book.Add(0, bad_dtype, now);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("dtype 99"), std::string::npos) << s.message();
  wire::SessionInventory negative = Inventory(7, kToken, {1}, 5);
  negative.mutable_tensors(0)->set_shape(0, -3);
  EXPECT_FALSE(book.Add(0, negative, now).ok());
  wire::SessionInventory huge_tag = Inventory(7, kToken, {1}, 5);  // kept until claimed: bounded on arrival
  huge_tag.mutable_tensors(0)->set_placement(std::string(kMaxPieceTagBytes + 1, 'x'));
  EXPECT_NE(book.Add(0, huge_tag, now).message().find("placement tag of 16385 bytes"), std::string::npos);
  EXPECT_FALSE(book.Add(0, Inventory(0, kToken, {1}, 5), now).ok());  // client 0
  ASSERT_TRUE(book.Add(0, Inventory(7, kToken, {1}, 5), now).ok());
  // Another worker names client 7 under another session, or this session under client 8.
  EXPECT_FALSE(book.Add(1, Inventory(7, kToken + 1, {2}, 5), now).ok());
  EXPECT_FALSE(book.Add(1, Inventory(8, kToken, {2}, 5), now).ok());
}

// A piece a stage tagged as one of `pieces` of client tensor `logical`.
void TagLast(wire::SessionInventory& inv, TensorId logical, uint32_t pieces) {
  wire::HeldTensor* t = inv.mutable_tensors(inv.tensors_size() - 1);
  t->set_placement("tag");
  t->set_logical(logical);
  t->set_pieces(pieces);
}

TEST(ResumeBookTest, WaitsForEveryPieceOfATensorAStagePlaced) {
  ResumeBook book(milliseconds(1000), milliseconds(60000));
  const auto now = Clock::now();
  wire::SessionInventory first = Inventory(7, kToken, {1, kPhysicalIdBase + 3}, 5);
  TagLast(first, 2, 2);
  ASSERT_TRUE(book.Add(0, first, now).ok());
  const ResumeClaim claim = Claim(kToken, {{1, 1}, {2, 2}}, 4);
  EXPECT_EQ(book.Decide(claim, now, now).kind, ResumeBook::Verdict::kWait) << "one of %2's two pieces is back";
  wire::SessionInventory second = Inventory(7, kToken, {kPhysicalIdBase + 4}, 5);
  TagLast(second, 2, 2);
  ASSERT_TRUE(book.Add(1, second, now).ok());
  ResumeBook::Verdict v = book.Decide(claim, now, now);
  ASSERT_EQ(v.kind, ResumeBook::Verdict::kResume) << v.why.ToString();
  EXPECT_EQ(v.session.live, (std::set<TensorId>{1, 2})) << "a placed tensor is located by its pieces";
  EXPECT_EQ(v.session.tensors.at(kPhysicalIdBase + 4), 1u) << "the router knows every piece";
  ASSERT_EQ(v.session.held.size(), 3u);
  EXPECT_EQ(v.session.held_on.size(), 3u);
}

TEST(ResumeBookTest, LeavesAnIncompletePlacementToTheStagesAfterTheWait) {
  ResumeBook book(milliseconds(1000), milliseconds(60000));
  const auto now = Clock::now();
  wire::SessionInventory only = Inventory(7, kToken, {kPhysicalIdBase + 3}, 5);
  TagLast(only, 2, 2);
  ASSERT_TRUE(book.Add(0, only, now).ok());
  ResumeBook::Verdict v = book.Decide(Claim(kToken, {{2, 2}}, 4), now, now + milliseconds(1001));
  ASSERT_EQ(v.kind, ResumeBook::Verdict::kResume) << "Stage::Restore names the missing piece";
  EXPECT_EQ(v.session.held[0].placement(), "tag");
}

TEST(ResumeBookTest, HandsBackSessionsNoClientClaimedWithinTheGrace) {
  ResumeBook book(milliseconds(1000), milliseconds(5000));
  const auto now = Clock::now();
  ASSERT_TRUE(book.Add(0, Inventory(7, kToken, {1}, 5), now).ok());
  ASSERT_TRUE(book.Add(1, Inventory(7, kToken, {2}, 5), now).ok());
  EXPECT_TRUE(book.TakeUnclaimed(now + milliseconds(4000)).empty());
  auto unclaimed = book.TakeUnclaimed(now + milliseconds(5001));
  ASSERT_EQ(unclaimed.size(), 2u);
  EXPECT_EQ(unclaimed[0].second, 7u);
  EXPECT_TRUE(book.empty());
}

TEST(ResumeBookTest, AWorkerLostAgainTakesItsPiecesAlong) {
  ResumeBook book(milliseconds(0), milliseconds(60000));
  const auto now = Clock::now();
  ASSERT_TRUE(book.Add(0, Inventory(7, kToken, {1}, 5), now).ok());
  ASSERT_TRUE(book.Add(1, Inventory(7, kToken, {2}, 5), now).ok());
  book.ForgetWorker(1);
  ResumeBook::Verdict v = book.Decide(Claim(kToken, {{1, 1}, {2, 2}}, 4), now, now);
  ASSERT_EQ(v.kind, ResumeBook::Verdict::kRefuse);  // tensor 2 went with worker 1
  book.ForgetWorker(0);
  EXPECT_TRUE(book.empty());
}

TEST(ResumeBookTest, ErrorsOfAnAcknowledgementTheClientNeverGotComeBack) {
  ResumeBook book(milliseconds(1000), milliseconds(60000));
  const auto now = Clock::now();
  wire::SessionInventory inv = Inventory(7, kToken, {1}, 5);
  inv.set_acked_sync(3);
  inv.add_errors()->set_message("op 4 failed");
  ASSERT_TRUE(book.Add(0, inv, now).ok());
  ResumeClaim claim = Claim(kToken, {{1, 1}}, 4);
  claim.answered_sync = 2;  // sync 3's answer died with the dispatcher
  ResumeBook::Verdict v = book.Decide(claim, now, now);
  ASSERT_EQ(v.kind, ResumeBook::Verdict::kResume);
  ASSERT_EQ(v.session.errors.size(), 1u);
  EXPECT_EQ(v.session.errors[0].message(), "op 4 failed");
}

Instruction Inst(Op op, ClientId client, uint64_t seq) {
  Instruction inst;
  inst.op = op;
  inst.client = client;
  inst.seq = seq;
  return inst;
}

TEST(RejoinBookTest, InventoriesTheSessionsItWasToldOfWithTheirTensors) {
  RejoinBook book;
  wire::Envelope batch;
  batch.set_kind(wire::Envelope::BATCH);
  wire::ClientSession* session = batch.add_sessions();
  session->set_client(7);
  session->set_digest(SessionDigest(kToken));
  std::vector<BlobPtr> payloads;
  EncodeInstruction(Inst(Op::kAdd, 7, 3), batch.add_instructions(), &payloads);
  EncodeInstruction(Inst(Op::kAdd, 7, 9), batch.add_instructions(), &payloads);
  book.NoteBatch(batch);
  wire::Envelope ack;
  ack.set_client(7);
  ack.set_sync_id(2);
  ack.add_errors()->set_message("boom");
  book.NoteAck(ack);
  const std::vector<HeldTensor> held = {{7, 1, DType::kFloat32, {2, 3}}, {9, 4, DType::kInt64, {1}}};
  wire::Envelope reg;
  book.FillInventory(held, reg);
  EXPECT_TRUE(reg.rejoining());
  ASSERT_EQ(reg.inventory_size(), 1);
  const wire::SessionInventory& inv = reg.inventory(0);
  EXPECT_EQ(inv.session().digest(), SessionDigest(kToken));
  EXPECT_EQ(inv.received_seq(), 9u);
  EXPECT_EQ(inv.acked_sync(), 2u);
  ASSERT_EQ(inv.tensors_size(), 1);
  EXPECT_EQ(inv.tensors(0).shape_size(), 2);
  EXPECT_EQ(book.Orphans(held), std::vector<ClientId>{9});  // no session known: freed, not reported
}

TEST(RejoinBookTest, ReportsTheTagsOfThePiecesItHolds) {
  RejoinBook book;
  wire::Envelope batch;
  batch.add_sessions()->set_client(7);
  for (TensorId id : {kPhysicalIdBase, kPhysicalIdBase + 1, kPhysicalIdBase + 2}) {
    wire::PieceTag* tag = batch.add_tags();
    tag->set_client(7);
    tag->set_id(id);
    tag->set_logical(3);
    tag->set_pieces(2);
    tag->set_placement("record of %3");
  }
  wire::PieceTag* unknown = batch.add_tags();  // a session never told: not kept
  unknown->set_client(8);
  unknown->set_id(kPhysicalIdBase);
  unknown->set_placement("x");
  book.NoteBatch(batch);
  wire::Envelope forget;
  forget.add_tags()->set_client(7);
  forget.mutable_tags(0)->set_id(kPhysicalIdBase + 1);
  book.NoteBatch(forget);
  const std::vector<HeldTensor> held = {{7, kPhysicalIdBase, DType::kFloat32, {2}},
                                        {7, kPhysicalIdBase + 1, DType::kFloat32, {2}},
                                        {7, 3, DType::kFloat32, {2}}};
  wire::Envelope reg;
  book.FillInventory(held, reg);
  ASSERT_EQ(reg.inventory_size(), 1);
  const wire::SessionInventory& inv = reg.inventory(0);
  ASSERT_EQ(inv.tensors_size(), 3);
  EXPECT_EQ(inv.tensors(0).placement(), "record of %3");
  EXPECT_EQ(inv.tensors(0).logical(), 3u);
  EXPECT_EQ(inv.tensors(0).pieces(), 2u);
  EXPECT_TRUE(inv.tensors(1).placement().empty()) << "its tag was forgotten";
  EXPECT_TRUE(inv.tensors(2).placement().empty()) << "never tagged";
}

TEST(RejoinBookTest, ForgetsADroppedClient) {
  RejoinBook book;
  wire::Envelope batch;
  batch.add_sessions()->set_client(7);
  std::vector<BlobPtr> payloads;
  EncodeInstruction(MakeDropClient(7), batch.add_instructions(), &payloads);
  book.NoteBatch(batch);
  EXPECT_TRUE(book.Sessions().empty());
}

TEST(DispatcherLinkTest, AHandshakeAfterALossAsksForARegistrationAndTheGraceRunsOut) {
  DispatcherLink link(milliseconds(500));
  const auto t0 = Clock::now();
  link.Observe(ZMQ_EVENT_HANDSHAKE_SUCCEEDED, t0);  // the first connection
  EXPECT_FALSE(link.Tick(t0, true).register_again);
  link.Observe(ZMQ_EVENT_DISCONNECTED, t0);
  EXPECT_TRUE(link.lost());
  EXPECT_FALSE(link.Tick(t0 + milliseconds(100), false).register_again);  // nobody there yet
  link.Observe(ZMQ_EVENT_HANDSHAKE_SUCCEEDED, t0 + milliseconds(200));
  EXPECT_TRUE(link.Tick(t0 + milliseconds(200), false).register_again);
  EXPECT_FALSE(link.Tick(t0 + milliseconds(300), false).register_again);  // asked once
  DispatcherLink::Actions late = link.Tick(t0 + milliseconds(600), false);
  EXPECT_TRUE(late.grace_over);
  EXPECT_FALSE(link.Tick(t0 + milliseconds(700), false).grace_over);  // once per loss
  EXPECT_FALSE(link.Tick(t0 + milliseconds(800), true).grace_over);
  EXPECT_FALSE(link.lost());  // welcomed again
}

TEST(WorkerRegistryRejoinTest, ARejoiningWorkerKeepsItsIndexAndSessionsAreToldOnce) {
  WorkerRegistry workers;
  const size_t index = workers.Register("route-2", "w2", "", "", -1, 42, "", size_t{2});
  EXPECT_EQ(index, 2u);
  EXPECT_FALSE(workers.IsAlive(0));  // waiting for their own workers
  EXPECT_FALSE(workers.IsAlive(1));
  EXPECT_EQ(workers.Register("route-0", "fresh", "", ""), 3u);  // a new worker takes a new slot
  workers.SetShareSource([](ClientId id) { return ClientShare{id}; });
  workers.SetSessionSource([](ClientId id) -> std::optional<wire::ClientSession> {
    wire::ClientSession s;
    s.set_client(id);
    s.set_digest(SessionDigest(kToken));
    return s;
  });
  workers.Enqueue(2, Inst(Op::kAdd, 5, 1));
  workers.Enqueue(2, Inst(Op::kAdd, 5, 2));
  std::vector<wire::Envelope> sent;
  workers.Flush([&](const WorkerState& w) {
    sent.push_back(w.outgoing);
    return true;
  });
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].sessions_size(), 1);
  EXPECT_EQ(sent[0].sessions(0).digest(), SessionDigest(kToken));
}

TEST(RestartManifestTest, ReadsTheGraceSettingsAndRefusesAnUnknownAfterGrace) {
  Result<HostManifest> m = ParseManifest("host: dispatcher\nreconnect_grace_ms: 2500\nresume_wait_ms: 700\n"
                                         "after_grace: wait\n",
                                         "restart.yaml", HostKind::kDispatcher);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->reconnect_grace_ms, 2500);
  EXPECT_EQ(m->resume_wait_ms, 700);
  EXPECT_FALSE(m->exit_after_grace);
  Result<HostManifest> defaults = ParseManifest("host: dispatcher\n", "restart.yaml", HostKind::kDispatcher);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->reconnect_grace_ms, 60000);
  EXPECT_TRUE(defaults->exit_after_grace);
  Result<HostManifest> bad = ParseManifest("host: dispatcher\nafter_grace: later\n", "restart.yaml", HostKind::kDispatcher);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("after_grace: 'later': exit or wait"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace gt
