// Surviving a dispatcher restart with real processes: gt-dispatcher is
// SIGKILLed and started again on the same address while a gt-worker holds a
// client's tensors; the worker rejoins with its inventory, a raw client
// RESUMEs its session and replays, and the numbers come out as LibTorch's
// (the same ops, computed here by hand on small exact floats). Also: the
// refusals a RESUME can get, and the worker's grace period running out; a
// sync in flight at the kill (the worker still busy when it rejoins); a
// rejoining worker whose old index a fresh worker took first.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cluster.h"
#include "gt/op_attrs.h"
#include "net/transport.h"

extern char** environ;

namespace gt::testing {
namespace {

pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  const int failed = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return failed ? -1 : pid;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The exit status of `pid` once it exits within `timeout_ms`; -1 if it did not.
int WaitExit(pid_t pid, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 20) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

// One dispatcher and workers on a fresh ipc:// address, each started (and
// the dispatcher started again) on demand. `resume_wait_ms`: how long a
// RESUME waits for the workers that hold its tensors to come back.
class RestartCluster {
 public:
  explicit RestartCluster(int resume_wait_ms = 10000) {
    const std::string name = TempPath("restart");
    endpoint_ = "ipc://" + name + ".sock";
    dispatcher_log_ = name + "-dispatcher.log";
    worker_log_ = name + "-worker.log";
    dispatcher_manifest_ = WriteTempFile("restart-dispatcher.yaml",
                                         "host: dispatcher\nresume_wait_ms: " + std::to_string(resume_wait_ms) +
                                             "\nstages:\n  - name: sharding\n    plugin: sharding\n");
    worker_manifest_ = WriteTempFile("restart-worker.yaml",
                                     "host: worker\nbackend:\n  plugin: torch\n  options: {intra_op_threads: 1}\n");
  }
  ~RestartCluster() {
    for (pid_t pid : workers_) kill(pid, SIGCONT);  // one a test stopped
    std::vector<pid_t> all = workers_;
    all.push_back(dispatcher_);
    for (pid_t pid : all)
      if (pid > 0 && kill(pid, SIGTERM) == 0 && WaitExit(pid, 10000) < 0) kill(pid, SIGKILL);
    std::cout << "--- dispatcher log\n" << ReadFile(dispatcher_log_) << "--- worker log\n" << ReadFile(worker_log_);
  }

  void StartDispatcher() {
    dispatcher_ = Spawn({BinDir() + "/gt-dispatcher", "--listen", endpoint_, "--metrics", "", "--manifest",
                         dispatcher_manifest_},
                        dispatcher_log_);
    ASSERT_GT(dispatcher_, 0);
  }
  void KillDispatcher() {
    ASSERT_EQ(kill(dispatcher_, SIGKILL), 0);
    ASSERT_GE(WaitExit(dispatcher_, 10000), 0);
    dispatcher_ = -1;
  }
  // Starts a worker (the first is worker 0); every worker logs to one file.
  void StartWorker(const std::string& grace_seconds, const std::string& after_grace = "exit",
                   const std::string& id = "worker-0") {
    const pid_t pid = Spawn({BinDir() + "/gt-worker", "--connect", endpoint_, "--id", id, "--metrics", "",
                             "--manifest", worker_manifest_, "--reconnect-grace", grace_seconds, "--after-grace",
                             after_grace},
                            worker_log_);
    ASSERT_GT(pid, 0);
    workers_.push_back(pid);
  }
  // SIGSTOP / SIGCONT to worker `w`.
  void SignalWorker(size_t w, int signal) { ASSERT_EQ(kill(workers_.at(w), signal), 0); }
  // The first worker's exit status within `timeout_ms`, -1 while it runs.
  int WorkerExit(int timeout_ms) {
    const int status = WaitExit(workers_.at(0), timeout_ms);
    if (status >= 0) workers_[0] = -1;
    return status;
  }
  bool WorkerAlive() const { return workers_.at(0) > 0 && kill(workers_[0], 0) == 0; }
  const std::string& endpoint() const { return endpoint_; }
  std::string worker_log() const { return ReadFile(worker_log_); }
  std::string dispatcher_log() const { return ReadFile(dispatcher_log_); }
  // Waits up to `timeout_ms` for `text` in the dispatcher's log.
  bool DispatcherLogs(const std::string& text, int timeout_ms) const {
    for (int waited = 0; waited < timeout_ms; waited += 50) {
      if (dispatcher_log().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  std::string endpoint_, dispatcher_log_, worker_log_, dispatcher_manifest_, worker_manifest_;
  pid_t dispatcher_ = -1;
  std::vector<pid_t> workers_;
};

Instruction Binary(Op op, uint64_t seq, TensorId result, TensorId a, TensorId b) {
  return MakeInstruction(op, seq, {result}, {a, b});
}

// RESUME for `token`: the last answered sync covered seqs up to
// `answered_seq`; `live` are (id, seq that made it).
void SendResume(RawClient& client, uint64_t token, uint64_t answered_seq,
                const std::vector<std::pair<TensorId, uint64_t>>& live) {
  wire::Envelope resume;
  resume.set_kind(wire::Envelope::RESUME);
  resume.set_token(token);
  resume.set_seq(answered_seq);
  for (auto [id, seq] : live) {
    wire::ResumeTensor* t = resume.add_live();
    t->set_id(id);
    t->set_seq(seq);
    t->add_shape(3);
  }
  client.SendFrames({resume.SerializeAsString()});
}

// The first RESUMED or ERROR within `timeout_ms`.
std::optional<wire::Envelope> ResumeAnswer(RawClient& client, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    std::optional<wire::Envelope> env = client.Receive(100);
    if (env && (env->kind() == wire::Envelope::RESUMED || env->kind() == wire::Envelope::ERROR)) return env;
  }
  return std::nullopt;
}

std::string Why(const std::optional<wire::Envelope>& answer) {
  if (!answer) return "no answer";
  return answer->errors_size() ? answer->errors(0).message() : wire::Envelope::Kind_Name(answer->kind());
}

// A client's first steps: x = [1, 2, 3] (seq 1), y = x + x (seq 2),
// fetched (seq 3, a sync point); then z = y * y (seq 4) sent, not synced.
void FirstSteps(RawClient& client) {
  client.Send({FromFloats(1, {1, 2, 3}), Binary(Op::kAdd, 2, 2, 1, 1)});
  ASSERT_EQ(FetchFloats(client, 2, 3), (std::vector<float>{2, 4, 6}));
  client.Send({Binary(Op::kMul, 4, 3, 2, 2)});
}
// The tensors FirstSteps leaves live, as a RESUME names them: (id, seq).
const std::vector<std::pair<TensorId, uint64_t>> kFirstLive = {{1, 1}, {2, 2}, {3, 4}};

// The steps every test repeats: a dispatcher, worker 0, a client's first
// steps; killing and restarting the dispatcher; a RESUME on a new
// connection and its answer.
class DispatcherRestartTest : public ::testing::Test {
 protected:
  void StartWithClient(const std::string& grace = "30", const std::string& after_grace = "exit") {
    cluster_->StartDispatcher();
    cluster_->StartWorker(grace, after_grace);
    client_.emplace(context_, cluster_->endpoint());
    FirstSteps(*client_);
  }
  void Restart() {
    cluster_->KillDispatcher();
    cluster_->StartDispatcher();
  }
  // Sends RESUME (the first client's token unless `token`) on a new
  // connection, which `Resume` returns with the answer (nullopt: none in 20 s).
  struct Resumed {
    std::unique_ptr<RawClient> connection;
    std::optional<wire::Envelope> answer;
    bool ok() const { return answer && answer->kind() == wire::Envelope::RESUMED; }
  };
  Resumed Resume(uint64_t answered_seq, const std::vector<std::pair<TensorId, uint64_t>>& live, uint64_t token = 0) {
    Resumed r{std::make_unique<RawClient>(context_, cluster_->endpoint(), /*hello=*/false), std::nullopt};
    SendResume(*r.connection, token ? token : client_->token(), answered_seq, live);
    r.answer = ResumeAnswer(*r.connection, 20000);
    return r;
  }

  // Destroyed in reverse: the client, its context, then the processes.
  std::unique_ptr<RestartCluster> cluster_ = std::make_unique<RestartCluster>();
  zmq::context_t context_{1};
  std::optional<RawClient> client_;
};

TEST_F(DispatcherRestartTest, AClientAndAWorkerRideThroughASigkilledDispatcher) {
  StartWithClient();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // z reaches the worker
  Restart();
  Resumed resumed = Resume(3, kFirstLive);
  ASSERT_TRUE(resumed.ok()) << Why(resumed.answer);
  EXPECT_GE(resumed.answer->seq(), 4u);  // the worker had received z's instruction
  EXPECT_TRUE(cluster_->WorkerAlive());

  // The replay of z (seq 4) ran already: dropped, not refused as a second z.
  resumed.connection->SendToken(wire::Envelope::HEARTBEAT, client_->token());
  resumed.connection->Send({Binary(Op::kMul, 4, 3, 2, 2), Binary(Op::kAdd, 5, 4, 3, 1)});
  wire::Envelope done;
  EXPECT_EQ(FetchFloats(*resumed.connection, 4, 6, &done), (std::vector<float>{5, 18, 39}));  // z + x = y*y + x
  EXPECT_EQ(done.errors_size(), 0) << done.errors(0).message();
  EXPECT_EQ(FetchFloats(*resumed.connection, 3, 7), (std::vector<float>{4, 16, 36}));
}

TEST_F(DispatcherRestartTest, RefusesAResumeOfASessionNoWorkerHolds) {
  StartWithClient();
  Restart();
  Resumed stranger = Resume(3, {{1, 1}}, client_->token() ^ 0x5a5a);
  ASSERT_TRUE(stranger.answer.has_value());
  ASSERT_EQ(stranger.answer->kind(), wire::Envelope::ERROR);
  EXPECT_NE(Why(stranger.answer).find("unknown or expired session"), std::string::npos) << Why(stranger.answer);
  // The real session is still there for its own client.
  Resumed owner = Resume(3, {{1, 1}, {2, 2}});
  EXPECT_TRUE(owner.ok()) << Why(owner.answer);
}

TEST_F(DispatcherRestartTest, AResumeOnANewConnectionToTheSameDispatcherMovesTheSession) {
  StartWithClient();
  Resumed moved = Resume(3, kFirstLive);
  ASSERT_TRUE(moved.ok()) << Why(moved.answer);
  EXPECT_EQ(moved.answer->seq(), 4u);
  moved.connection->Send({Binary(Op::kMul, 4, 3, 2, 2)});  // replayed: dropped
  wire::Envelope done;
  EXPECT_EQ(FetchFloats(*moved.connection, 3, 5, &done), (std::vector<float>{4, 16, 36}));
  EXPECT_EQ(done.errors_size(), 0) << done.errors(0).message();
}

TEST_F(DispatcherRestartTest, AWorkerFreesEverythingAndExitsWhenTheGraceRunsOut) {
  StartWithClient("1");
  cluster_->KillDispatcher();
  EXPECT_EQ(cluster_->WorkerExit(15000), 1);
  EXPECT_NE(cluster_->worker_log().find("no dispatcher took this worker back within 1000 ms"), std::string::npos)
      << cluster_->worker_log();
  EXPECT_NE(cluster_->worker_log().find("freed the tensors of 1 client sessions"), std::string::npos);
}

TEST_F(DispatcherRestartTest, AWorkerToldToWaitStaysEmptyAfterTheGrace) {
  StartWithClient("1", "wait");
  cluster_->KillDispatcher();
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_TRUE(cluster_->WorkerAlive());
  cluster_->StartDispatcher();
  // Its session was freed: nothing to resume.
  Resumed late = Resume(3, {{1, 1}, {2, 2}});
  ASSERT_TRUE(late.answer.has_value());
  EXPECT_EQ(late.answer->kind(), wire::Envelope::ERROR);
  // And the worker serves new clients.
  RawClient fresh(context_, cluster_->endpoint());
  fresh.Send({FromFloats(1, {3, 2, 1}), Binary(Op::kAdd, 2, 2, 1, 1)});
  EXPECT_EQ(FetchFloats(fresh, 2, 3), (std::vector<float>{6, 4, 2}));
}
// A REGISTER that claims to rejoin, as a hostile or confused peer would send it.
wire::Envelope Rejoin(uint32_t index, uint64_t token) {
  wire::Envelope reg;
  reg.set_kind(wire::Envelope::REGISTER);
  reg.set_name("impostor");
  reg.set_token(token);
  reg.set_rejoining(true);
  reg.set_worker_index(index);
  return reg;
}

// Sends `reg` on a new connection; the first answer within 10 s.
std::optional<wire::Envelope> Registered(std::unique_ptr<RawClient>& peer, zmq::context_t& context,
                                         const std::string& endpoint, const wire::Envelope& reg) {
  peer = std::make_unique<RawClient>(context, endpoint, /*hello=*/false);
  peer->SendFrames({reg.SerializeAsString()});
  return peer->Receive(10000);
}

TEST_F(DispatcherRestartTest, RefusesASecondClaimOfAnIndexMovesOneAFreshWorkerHoldsAndFreesAMalformedInventory) {
  StartWithClient();  // worker #0 registered afresh and holds client 1's tensors
  // A rejoining REGISTER under #0 with another token: #0 was taken by a
  // fresh registration, not claimed, so this is no second identity: the
  // peer gets a new index, and its inventory naming client 1 (open here)
  // is freed on it, not on the real worker.
  std::unique_ptr<RawClient> moved;
  wire::Envelope reg = Rejoin(0, 0x76);
  reg.add_inventory()->mutable_session()->set_client(1);
  std::optional<wire::Envelope> answer = Registered(moved, context_, cluster_->endpoint(), reg);
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->kind(), wire::Envelope::WELCOME) << Why(answer);
  EXPECT_EQ(answer->worker_index(), 1u);
  EXPECT_TRUE(cluster_->DispatcherLogs("which worker 'worker-0' took first: it gets index #1", 5000))
      << cluster_->dispatcher_log();

  // A malformed inventory (dtype 99): welcomed as #5, the session freed on it.
  std::unique_ptr<RawClient> odd;
  reg = Rejoin(5, 0x78);
  wire::SessionInventory* inv = reg.add_inventory();
  inv->mutable_session()->set_client(42);
  wire::HeldTensor* t = inv->add_tensors();
  t->set_id(1);
  t->set_dtype(99);
  answer = Registered(odd, context_, cluster_->endpoint(), reg);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->kind(), wire::Envelope::WELCOME);  // a worker, yet its inventory is not trusted
  EXPECT_EQ(answer->worker_index(), 5u);
  std::optional<wire::Envelope> drop = odd->Receive(10000);
  ASSERT_TRUE(drop.has_value());
  ASSERT_EQ(drop->kind(), wire::Envelope::BATCH);
  ASSERT_EQ(drop->instructions_size(), 1);
  EXPECT_EQ(drop->instructions(0).op(), static_cast<uint32_t>(Op::kDropClient));
  EXPECT_EQ(drop->instructions(0).client(), 42u);
  EXPECT_NE(cluster_->dispatcher_log().find("has dtype 99"), std::string::npos) << cluster_->dispatcher_log();

  // #5 was claimed by a rejoining worker: a second claim is two workers, one identity.
  std::unique_ptr<RawClient> impostor;
  answer = Registered(impostor, context_, cluster_->endpoint(), Rejoin(5, 0x77));
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->kind(), wire::Envelope::ERROR);
  EXPECT_NE(Why(answer).find("two workers, one identity"), std::string::npos) << Why(answer);
  // The real client is unaffected.
  EXPECT_EQ(FetchFloats(*client_, 2, 5), (std::vector<float>{2, 4, 6}));
}

TEST_F(DispatcherRestartTest, ARejoiningWorkerWhoseIndexAFreshWorkerTookFirstGetsANewOneWithItsTensors) {
  StartWithClient();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // z reaches the worker
  cluster_->SignalWorker(0, SIGSTOP);  // it cannot rejoin before the fresh worker registers
  setenv("GT_DEBUG_DISPATCHER", "1", 1);  // the registration's log line
  Restart();
  unsetenv("GT_DEBUG_DISPATCHER");
  cluster_->StartWorker("30", "exit", "worker-fresh");
  ASSERT_TRUE(cluster_->DispatcherLogs("worker worker-fresh registered as #0", 20000)) << cluster_->dispatcher_log();
  cluster_->SignalWorker(0, SIGCONT);
  Resumed resumed = Resume(3, kFirstLive);
  ASSERT_TRUE(resumed.ok()) << Why(resumed.answer);
  EXPECT_TRUE(cluster_->DispatcherLogs("which worker 'worker-fresh' took first: it gets index #1", 5000))
      << cluster_->dispatcher_log();
  resumed.connection->SendToken(wire::Envelope::HEARTBEAT, client_->token());
  resumed.connection->Send({Binary(Op::kMul, 4, 3, 2, 2), Binary(Op::kAdd, 5, 4, 3, 1)});
  wire::Envelope done;
  EXPECT_EQ(FetchFloats(*resumed.connection, 4, 6, &done), (std::vector<float>{5, 18, 39}));
  EXPECT_EQ(done.errors_size(), 0) << done.errors(0).message();
}

TEST_F(DispatcherRestartTest, ASyncInFlightAtTheKillGetsItsRealAnswerAfterAQueueLongerThanTheResumeWait) {
  // A RESUME waits 300 ms for workers that are not back; the worker's queue
  // (kChain matmuls of a 256 x 256 matrix, a few seconds) runs far longer.
  cluster_ = std::make_unique<RestartCluster>(300);
  setenv("GT_DEBUG_DISPATCHER", "1", 1);  // the completing inventory's log line (both dispatchers)
  StartWithClient();
  // A = 1/256 everywhere: A @ A = A exactly in float, in any summing order.
  // Each product frees the one before (memory stays flat): seqs 2k-1 + kA and 2k + kA.
  constexpr int kChain = 4000;
  constexpr TensorId kA = 10;
  std::vector<Instruction> batch = {FromFloats(kA, std::vector<float>(256 * 256, 1.0f / 256), {256, 256})};
  for (int k = 1; k <= kChain; ++k) {
    batch.push_back(Binary(Op::kMatmul, kA + 2 * k - 1, kA + k, kA + k - 1, kA));
    if (k > 1) batch.push_back(MakeInstruction(Op::kFree, kA + 2 * k, {}, {kA + k - 1}));
  }
  const uint64_t last_seq = kA + 2 * kChain - 1;
  const uint64_t fetch_seq = kA + 2 * kChain + 1;
  batch.push_back(MakeInstruction(Op::kFetch, fetch_seq, {}, {kA + kChain}));
  client_->Send(batch);  // the fetch is in flight: its DATA would go to the dispatcher killed below
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Restart();
  unsetenv("GT_DEBUG_DISPATCHER");
  std::vector<std::pair<TensorId, uint64_t>> live = kFirstLive;
  live.emplace_back(kA, kA);
  live.emplace_back(kA + kChain, last_seq);
  Resumed resumed = Resume(3, live);
  ASSERT_TRUE(resumed.ok()) << Why(resumed.answer);
  EXPECT_GE(resumed.answer->seq(), fetch_seq);
  EXPECT_NE(cluster_->dispatcher_log().find("completed the inventory of 1 client sessions"), std::string::npos)
      << "the worker was not busy when it rejoined:\n" << cluster_->dispatcher_log();
  // The replay: everything dropped (the worker ran it) but the fetch, which
  // the new dispatcher answers with the real product.
  resumed.connection->SendToken(wire::Envelope::HEARTBEAT, client_->token());
  resumed.connection->Send(batch);
  std::vector<std::pair<wire::Envelope, std::string>> data;
  std::optional<wire::Envelope> sync = resumed.connection->Sync(&data);
  ASSERT_TRUE(sync.has_value());
  EXPECT_EQ(sync->errors_size(), 0) << sync->errors(0).message();
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(data[0].first.seq(), fetch_seq);
  std::vector<float> product(data[0].second.size() / sizeof(float));
  std::memcpy(product.data(), data[0].second.data(), data[0].second.size());
  ASSERT_EQ(product.size(), 256u * 256u);
  EXPECT_EQ(std::count(product.begin(), product.end(), 1.0f / 256), 256 * 256);
}

}  // namespace
}  // namespace gt::testing
