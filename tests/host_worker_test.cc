// A worker's life as the dispatcher and its clients see it, against real
// processes (host_test_fixture.h): a dead worker noticed at once, one busy
// past the heartbeat timeout kept, one stopped mid-batch saying goodbye,
// attach tokens, endpoints checked before ZeroMQ sees them, and a stopped
// worker's clients told it said goodbye. Part of host_test.
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "cluster.h"
#include "gt/instruction.h"
#include "gt/op_attrs.h"
#include "gt/unit.h"
#include "net/peer_address.h"
#include "host_test_fixture.h"

namespace gt::testing {
namespace {
using namespace host_test;

// Killed outright, its connection closes: the dispatcher drops it at once
// (well before the heartbeat timeout), and the client is told what it lost.
TEST_F(HostTest, DispatcherNoticesADeadWorkerAtOnce) {
  RawClient client(context_, cluster_->endpoint());
  client.Send({FromFloats(1, {1}, {1})});
  ASSERT_TRUE(client.Sync());
  const auto killed = std::chrono::steady_clock::now();
  cluster_->KillWorkerForTest(0);
  EXPECT_TRUE(WaitFor([&] { return Scrape(dport(), "gt_host_workers_connected") == 0; }));
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(2));
  EXPECT_EQ(Scrape(dport(), "gt_host_heartbeats_missed_total"), 0) << "found by the closed connection";
  // The next sync reports the loss; a use of the tensor is an error, not a hang.
  client.Send({MakeInstruction(Op::kNeg, 2, {2}, {1})});
  std::optional<wire::Envelope> done = client.Sync();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->errors_size(), 2) << done->DebugString();
  EXPECT_EQ(done->errors(0).message(),
            "worker worker-0 was lost (its connection closed); this client's tensors on it are gone: %1");
  EXPECT_NE(done->errors(1).message().find("operand %1 was lost with worker worker-0"), std::string::npos)
      << done->errors(1).message();
}

// A worker's heartbeats travel on its control connection (wire.proto), so a
// batch that keeps its pipeline thread busy for longer than the heartbeat
// timeout (1.5 s here) does not get it declared lost.
constexpr int64_t kLongBatchSide = 2048;

// One batch that keeps a worker busy for seconds: %1 = ones(2048, 2048),
// then %k = %1 @ %1 for k = 2..39, each freeing the one before. Returns the
// next free seq.
uint64_t SendLongBatch(RawClient& client) {
  Instruction ones = MakeInstruction(Op::kOnes, 1, {1}, {});
  ones.attrs.shape = {kLongBatchSide, kLongBatchSide};
  ones.attrs.dtype = DType::kFloat32;
  std::vector<Instruction> batch = {ones};
  uint64_t seq = 2;
  for (TensorId id = 2; id < 40; ++id) {
    batch.push_back(MakeInstruction(Op::kMatmul, seq++, {id}, {1, 1}));
    if (id > 2) batch.push_back(MakeInstruction(Op::kFree, seq++, {}, {id - 1}));
  }
  client.Send(batch);
  return seq;
}

// A client's sync that waits longer than the dispatcher's client timeout,
// with the client's heartbeats sent from another socket meanwhile, as a
// real client's are.
std::optional<wire::Envelope> SyncWithHeartbeats(zmq::context_t& context, const std::string& endpoint,
                                                 RawClient& client) {
  std::atomic<bool> waiting{true};
  std::thread heartbeats([&] {
    RawClient beat(context, endpoint, /*hello=*/false);
    while (waiting) {
      beat.SendToken(wire::Envelope::HEARTBEAT, client.token());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  std::optional<wire::Envelope> done = client.Sync(nullptr, 120000);
  waiting = false;
  heartbeats.join();
  return done;
}

TEST_F(HostTest, AWorkerBusyPastTheHeartbeatTimeoutIsNotLost) {
  RawClient client(context_, cluster_->endpoint());
  const auto started = std::chrono::steady_clock::now();
  const uint64_t seq = SendLongBatch(client);
  std::optional<wire::Envelope> done = SyncWithHeartbeats(context_, cluster_->endpoint(), client);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->errors_size(), 0) << done->DebugString();
  const auto busy = std::chrono::steady_clock::now() - started;
  if (busy < std::chrono::milliseconds(1800)) GTEST_SKIP() << "the batch ran in under the heartbeat timeout: proves nothing";
  EXPECT_EQ(Scrape(dport(), "gt_host_heartbeats_missed_total"), 0);
  EXPECT_EQ(Scrape(dport(), "gt_host_workers_connected"), 1);
  EXPECT_EQ(FetchFloats(client, 1, seq, nullptr).size(), static_cast<size_t>(kLongBatchSide * kLongBatchSide));
}

// Stopped (SIGTERM) in the middle of such a batch, the worker says goodbye
// at once, though it finishes the batch before it exits and sends no more
// heartbeats meanwhile: its clients are told it said goodbye, not that it
// missed its heartbeats.
TEST_F(HostTest, AWorkerStoppedInALongBatchSaysGoodbyeAtOnce) {
  RawClient client(context_, cluster_->endpoint());
  SendLongBatch(client);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  cluster_->SignalWorkerForTest(0, SIGTERM);
  std::optional<wire::Envelope> done = SyncWithHeartbeats(context_, cluster_->endpoint(), client);
  ASSERT_TRUE(done);
  ASSERT_GE(done->errors_size(), 1) << done->DebugString();
  EXPECT_NE(FirstError(*done).find("(said goodbye)"), std::string::npos) << FirstError(*done);
  EXPECT_EQ(Scrape(dport(), "gt_host_heartbeats_missed_total"), 0);
}

// A control connection attaches only under the token its worker registered
// with (and, with keys, its key); anything else is refused and changes
// nothing for the workers or the clients.
TEST_F(HostTest, AnAttachWithoutTheWorkersTokenIsRefused) {
  RawClient stranger(context_, cluster_->endpoint(), /*hello=*/false);
  stranger.SendToken(wire::Envelope::ATTACH, 0x1234567890abcdefULL);
  std::optional<wire::Envelope> reply = stranger.Receive(5000);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->kind(), wire::Envelope::ERROR);
  EXPECT_NE(FirstError(*reply).find("ATTACH names no registered worker"), std::string::npos) << FirstError(*reply);

  RawClient client(context_, cluster_->endpoint());
  client.Send({FromFloats(1, {3}, {1})});
  client.SendToken(wire::Envelope::ATTACH, 0);
  reply = client.Receive(5000);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->kind(), wire::Envelope::ERROR);
  EXPECT_EQ(FetchFloats(client, 1, 2), (std::vector<float>{3}));
  EXPECT_EQ(Scrape(dport(), "gt_host_workers_connected"), 1);
}

// A heartbeat with a worker's token from a connection the dispatcher does
// not know is that worker's control connection, reconnected by ZeroMQ: it
// is attached in place of the old one (STATS go there). Once the worker is
// lost, the same heartbeat gets the error that ends a worker left unheard.
TEST_F(HostTest, AWorkersTokenReattachesItsControlConnectionUntilItIsLost) {
  constexpr uint64_t kToken = 0x5eed5eed5eed5eedULL;
  auto work = std::make_unique<RawClient>(context_, cluster_->endpoint(), /*hello=*/false);
  work->SendToken(wire::Envelope::REGISTER, kToken);
  std::optional<wire::Envelope> welcome = work->Receive(5000);
  ASSERT_TRUE(welcome);
  ASSERT_EQ(welcome->kind(), wire::Envelope::WELCOME);
  const uint32_t index = welcome->worker_index();

  RawClient control(context_, cluster_->endpoint(), /*hello=*/false);
  RawClient asker(context_, cluster_->endpoint());
  bool stats_on_control = false;
  for (uint64_t request = 1; request <= 50 && !stats_on_control; ++request) {
    control.SendToken(wire::Envelope::HEARTBEAT, kToken);
    wire::Envelope stats;
    stats.set_kind(wire::Envelope::STATS);
    stats.set_request_id(request);
    stats.set_timeout_ms(50);
    asker.SendFrames({stats.SerializeAsString()});
    for (std::optional<wire::Envelope> m = control.Receive(100); m; m = control.Receive(0))
      stats_on_control |= m->kind() == wire::Envelope::STATS;
  }
  EXPECT_TRUE(stats_on_control) << "the heartbeat with worker #" << index << "'s token did not attach its connection";

  work.reset();  // its work connection closes: the worker is lost
  EXPECT_TRUE(WaitFor([&] { return Scrape(dport(), "gt_host_workers_connected") == 1; }));
  control.SendToken(wire::Envelope::HEARTBEAT, kToken);
  std::optional<wire::Envelope> told;
  for (told = control.Receive(5000); told && told->kind() != wire::Envelope::ERROR; told = control.Receive(5000)) {
  }
  ASSERT_TRUE(told) << "a lost worker's heartbeat got no answer";
  EXPECT_NE(FirstError(*told).find("lost worker worker-" + std::to_string(index) + ": start it again"), std::string::npos)
      << FirstError(*told);
  EXPECT_EQ(Scrape(dport(), "gt_host_workers_connected"), 1) << "the real worker is untouched";
}

// A worker stopped with SIGTERM says goodbye on its work connection and then
// closes both of its connections; the close of the other one, read first,
// must not turn the goodbye into "its connection closed" for the clients.
// ZeroMQ keeps a tcp port's low 16 bits, and says only "Invalid argument"
// of a malformed endpoint: an endpoint a host binds or connects to is checked
// first, so that 99999 is an error, not port 34463.
TEST(EndpointTest, AnEndpointIsTcpWithAPortUpTo65535OrIpcOrInproc) {
  for (const char* good : {"tcp://127.0.0.1:0", "tcp://127.0.0.1:65535", "tcp://*:5555", "tcp://[::1]:7",
                           "tcp://127.0.0.1:*", "ipc:///tmp/x.sock", "inproc://gt-1"})
    EXPECT_TRUE(CheckEndpoint(good).ok()) << good;
  for (const char* bad : {"tcp://127.0.0.1:65536", "tcp://127.0.0.1:99999", "tcp://127.0.0.1:", "tcp://h:-1",
                          "tcp://h:1e3", "tcp://h:123456", "tcp://h: 80", "tcp://localhost", "tcp://", "ipc://",
                          "inproc://", "udp://h:5555", "localhost:5555", ""}) {
    Status s = CheckEndpoint(bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(bad), std::string::npos) << s.message();
  }
  EXPECT_EQ(ParsePortNumber("0"), 0);
  EXPECT_EQ(ParsePortNumber("65535"), 65535);
  for (const char* bad : {"", "*", "-1", "65536", "99999", "123456", "8O", " 80"})
    EXPECT_EQ(ParsePortNumber(bad), std::nullopt) << bad;
}

TEST(HostShutdownTest, AStoppedWorkersClientsAreToldItSaidGoodbye) {
  constexpr int kWorkers = 4;
  ClusterOptions options;
  options.workers = kWorkers;
  ProcessCluster cluster(options);
  ASSERT_TRUE(cluster.WaitForWorkers(kWorkers));
  zmq::context_t context(1);
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < kWorkers; ++i) {  // a client's tensors go to the next worker in turn
    clients.push_back(std::make_unique<RawClient>(context, cluster.endpoint()));
    clients.back()->Send({FromFloats(1, {1}, {1})});
    ASSERT_TRUE(clients.back()->Sync());
  }
  for (int w = 0; w < kWorkers; ++w) cluster.SignalWorkerForTest(w, SIGTERM);
  const int port = cluster.dispatcher_metrics_port();
  EXPECT_TRUE(WaitFor([&] { return Scrape(port, "gt_host_workers_connected") == 0; }));
  for (auto& client : clients) {
    std::optional<wire::Envelope> done = client->Sync();
    ASSERT_TRUE(done);
    ASSERT_GE(done->errors_size(), 1) << done->DebugString();
    EXPECT_NE(FirstError(*done).find("(said goodbye)"), std::string::npos) << FirstError(*done);
  }
}

}  // namespace
}  // namespace gt::testing
