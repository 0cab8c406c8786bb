// The hosts as a user of the wire protocol sees them: real gt-dispatcher and
// gt-worker processes, metrics scraped over HTTP, several clients at once,
// and bad input that must get a clear error without disturbing anyone.
// Compiled units a client defines are in host_unit_test.cc, a worker's
// loss, heartbeats and reattaching in host_worker_test.cc; the fixture in
// host_test_fixture.h. All three make the suite host_test.
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

TEST_F(HostTest, EveryStageCountsWhatPassesThrough) {
  std::map<std::string, std::string> d_log = {{"host", "dispatcher"}, {"stage", "log"}};
  std::map<std::string, std::string> d_router = {{"host", "dispatcher"}, {"stage", "router"}};
  std::map<std::string, std::string> w_log = {{"host", "worker"}, {"stage", "log"}};
  std::map<std::string, std::string> w_backend = {{"host", "worker"}, {"stage", "backend"}};
  const std::string received = "gt_stage_instructions_received_total";
  double before[4] = {Scrape(dport(), received, d_log), Scrape(dport(), received, d_router),
                      Scrape(wport(), received, w_log), Scrape(wport(), received, w_backend)};
  for (double b : before) EXPECT_EQ(b, 0);

  RawClient client(context_, cluster_->endpoint());
  client.Send({FromFloats(1, {1, 2, 3, 4}, {2, 2}), MakeInstruction(Op::kAdd, 2, {2}, {1, 1})});
  EXPECT_EQ(FetchFloats(client, 2, 3), (std::vector<float>{2, 4, 6, 8}));

  // from_bytes, add, fetch, sync: four instructions through every stage.
  EXPECT_EQ(Scrape(dport(), received, d_log), 4);
  EXPECT_EQ(Scrape(dport(), "gt_stage_instructions_emitted_total", d_log), 4);
  EXPECT_EQ(Scrape(dport(), received, d_router), 4);
  EXPECT_EQ(Scrape(wport(), received, w_log), 4);
  EXPECT_EQ(Scrape(wport(), received, w_backend), 4);
  EXPECT_GE(Scrape(wport(), "gt_stage_processing_seconds_count", w_backend), 4);
  EXPECT_EQ(Scrape(wport(), "gt_backend_op_seconds_count", {{"op", "add"}}), 1);
  EXPECT_EQ(Scrape(wport(), "gt_worker_live_tensors"), 2);
  EXPECT_EQ(Scrape(wport(), "gt_worker_resident_bytes"), 32);
  EXPECT_EQ(Scrape(dport(), "gt_host_clients_connected"), 1);
  EXPECT_EQ(Scrape(dport(), "gt_host_workers_connected"), 1);
  EXPECT_GT(Scrape(dport(), "gt_host_bytes_received_total"), 16);
  EXPECT_GT(Scrape(wport(), "gt_host_bytes_sent_total"), 16);
  EXPECT_EQ(Scrape(wport(), "gt_instruction_log_lines_total", w_log), 4);
}

TEST_F(HostTest, TwoClientsNeverSeeEachOthersTensors) {
  RawClient a(context_, cluster_->endpoint());
  RawClient b(context_, cluster_->endpoint());
  // The same ids in two namespaces.
  a.Send({FromFloats(1, {1, 1}, {2}), FromFloats(5, {5, 5}, {2})});
  b.Send({FromFloats(1, {2, 2}, {2})});
  EXPECT_EQ(FetchFloats(a, 1, 10), (std::vector<float>{1, 1}));
  EXPECT_EQ(FetchFloats(b, 1, 10), (std::vector<float>{2, 2}));

  // b names a's %5: unknown in b's namespace.
  b.Send({MakeInstruction(Op::kNeg, 11, {6}, {5})});
  std::optional<wire::Envelope> done = b.Sync();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->errors_size(), 1);
  EXPECT_NE(FirstError(*done).find("unknown tensor %5"), std::string::npos) << FirstError(*done);
  // b frees its %1 and tries to fetch a's %5; a is untouched.
  b.Send({MakeInstruction(Op::kFree, 12, {}, {1})});
  wire::Envelope b_done;
  EXPECT_TRUE(FetchFloats(b, 5, 13, &b_done).empty());
  EXPECT_NE(FirstError(b_done).find("unknown tensor %5"), std::string::npos);
  EXPECT_EQ(FetchFloats(a, 5, 14), (std::vector<float>{5, 5}));
  EXPECT_EQ(FetchFloats(a, 1, 15), (std::vector<float>{1, 1}));
}

TEST_F(HostTest, DisconnectedClientsTensorsAreFreed) {
  RawClient keeper(context_, cluster_->endpoint());
  keeper.Send({FromFloats(1, {7}, {1})});
  ASSERT_TRUE(keeper.Sync());
  {
    RawClient leaver(context_, cluster_->endpoint());
    leaver.Send({FromFloats(1, {1, 2}, {2}), FromFloats(2, {3, 4}, {2}), MakeInstruction(Op::kAdd, 3, {3}, {1, 2})});
    ASSERT_TRUE(leaver.Sync());
    EXPECT_EQ(Scrape(wport(), "gt_worker_live_tensors"), 4);
    leaver.Bye();
  }
  EXPECT_TRUE(WaitFor([&] { return Scrape(wport(), "gt_worker_live_tensors") == 1; }));
  EXPECT_TRUE(WaitFor([&] { return Scrape(dport(), "gt_host_clients_connected") == 1; }));
  EXPECT_EQ(FetchFloats(keeper, 1, 2), (std::vector<float>{7}));
}

TEST_F(HostTest, MalformedMessagesGetAnErrorAndTheHostsKeepServing) {
  RawClient bad(context_, cluster_->endpoint());
  bad.SendFrames({"this is not protobuf \xff\xff\xff"});
  std::optional<wire::Envelope> reply = bad.Receive(5000);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->kind(), wire::Envelope::ERROR);
  EXPECT_NE(FirstError(*reply).find("is not a gt.wire.Envelope"), std::string::npos) << FirstError(*reply);

  // An envelope with an op code outside the op set, and one whose payload frame is missing.
  wire::Envelope env;
  env.set_kind(wire::Envelope::BATCH);
  env.add_instructions()->set_op(999);
  wire::Instruction* missing = env.add_instructions();
  missing->set_op(static_cast<uint32_t>(Op::kFromBytes));
  missing->add_results(1);
  missing->set_payload_frame(3);
  bad.SendFrames({env.SerializeAsString()});
  std::optional<wire::Envelope> done = bad.Sync();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->errors_size(), 2);
  EXPECT_NE(done->errors(0).message().find("unknown op code 999"), std::string::npos) << done->errors(0).message();
  EXPECT_NE(done->errors(1).message().find("payload frame 3"), std::string::npos) << done->errors(1).message();

  // A shape mismatch the client would have caught, sent raw: the backend says why.
  bad.Send({FromFloats(1, {1, 2, 3}, {3}), FromFloats(2, {1, 2}, {2}), MakeInstruction(Op::kAdd, 3, {3}, {1, 2}),
            MakeInstruction(Op::kRelu, 4, {4}, {3})});
  done = bad.Sync();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->errors_size(), 2);
  EXPECT_EQ(done->errors(0).seq(), 3u);
  EXPECT_NE(FirstError(*done).find("add #3"), std::string::npos) << FirstError(*done);
  EXPECT_NE(done->errors(1).message().find("because op #3 failed"), std::string::npos) << done->errors(1).message();

  // Everyone else is served as before.
  RawClient good(context_, cluster_->endpoint());
  good.Send({FromFloats(1, {1, 2}, {2}), MakeInstruction(Op::kMul, 2, {2}, {1, 1})});
  EXPECT_EQ(FetchFloats(good, 2, 3), (std::vector<float>{1, 4}));
  EXPECT_EQ(FetchFloats(bad, 1, 20), (std::vector<float>{1, 2, 3}));
  EXPECT_TRUE(cluster_->AllAlive());
  EXPECT_GE(Scrape(dport(), "gt_host_malformed_messages_total"), 1);
  EXPECT_GE(Scrape(wport(), "gt_stage_errors_total", {{"stage", "backend"}, {"kind", "invalid_argument"}}), 1);
}

TEST_F(HostTest, ReusedResultIdIsRejectedWithoutLosingTheTensor) {
  RawClient client(context_, cluster_->endpoint());
  client.Send({FromFloats(1, {3}, {1}), FromFloats(1, {9}, {1})});
  std::optional<wire::Envelope> done = client.Sync();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->errors_size(), 1);
  EXPECT_NE(FirstError(*done).find("already names a live tensor"), std::string::npos) << FirstError(*done);
  EXPECT_EQ(FetchFloats(client, 1, 5), (std::vector<float>{3}));
}

// Sequence ids in markers are the hotpath stage's: a client's marker with
// one is refused (the compile stage would replay the region it opens by ops
// and wiring alone), and what follows runs as usual.
TEST_F(HostTest, AClientsMarkerWithASequenceIdIsRefused) {
  RawClient client(context_, cluster_->endpoint());
  Instruction start = MakeInstruction(Op::kHotStart, 2, {}, {});
  start.attrs.seed = 42;
  client.Send({FromFloats(1, {3}, {1}), start, MakeInstruction(Op::kNeg, 3, {2}, {1})});
  std::optional<wire::Envelope> done = client.Sync();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->errors_size(), 1);
  EXPECT_EQ(done->errors(0).seq(), 2u);
  EXPECT_NE(FirstError(*done).find("carry no sequence id"), std::string::npos) << FirstError(*done);
  EXPECT_EQ(FetchFloats(client, 2, 5), (std::vector<float>{-3}));
}

// Instructions only the dispatcher makes are refused from a client, each
// with its own error, and the client's stream goes on.
TEST_F(HostTest, AClientsHostOnlyInstructionsAreRefused) {
  RawClient client(context_, cluster_->endpoint());
  Instruction membership = MakeMembership({0});
  membership.seq = 2;
  CollectiveSpec spec;
  spec.group = {0};
  spec.rendezvous = "127.0.0.1:9";
  Instruction collective = MakeCollective(Op::kAllReduce, spec);
  collective.seq = 3;
  collective.operands = {1};
  collective.results = {4};
  Instruction placed = MakeInstruction(Op::kNeg, 4, {5}, {1});
  placed.worker = 1;
  client.Send({FromFloats(1, {3}, {1}), membership, collective, placed, MakeInstruction(Op::kNeg, 5, {2}, {1})});
  std::optional<wire::Envelope> done = client.Sync();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->errors_size(), 3);
  EXPECT_NE(done->errors(0).message().find("membership is reserved for the dispatcher"), std::string::npos);
  EXPECT_NE(done->errors(1).message().find("all_reduce is reserved for the dispatcher"), std::string::npos);
  EXPECT_NE(done->errors(2).message().find("may not place instructions on workers"), std::string::npos);
  EXPECT_EQ(FetchFloats(client, 2, 6), (std::vector<float>{-3}));
}

// A peer must open a session (HELLO with a heartbeat token) before it sends
// work: a batch without one is refused and leaves nothing behind, so peers
// that never say HELLO cannot pile up clients and tensors.
TEST_F(HostTest, ABatchWithoutHelloIsRefusedAndLeavesNothing) {
  const double clients = Scrape(dport(), "gt_host_clients_connected");
  RawClient stranger(context_, cluster_->endpoint(), /*hello=*/false);
  stranger.Send({FromFloats(1, {1, 2}, {2}), MakeSync(0, 2, 7)});
  std::optional<wire::Envelope> reply = stranger.Receive(5000);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->kind(), wire::Envelope::ERROR);
  EXPECT_NE(FirstError(*reply).find("says HELLO before its first batch"), std::string::npos) << FirstError(*reply);
  stranger.SendToken(wire::Envelope::HELLO, 0);
  reply = stranger.Receive(5000);
  ASSERT_TRUE(reply);
  EXPECT_NE(FirstError(*reply).find("no heartbeat token"), std::string::npos) << FirstError(*reply);
  EXPECT_EQ(Scrape(dport(), "gt_host_clients_connected"), clients);
  EXPECT_EQ(Scrape(wport(), "gt_worker_live_tensors"), 0);
}

// The checks the client makes, the worker makes again for instructions from
// anyone: ATen would turn a NaN bound into an empty arange, and take int64
// values near INT64_MIN for symbolic sizes.
TEST_F(HostTest, RawInstructionsAtTheEdgesGetClearErrorsOrPythonsAnswer) {
  RawClient client(context_, cluster_->endpoint());
  Instruction arange = MakeInstruction(Op::kArange, 1, {1}, {});
  arange.attrs.numbers = {0, std::nan(""), 1};
  arange.attrs.dtype = DType::kFloat32;
  client.Send({arange});
  wire::Envelope done;
  EXPECT_TRUE(FetchFloats(client, 1, 2, &done).empty());
  ASSERT_GE(done.errors_size(), 1);
  EXPECT_NE(done.errors(0).message().find("arange: step must be non-zero and bounds finite"), std::string::npos)
      << done.errors(0).message();

  Instruction slice = MakeInstruction(Op::kSlice, 4, {4}, {3});
  slice.attrs.axes = {0, -5, std::numeric_limits<int64_t>::min(), 1};  // x[-5:-2**63]: empty, as in Python
  client.Send({FromFloats(3, {1, 2, 3}), slice});
  wire::Envelope sliced;
  EXPECT_TRUE(FetchFloats(client, 4, 5, &sliced).empty());
  EXPECT_EQ(sliced.errors_size(), 0) << FirstError(sliced);
  slice.seq = 6;
  slice.results = {5};
  slice.attrs.axes = {0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 1};  // x[:]
  client.Send({slice});
  EXPECT_EQ(FetchFloats(client, 5, 7), (std::vector<float>{1, 2, 3}));

  // An op code no host knows is reported as sent (the client says "op 999"),
  // not as the sync the dispatcher's bookkeeping stood it in for.
  client.Send({MakeInstruction(static_cast<Op>(999), 8, {6}, {})});
  std::optional<wire::Envelope> unknown = client.Sync();
  ASSERT_TRUE(unknown);
  ASSERT_EQ(unknown->errors_size(), 1);
  EXPECT_EQ(unknown->errors(0).op(), 999u);
  EXPECT_EQ(unknown->errors(0).seq(), 8u);
}

// Replies to a peer that does not read them pile up in the dispatcher, so
// only a session is answered: STATS before HELLO is refused.
TEST_F(HostTest, StatsBeforeHelloAreRefused) {
  RawClient stranger(context_, cluster_->endpoint(), /*hello=*/false);
  wire::Envelope stats;
  stats.set_kind(wire::Envelope::STATS);
  stats.set_request_id(1);
  stranger.SendFrames({stats.SerializeAsString()});
  std::optional<wire::Envelope> reply = stranger.Receive(10000);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->kind(), wire::Envelope::ERROR);
  EXPECT_NE(FirstError(*reply).find("no session: a client says HELLO before STATS"), std::string::npos)
      << FirstError(*reply);
}

// A client that stops reading is found out by its queue at the dispatcher
// filling, and dropped (its tensors freed), instead of having its replies
// buffered without bound in the memory every client shares.
TEST_F(HostTest, AClientThatLeavesItsRepliesUnreadIsDroppedNotBuffered) {
  RawClient reader(context_, cluster_->endpoint());
  reader.Send({FromFloats(1, {5})});
  ASSERT_TRUE(reader.Sync());
  zmq::context_t own(1);
  RawClient silent(own, cluster_->endpoint());
  std::vector<Instruction> batch = {FromFloats(1, std::vector<float>(1024, 1.f))};
  for (uint64_t seq = 2; seq < 5002; ++seq) batch.push_back(MakeInstruction(Op::kFetch, seq, {}, {1}));
  silent.Send(batch);
  // Both sessions stay alive by their heartbeats (sent from another socket,
  // as the C++ client does): only the unread replies can end the silent one.
  RawClient beats(context_, cluster_->endpoint(), /*hello=*/false);
  auto connected = [&] {
    beats.SendToken(wire::Envelope::HEARTBEAT, reader.token());
    beats.SendToken(wire::Envelope::HEARTBEAT, silent.token());
    return Scrape(dport(), "gt_host_clients_connected");
  };
  EXPECT_TRUE(WaitFor([&] { return connected() == 1; }, 30000)) << connected() << " clients connected";
  EXPECT_TRUE(WaitFor([&] { return Scrape(wport(), "gt_worker_live_tensors") == 1; }))
      << "the silent client's tensor was not freed";
  EXPECT_EQ(FetchFloats(reader, 1, 2), (std::vector<float>{5}));
  // Reading at last the replies that did fit, then asking again, it learns why.
  int queued = 0;
  while (silent.Receive(1000)) ++queued;
  EXPECT_GE(queued, 1000);
  EXPECT_LT(queued, 5000) << "every reply was queued";
  silent.Send({MakeInstruction(Op::kFetch, 6000, {}, {1})});
  std::optional<wire::Envelope> refused = silent.Receive(10000);
  ASSERT_TRUE(refused);
  const std::string why = FirstError(*refused);
  EXPECT_NE(why.find("it left 1000 replies unread"), std::string::npos) << "[" << why << "]";
  EXPECT_TRUE(cluster_->AllAlive());
}

// A worker's queue at the dispatcher fills only while the worker reads
// nothing (here: stopped, while a client sends it more than that queue
// holds). It is not lost for that: its batches wait in the dispatcher and go
// on, in order, once it reads again.
TEST(HostBackpressureTest, BatchesForAWorkerThatStoppedReadingWaitAndArriveInOrder) {
  ClusterOptions options;
  options.dispatcher_manifest = WriteTempFile(
      "patient-dispatcher.yaml", "host: dispatcher\nheartbeat_interval_ms: 200\nheartbeat_timeout_ms: 60000\nstages: []\n");
  ProcessCluster cluster(options);
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  zmq::context_t context(1);
  RawClient client(context, cluster.endpoint());
  const std::vector<float> ones(16384, 1.f);  // 64 KiB a batch: past the socket buffers soon
  TensorId sum = 1;
  uint64_t seq = 1;
  client.Send({FromFloats(sum, std::vector<float>(16384, 0.f))});
  ASSERT_TRUE(client.Sync());
  cluster.SignalWorkerForTest(0, SIGSTOP);
  const int batches = 2000;  // more than the dispatcher queues for one peer
  for (int i = 0; i < batches; ++i) {
    const TensorId term = 100000 + i, next = sum + 1;
    Instruction from = FromFloats(term, ones);
    from.seq = ++seq;
    client.Send({from, MakeInstruction(Op::kAdd, ++seq, {next}, {sum, term}),
                 MakeInstruction(Op::kFree, ++seq, {}, {sum, term})});
    sum = next;
  }
  cluster.SignalWorkerForTest(0, SIGCONT);
  wire::Envelope done;
  std::vector<float> got = FetchFloats(client, sum, ++seq, &done);
  ASSERT_EQ(got.size(), ones.size()) << (done.errors_size() ? FirstError(done) : "");
  EXPECT_EQ(got.front(), static_cast<float>(batches));
  EXPECT_EQ(got.back(), static_cast<float>(batches));
  EXPECT_EQ(MetricValue(HttpGet(cluster.dispatcher_metrics_port(), "/metrics"), "gt_host_workers_connected"), 1.0);
}

}  // namespace
}  // namespace gt::testing
