// The hosts as a user of the wire protocol sees them: real gt-dispatcher and
// gt-worker processes, metrics scraped over HTTP, several clients at once,
// and bad input that must get a clear error without disturbing anyone.
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

namespace gt::testing {
namespace {





std::string FirstError(const wire::Envelope& env) { return env.errors_size() ? env.errors(0).message() : ""; }

bool WaitFor(const std::function<bool()>& condition, int timeout_ms = 15000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

double Scrape(int port, const std::string& name, const std::map<std::string, std::string>& labels = {}) {
  return MetricValue(HttpGet(port, "/metrics"), name, labels).value_or(-1);
}

class HostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_dir_ = TempPath("instructions");
    ClusterOptions options;
    options.workers = 1;
    options.dispatcher_manifest = WriteTempFile("dispatcher.yaml",
        "host: dispatcher\nid: test-dispatcher\nheartbeat_interval_ms: 200\nheartbeat_timeout_ms: 1500\n"
        "stages:\n  - name: log\n    plugin: instruction_log\n    options: {path: " + log_dir_ + ".dispatcher.log}\n");
    options.worker_manifest = WriteTempFile("worker.yaml",
        "host: worker\nheartbeat_interval_ms: 200\nstages:\n  - name: log\n    plugin: instruction_log\n"
        "    options: {path: " + log_dir_ + ".worker.log}\nbackend:\n  plugin: torch\n");
    cluster_ = std::make_unique<ProcessCluster>(options);
    ASSERT_TRUE(cluster_->WaitForWorkers(1)) << "worker did not register";
  }

  int dport() const { return cluster_->dispatcher_metrics_port(); }
  int wport() const { return cluster_->worker_metrics_ports()[0]; }

  std::string log_dir_;
  zmq::context_t context_{1};
  std::unique_ptr<ProcessCluster> cluster_;
};

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

// A unit of one input: `op` on placeholder 1 into 2, then (when `consume`)
// a free of the input.
UnitTemplate OneOpUnit(Op op, bool consume) {
  UnitTemplate unit;
  unit.inputs = 1;
  unit.body.push_back(MakeInstruction(op, 0, {2}, {1}));
  if (consume) unit.body.push_back(MakeInstruction(Op::kFree, 0, {}, {1}));
  return unit;
}

Instruction DefineUnit(uint64_t seq, uint64_t key, const UnitTemplate& unit) {
  Instruction define = MakeInstruction(Op::kDefineUnit, seq, {}, {});
  define.attrs.seed = key;
  define.payload = EncodeUnit(unit);
  return define;
}

Instruction RunUnit(uint64_t seq, uint64_t key, TensorId input, TensorId output, std::vector<int64_t> consumed = {}) {
  Instruction run = MakeInstruction(Op::kRunUnit, seq, {output}, {input});
  run.attrs.seed = key;
  run.attrs.axes = std::move(consumed);
  return run;
}

// Workers keep units by key for every client; a unit a client defined itself
// (GT_COMPILE=1 compiles in the client) must stay its own whatever key
// another client defines.
TEST_F(HostTest, AClientsOwnUnitIsNeverReplacedByAnothersUnderTheSameKey) {
  RawClient a(context_, cluster_->endpoint());
  RawClient b(context_, cluster_->endpoint());
  a.Send({FromFloats(1, {3}, {1}), DefineUnit(2, 7, OneOpUnit(Op::kNeg, false)), RunUnit(3, 7, 1, 2)});
  EXPECT_EQ(FetchFloats(a, 2, 4), (std::vector<float>{-3}));
  b.Send({FromFloats(1, {-5}, {1}), DefineUnit(2, 7, OneOpUnit(Op::kAbs, false)), RunUnit(3, 7, 1, 2)});
  EXPECT_EQ(FetchFloats(b, 2, 4), (std::vector<float>{5}));
  a.Send({RunUnit(5, 7, 1, 3)});
  EXPECT_EQ(FetchFloats(a, 3, 6), (std::vector<float>{-3})) << "client a ran client b's unit";
}

// Every op the op table marks host-only, sent by a client on its own, in a
// unit's body, or with a worker chosen, is refused by name; nothing reaches
// a worker and the client's stream goes on.
TEST_F(HostTest, EveryHostOnlyKindIsRefusedFromAClientAlsoInsideAUnit) {
  RawClient client(context_, cluster_->endpoint());
  client.Send({FromFloats(1, {3}, {1})});
  ASSERT_TRUE(client.Sync());
  const double backend_errors = Scrape(wport(), "gt_stage_errors_total", {{"stage", "backend"}});
  uint64_t seq = 10;
  int refused = 0;
  for (uint16_t code = 0; code < static_cast<uint16_t>(Op::kCount); ++code) {
    const Op op = static_cast<Op>(code);
    if (ClientMaySend(op)) continue;
    ++refused;
    const TensorId result = ProducesTensor(op) ? 100 + code : 0;
    Instruction direct = MakeInstruction(op, ++seq, result ? std::vector<TensorId>{result} : std::vector<TensorId>{}, {1});
    UnitTemplate unit;
    unit.inputs = 1;
    unit.body.push_back(MakeInstruction(op, 0, {2}, {1}));
    client.Send({direct, DefineUnit(++seq, 50 + code, unit)});
    std::optional<wire::Envelope> done = client.Sync();
    ASSERT_TRUE(done);
    ASSERT_EQ(done->errors_size(), 2) << OpName(op);
    const std::string name(OpName(op));
    EXPECT_NE(done->errors(0).message().find(name + " is reserved for the dispatcher"), std::string::npos)
        << done->errors(0).message();
    EXPECT_NE(done->errors(1).message().find("its body holds " + name), std::string::npos) << done->errors(1).message();
  }
  EXPECT_EQ(refused, 6);  // drop_client, membership, broadcast, all_reduce, all_gather, reduce_scatter
  // A unit whose body picks a worker is refused too.
  UnitTemplate placed;
  placed.inputs = 1;
  placed.body.push_back(MakeInstruction(Op::kNeg, 0, {2}, {1}));
  placed.body.back().worker = 0;
  client.Send({DefineUnit(++seq, 99, placed), MakeInstruction(Op::kNeg, ++seq, {3}, {1})});
  std::optional<wire::Envelope> done = client.Sync();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->errors_size(), 1);
  EXPECT_NE(FirstError(*done).find("which a client may not send"), std::string::npos) << FirstError(*done);
  EXPECT_EQ(FetchFloats(client, 3, ++seq), (std::vector<float>{-3}));
  // Nothing refused reached the worker: no result of one exists there (only
  // %1 and the neg's %3), and its backend reported no error.
  EXPECT_EQ(Scrape(wport(), "gt_worker_live_tensors"), 2);
  EXPECT_EQ(Scrape(wport(), "gt_stage_errors_total", {{"stage", "backend"}}), backend_errors);
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

// The client forgets the inputs a run_unit consumes when it sends it; when
// the dispatcher refuses the run, it must still free them.
TEST_F(HostTest, ARefusedRunUnitStillFreesTheInputsItConsumes) {
  RawClient client(context_, cluster_->endpoint());
  client.Send({FromFloats(1, {3}, {1}), FromFloats(2, {4}, {1})});
  ASSERT_TRUE(client.Sync());
  EXPECT_EQ(Scrape(wport(), "gt_worker_live_tensors"), 2);
  client.Send({RunUnit(3, 9, 1, 5, {0})});  // no unit was defined under key 9
  std::optional<wire::Envelope> done = client.Sync();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->errors_size(), 1);
  EXPECT_NE(FirstError(*done).find("no unit was defined"), std::string::npos) << FirstError(*done);
  EXPECT_TRUE(WaitFor([&] { return Scrape(wport(), "gt_worker_live_tensors") == 1; }));
  wire::Envelope fetched;
  EXPECT_TRUE(FetchFloats(client, 1, 6, &fetched).empty());
  EXPECT_EQ(FetchFloats(client, 2, 7), (std::vector<float>{4}));
}

// A run the worker refuses (here: it says it consumes an input the unit does
// not free) still frees what it said it consumes there too: the client and
// the dispatcher have forgotten it, and kept, it would escape the client's
// quotas for good.
TEST_F(HostTest, ARunUnitTheWorkerRefusesStillFreesTheInputsItConsumes) {
  RawClient client(context_, cluster_->endpoint());
  client.Send({FromFloats(1, {3}, {1}), FromFloats(2, {4}, {1}), DefineUnit(3, 7, OneOpUnit(Op::kNeg, false))});
  ASSERT_TRUE(client.Sync());
  EXPECT_EQ(Scrape(wport(), "gt_worker_live_tensors"), 2);
  client.Send({RunUnit(4, 7, 1, 5, {0})});
  std::optional<wire::Envelope> done = client.Sync();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->errors_size(), 1);
  EXPECT_NE(FirstError(*done).find("freed operands do not match the unit's"), std::string::npos) << FirstError(*done);
  EXPECT_TRUE(WaitFor([&] { return Scrape(wport(), "gt_worker_live_tensors") == 1; }))
      << Scrape(wport(), "gt_worker_live_tensors") << " tensors live";
  EXPECT_EQ(FetchFloats(client, 2, 7), (std::vector<float>{4}));
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
