// The worker's fair queue (core/worker/fair_queue.h) on its own: a client's
// order kept, time split by weight, no credit banked while idle, and
// collectives in arrival order whoever sent them. The real-process checks
// are in tests/python/test_fair_share.py.
#include "worker/fair_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace gt {
namespace {

Instruction Make(ClientId client, uint64_t seq, Op op = Op::kAdd) {
  Instruction inst;
  inst.op = op;
  inst.client = client;
  inst.seq = seq;
  return inst;
}

// Serves the queue, charging `cost[client]` seconds per instruction, until
// it empties; returns (client, seq) in the order run.
std::vector<std::pair<ClientId, uint64_t>> Drain(FairQueue& q, std::map<ClientId, double> cost = {}) {
  std::vector<std::pair<ClientId, uint64_t>> ran;
  while (FairQueue::Lane* lane = q.Next()) {
    Instruction inst = q.Pop(*lane);
    ran.emplace_back(inst.client, inst.seq);
    q.Charge(*lane, cost.count(inst.client) ? cost[inst.client] : 1.0);
  }
  EXPECT_TRUE(q.empty());
  return ran;
}

TEST(FairQueueTest, EachClientsOwnOrderIsKept) {
  FairQueue q;
  for (uint64_t s = 1; s <= 50; ++s) q.Push(Make(1 + s % 3, s));
  std::map<ClientId, uint64_t> last;
  for (auto [client, seq] : Drain(q)) {
    EXPECT_GT(seq, last[client]) << "client " << client;
    last[client] = seq;
  }
  EXPECT_EQ(last.size(), 3u);
}

TEST(FairQueueTest, TwoBusyClientsSplitTimeByWeight) {
  FairQueue q;
  q.SetWeight(1, 2.0);
  for (uint64_t s = 1; s <= 3000; ++s) {
    q.Push(Make(1, s));
    q.Push(Make(2, s));
  }
  std::map<ClientId, int> first_3000;
  std::vector<std::pair<ClientId, uint64_t>> ran = Drain(q);
  for (size_t i = 0; i < 3000; ++i) ++first_3000[ran[i].first];
  EXPECT_NEAR(first_3000[1], 2000, 2);
  EXPECT_NEAR(first_3000[2], 1000, 2);
}

TEST(FairQueueTest, AnIdleClientBanksNoCreditAndANewcomerGoesNext) {
  FairQueue q;
  for (uint64_t s = 1; s <= 100; ++s) q.Push(Make(1, s));
  for (int i = 0; i < 50; ++i) {  // client 1 alone for 50 s of virtual time
    FairQueue::Lane* lane = q.Next();
    ASSERT_EQ(lane->client(), 1u);
    q.Pop(*lane);
    q.Charge(*lane, 1.0);
  }
  q.Push(Make(2, 1));
  q.Push(Make(2, 2));
  // The newcomer starts at the clock, not at 0: it runs next, then they
  // alternate instead of client 2 running 50 s in a row.
  std::vector<std::pair<ClientId, uint64_t>> ran = Drain(q);
  ASSERT_GE(ran.size(), 4u);
  EXPECT_EQ(ran[0].first, 2u);
  EXPECT_EQ(ran[1].first, 1u);
  EXPECT_EQ(ran[2].first, 2u);
}

TEST(FairQueueTest, CollectivesRunInArrivalOrderWhoeverSentThem) {
  FairQueue q;
  q.Push(Make(1, 1, Op::kAllReduce));  // ticket 1
  q.Push(Make(2, 1, Op::kAdd));
  q.Push(Make(2, 2, Op::kAllReduce));  // ticket 2
  q.Push(Make(3, 1, Op::kAllGather));  // ticket 3
  // Client 1 is far behind in share: it would run last, but its collective
  // is the oldest, so client 2's and 3's must wait for it.
  FairQueue::Lane* one = q.Next();
  ASSERT_EQ(one->client(), 1u);
  q.Charge(*one, 100.0);  // pretend it ran long before: it is now the least favoured
  std::vector<std::pair<ClientId, uint64_t>> ran = Drain(q);
  std::vector<std::pair<ClientId, uint64_t>> collectives;
  for (auto r : ran)
    if (!(r.first == 2 && r.second == 1)) collectives.push_back(r);
  EXPECT_EQ(collectives, (std::vector<std::pair<ClientId, uint64_t>>{{1, 1}, {2, 2}, {3, 1}}));
}

TEST(FairQueueTest, ALaneWhoseHeadWaitsLetsTheOthersRun) {
  FairQueue q;
  q.Push(Make(1, 1, Op::kAllReduce));  // ticket 1, behind client 1's share
  q.Push(Make(2, 1, Op::kAllReduce));  // ticket 2
  q.Push(Make(3, 1, Op::kAdd));
  FairQueue::Lane* lane = q.Next();
  ASSERT_NE(lane, nullptr);
  EXPECT_NE(lane->client(), 2u) << "client 2's collective is younger than client 1's";
  EXPECT_EQ(q.Runnable(*lane)->client, lane->client());
}

}  // namespace
}  // namespace gt
