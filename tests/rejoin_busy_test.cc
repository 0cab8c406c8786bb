// A worker still busy when it rejoins a restarted dispatcher (a sync in
// flight at the kill), without sockets: the worker's Rejoiner marks the
// sessions it still runs and completes their inventory once their queue is
// empty; the dispatcher's ResumeBook keeps their RESUME waiting past
// resume_wait_ms until then (or until that worker is lost); the registry
// tells a claimed index from one a fresh worker took.
#include <chrono>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "dispatcher/session_resume.h"
#include "dispatcher/worker_registry.h"
#include "gt/op_attrs.h"
#include "ir/codec.h"
#include "worker/worker_rejoin.h"
#include "resume_test_support.h"

namespace gt {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint64_t kToken = 0x0badc0ffee15600dull;

wire::SessionInventory Inventory(ClientId client, std::vector<TensorId> tensors, uint64_t received_seq, bool running) {
  wire::SessionInventory inv = resume_test::Inventory(client, kToken, tensors, received_seq);
  inv.set_running(running);
  return inv;
}

ResumeClaim Claim(std::vector<std::pair<TensorId, uint64_t>> live, uint64_t answered_seq) {
  return resume_test::Claim(kToken, live, answered_seq);
}

TEST(ResumeBookBusyTest, ARunningSessionWaitsPastTheResumeWaitUntilItsInventoryIsComplete) {
  ResumeBook book(milliseconds(1000), milliseconds(60000));
  const auto asked = Clock::now();
  // Tensor 1 was made before the last answered sync; 9 (seq 8) is still being made.
  ASSERT_TRUE(book.Add(0, Inventory(7, {1}, 10, /*running=*/true), asked).ok());
  const ResumeClaim claim = Claim({{1, 1}, {9, 8}}, 4);
  EXPECT_EQ(book.Decide(claim, asked, asked + milliseconds(30000)).kind, ResumeBook::Verdict::kWait);
  EXPECT_TRUE(book.Holds(0, 7));
  EXPECT_FALSE(book.Holds(1, 7));
  ASSERT_TRUE(book.Add(0, Inventory(7, {1, 9}, 10, /*running=*/false), asked).ok());
  ResumeBook::Verdict v = book.Decide(claim, asked, asked + milliseconds(30001));
  ASSERT_EQ(v.kind, ResumeBook::Verdict::kResume) << v.why.ToString();
  EXPECT_EQ(v.session.tensors.at(9), 0u);  // made by the queue the worker finished
  EXPECT_EQ(v.session.received_seq, 10u);
}

TEST(ResumeBookBusyTest, ARunningWorkerLostMeanwhileNamesWhatWasLost) {
  ResumeBook book(milliseconds(1000), milliseconds(60000));
  const auto asked = Clock::now();
  ASSERT_TRUE(book.Add(0, Inventory(7, {1}, 10, true), asked).ok());
  ASSERT_TRUE(book.Add(1, Inventory(7, {2}, 6, false), asked).ok());
  book.ForgetWorker(0);
  ResumeBook::Verdict v = book.Decide(Claim({{1, 1}, {2, 2}}, 4), asked, asked + milliseconds(1001));
  ASSERT_EQ(v.kind, ResumeBook::Verdict::kRefuse);
  EXPECT_NE(v.why.message().find("tensors 1 "), std::string::npos) << v.why.message();
}

TEST(ResumeBookBusyTest, AGraceThatRunsOutWhileTheWorkerStillRunsSaysSo) {
  ResumeBook book(milliseconds(1000), milliseconds(60000));
  const auto asked = Clock::now();
  ASSERT_TRUE(book.Add(0, Inventory(7, {1}, 10, true), asked).ok());
  ASSERT_EQ(book.TakeUnclaimed(asked + milliseconds(60001)).size(), 1u);  // freed on worker 0
  ResumeBook::Verdict v = book.Decide(Claim({{1, 1}}, 4), asked, asked + milliseconds(60002));
  ASSERT_EQ(v.kind, ResumeBook::Verdict::kRefuse);
  EXPECT_NE(v.why.message().find("ran out while a worker was still running"), std::string::npos) << v.why.message();
}

Instruction Inst(Op op, ClientId client, uint64_t seq) {
  Instruction inst;
  inst.op = op;
  inst.client = client;
  inst.seq = seq;
  return inst;
}

// A Rejoiner whose queue is a map of instructions waiting per client, and
// whose REGISTERs are kept.
struct FakeWorker {
  std::map<ClientId, size_t> waiting;
  std::vector<HeldTensor> held;
  std::vector<Instruction> pushed;
  std::vector<wire::Envelope> sent;
  Rejoiner rejoiner{{[this] { return held; }, [this](Instruction&& i) { pushed.push_back(std::move(i)); },
                     [this](ClientId c) { return waiting.count(c) ? waiting.at(c) : size_t{0}; },
                     [this](wire::Envelope& reg) { sent.push_back(reg); }}};

  void Told(ClientId client, uint64_t seq) {
    wire::Envelope batch;
    batch.add_sessions()->set_client(client);
    std::vector<BlobPtr> payloads;
    EncodeInstruction(Inst(Op::kAdd, client, seq), batch.add_instructions(), &payloads);
    rejoiner.book().NoteBatch(batch);
  }
};

TEST(RejoinerTest, MarksTheSessionsStillQueuedRunningAndCompletesEachOnceItsQueueEmpties) {
  FakeWorker w;
  w.Told(7, 3);
  w.Told(8, 5);
  w.held = {{7, 1, DType::kFloat32, {2}}, {8, 2, DType::kFloat32, {2}}, {9, 3, DType::kFloat32, {2}}};
  w.waiting[7] = 40;  // client 7's long chain is still queued
  w.rejoiner.Register(3);
  ASSERT_EQ(w.sent.size(), 1u);
  EXPECT_EQ(w.sent[0].kind(), wire::Envelope::REGISTER);
  EXPECT_EQ(w.sent[0].worker_index(), 3u);
  ASSERT_EQ(w.sent[0].inventory_size(), 2);
  std::map<ClientId, bool> running;
  for (const wire::SessionInventory& inv : w.sent[0].inventory()) running[inv.session().client()] = inv.running();
  EXPECT_TRUE(running.at(7));
  EXPECT_FALSE(running.at(8));
  ASSERT_EQ(w.pushed.size(), 1u);  // client 9: no session known, freed
  EXPECT_EQ(w.pushed[0].op, Op::kDropClient);
  EXPECT_EQ(w.pushed[0].client, 9u);

  EXPECT_TRUE(w.rejoiner.completing());
  w.rejoiner.Complete(3);
  EXPECT_EQ(w.sent.size(), 1u);  // still queued: nothing to complete yet
  w.waiting[7] = 0;
  w.held.push_back({7, 4, DType::kFloat32, {2}});  // what the chain made
  w.rejoiner.Complete(3);
  ASSERT_EQ(w.sent.size(), 2u);
  ASSERT_EQ(w.sent[1].inventory_size(), 1);  // only the completed session
  const wire::SessionInventory& done = w.sent[1].inventory(0);
  EXPECT_EQ(done.session().client(), 7u);
  EXPECT_FALSE(done.running());
  EXPECT_EQ(done.tensors_size(), 2);
  EXPECT_TRUE(w.sent[1].rejoining());
  EXPECT_FALSE(w.rejoiner.completing());
}

TEST(RejoinerTest, ASessionDroppedBeforeItCompletedIsNotReported) {
  FakeWorker w;
  w.Told(7, 3);
  w.waiting[7] = 2;
  w.rejoiner.Register(0);
  wire::Envelope drop;
  std::vector<BlobPtr> payloads;
  EncodeInstruction(MakeDropClient(7), drop.add_instructions(), &payloads);
  w.rejoiner.book().NoteBatch(drop);  // the new dispatcher could not give it back
  w.rejoiner.Complete(0);
  EXPECT_EQ(w.sent.size(), 1u);
  EXPECT_FALSE(w.rejoiner.completing());
}

TEST(WorkerRegistryClaimTest, OnlyAnIndexARejoiningWorkerAskedForIsClaimed) {
  WorkerRegistry workers;
  const size_t fresh = workers.Register("route-f", "fresh", "", "");
  const size_t claimed = workers.Register("route-c", "back", "", "", -1, 7, "", size_t{2});
  const size_t moved = workers.Register("route-m", "moved", "", "", -1, 8, "", size_t{3}, /*claimed=*/false);
  EXPECT_FALSE(workers.at(fresh).claimed_index);
  EXPECT_TRUE(workers.at(claimed).claimed_index);
  EXPECT_FALSE(workers.at(moved).claimed_index);
  EXPECT_EQ(moved, 3u);
}

}  // namespace
}  // namespace gt
