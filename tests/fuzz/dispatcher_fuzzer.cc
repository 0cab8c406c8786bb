// Fuzz target: a client's batch (program.h decodes the input into one)
// through a real in-process Dispatcher, as a client sends it: HELLO, the
// BATCH over inproc ZeroMQ, then the dispatcher's admission, the manifest's
// stages (sharding, hotpath, compile) and the router. Two fake workers
// register and acknowledge every sync, so no backend runs.
//
// Per input: a fresh client connection says HELLO, sends the program and a
// sync of its own, and waits for that sync's answer; then it says BYE and
// waits until the dispatcher has dropped the session (a batch after BYE is
// refused), so nothing of one input is left for the next. Checks: the
// dispatcher answers the sync (no hang, 10 s), every error it reports names
// an op the client sent or none (seq 0) with a valid code, and it stays
// alive.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>

#include <prometheus/registry.h>
#include <zmq.hpp>

#include "ir/codec.h"
#include "dispatcher/dispatcher.h"
#include "fuzz_check.h"
#include "gt/op_attrs.h"
#include "host/manifest.h"
#include "program.h"
#include "net/transport.h"

namespace gt::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

// The stages of configs/embedded-dispatcher.yaml that carry out a client's
// instructions (instruction_log only writes them down). Heartbeats never
// expire here: the fake workers send none.
constexpr const char* kManifest = R"(host: dispatcher
id: fuzz-dispatcher
heartbeat_interval_ms: 1000
heartbeat_timeout_ms: 3600000
stages:
  - {name: sharding, plugin: sharding}
  - {name: hotpath, plugin: hotpath}
  - {name: compile, plugin: compile}
)";
constexpr int kWorkers = 2;
constexpr size_t kMaxOps = 64;
// Above any sync id a program can hold (one byte): the harness's own.
constexpr uint64_t kOwnSyncBase = uint64_t{1} << 40;
constexpr auto kAnswerTimeout = std::chrono::seconds(10);

template <typename T>
T OrDie(Result<T> r, const char* what) {
  if (!r.ok()) Fail(std::string(what) + ": " + r.status().ToString());
  return std::move(*r);
}

void Send(zmq::socket_t& socket, const wire::Envelope& env, const std::vector<BlobPtr>& frames = {}) {
  Check(SendEnvelope(socket, "", env, frames).ok(), "send to the dispatcher failed");
}

wire::Envelope Envelope(wire::Envelope::Kind kind) {
  wire::Envelope env;
  env.set_kind(kind);
  return env;
}

// The next message on `socket`, if one is waiting.
std::optional<WireMessage> Receive(zmq::socket_t& socket) {
  auto frames = ReceiveFrames(socket, zmq::recv_flags::dontwait);
  if (!frames) return std::nullopt;
  return OrDie(DecodeFrames(std::move(*frames), false), "the dispatcher sent a malformed message");
}

// The dispatcher, run on its own thread for the whole process (libFuzzer
// exits without destroying it), and the fake workers.
class Harness {
 public:
  static Harness& Get() {
    static Harness* harness = new Harness();  // never destroyed: see the class comment
    return *harness;
  }

  void Run(const std::vector<Instruction>& batch);

 private:
  Harness();
  void RegisterWorkers();
  void ServeWorkers();
  void AnswerWorker(zmq::socket_t& worker, const WireMessage& msg);
  // Serves the workers until `done` accepts a message to the client.
  template <typename Done>
  void Await(zmq::socket_t& client, Done done, const char* what);
  void CheckErrors(const wire::Envelope& answer, const std::set<uint64_t>& seqs);

  zmq::context_t context_;
  prometheus::Registry registry_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<zmq::socket_t> workers_;
  uint64_t inputs_ = 0;
};

Harness::Harness() {
  HostManifest manifest = OrDie(ParseManifest(kManifest, "fuzz-dispatcher.yaml", HostKind::kDispatcher), "manifest");
  dispatcher_ = OrDie(Dispatcher::Create(manifest, context_, registry_), "dispatcher");
  Check(dispatcher_->Bind(UniqueInprocEndpoint("gt-fuzz-dispatcher")).ok(), "bind");
  thread_ = std::thread([this] { dispatcher_->Run(stop_); });
  RegisterWorkers();
}

void Harness::RegisterWorkers() {
  for (int i = 0; i < kWorkers; ++i) {
    zmq::socket_t& w = workers_.emplace_back(context_, zmq::socket_type::dealer);
    w.set(zmq::sockopt::linger, 0);
    w.connect(dispatcher_->endpoint());
    wire::Envelope reg = Envelope(wire::Envelope::REGISTER);
    reg.set_name("fuzz-worker-" + std::to_string(i));
    Send(w, reg);
    zmq::message_t welcome;
    Check(w.recv(welcome).has_value(), "no WELCOME");
  }
}

// A worker acknowledges every sync it is sent, as gt-worker does; the rest
// of its batches is dropped unexecuted.
void Harness::AnswerWorker(zmq::socket_t& worker, const WireMessage& msg) {
  if (msg.envelope.kind() != wire::Envelope::BATCH) return;
  for (const wire::Instruction& wi : msg.envelope.instructions()) {
    if (wi.op() != static_cast<uint32_t>(Op::kSync)) continue;
    wire::Envelope ack = Envelope(wire::Envelope::SYNC_ACK);
    ack.set_client(wi.client());
    ack.set_sync_id(wi.sync_id());
    Send(worker, ack);
  }
}

void Harness::ServeWorkers() {
  for (zmq::socket_t& w : workers_)
    while (std::optional<WireMessage> msg = Receive(w)) AnswerWorker(w, *msg);
}

template <typename Done>
void Harness::Await(zmq::socket_t& client, Done done, const char* what) {
  const Clock::time_point deadline = Clock::now() + kAnswerTimeout;
  std::vector<zmq::pollitem_t> items = {{client.handle(), 0, ZMQ_POLLIN, 0}};
  for (zmq::socket_t& w : workers_) items.push_back({w.handle(), 0, ZMQ_POLLIN, 0});
  while (Clock::now() < deadline) {
    try {
      zmq::poll(items, std::chrono::milliseconds(100));
    } catch (const zmq::error_t& e) {  // libFuzzer's timer signal (-timeout) interrupts it
      if (e.num() != EINTR) throw;
    }
    ServeWorkers();
    while (std::optional<WireMessage> msg = Receive(client))
      if (done(msg->envelope)) return;
  }
  Fail(std::string("the dispatcher did not answer ") + what + " within 10 s");
}

// Every error names one of the client's ops (or none: a host's own) and a
// known code.
void Harness::CheckErrors(const wire::Envelope& answer, const std::set<uint64_t>& seqs) {
  for (const wire::OpError& e : answer.errors()) {
    Check(e.code() > 0 && e.code() < static_cast<uint32_t>(Code::kCount), "error with code " + std::to_string(e.code()));
    Check(e.seq() == 0 || seqs.count(e.seq()), "error about seq " + std::to_string(e.seq()) +
                                                   ", which the client never sent: " + e.message());
  }
}

void Harness::Run(const std::vector<Instruction>& batch) {
  const uint64_t n = ++inputs_;
  zmq::socket_t client(context_, zmq::socket_type::dealer);
  client.set(zmq::sockopt::linger, 0);
  client.connect(dispatcher_->endpoint());
  wire::Envelope hello = Envelope(wire::Envelope::HELLO);
  hello.set_token(n);
  Send(client, hello);
  wire::Envelope env = Envelope(wire::Envelope::BATCH);
  std::vector<BlobPtr> frames;
  std::set<uint64_t> seqs;
  for (const Instruction& inst : batch) {
    EncodeInstruction(inst, env.add_instructions(), &frames);
    seqs.insert(inst.seq);
  }
  const uint64_t own_seq = batch.empty() ? 1 : batch.back().seq + 1;
  seqs.insert(own_seq);
  EncodeInstruction(MakeSync(0, own_seq, kOwnSyncBase + n), env.add_instructions(), &frames);
  Send(client, env, frames);
  Await(client, [&](const wire::Envelope& answer) {
    if (answer.kind() == wire::Envelope::SYNC_DONE) CheckErrors(answer, seqs);
    return answer.kind() == wire::Envelope::SYNC_DONE && answer.sync_id() == kOwnSyncBase + n;
  }, "the client's sync");
  Send(client, Envelope(wire::Envelope::BYE));
  Send(client, Envelope(wire::Envelope::BATCH));  // refused once the BYE is through
  Await(client, [](const wire::Envelope& answer) { return answer.kind() == wire::Envelope::ERROR; }, "a batch after BYE");
}

}  // namespace
}  // namespace gt::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The fuzz tree's sharding plugin (no LibTorch) before any other.
  setenv("GT_PLUGIN_PATH", GT_FUZZ_PLUGIN_DIR, 1);
  gt::fuzz::QuietProtobuf();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gt::fuzz;
  const std::vector<gt::Instruction> batch = ToInstructions(ReadProgram(data, size, kMaxOps));
  // For triage: `GT_FUZZ_PRINT=1 gt_fuzz_dispatcher crash-...` shows the batch.
  static const bool print = std::getenv("GT_FUZZ_PRINT") != nullptr;
  if (print)
    for (const gt::Instruction& inst : batch) std::fprintf(stderr, "  %s\n", inst.Describe().c_str());
  Harness::Get().Run(batch);
  return 0;
}
