// Surviving a dispatcher restart with real processes: gt-dispatcher is
// SIGKILLed and started again on the same address while a gt-worker holds a
// client's tensors; the worker rejoins with its inventory, a raw client
// RESUMEs its session and replays, and the numbers come out as LibTorch's
// (the same ops, computed here by hand on small exact floats). Also: the
// refusals a RESUME can get, and the worker's grace period running out.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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

// One dispatcher and one worker on a fresh ipc:// address, each started
// (and the dispatcher started again) on demand.
class RestartCluster {
 public:
  RestartCluster() {
    const std::string name = TempPath("restart");
    endpoint_ = "ipc://" + name + ".sock";
    dispatcher_log_ = name + "-dispatcher.log";
    worker_log_ = name + "-worker.log";
    dispatcher_manifest_ = WriteTempFile("restart-dispatcher.yaml",
                                         "host: dispatcher\nresume_wait_ms: 10000\nstages:\n"
                                         "  - name: sharding\n    plugin: sharding\n");
    worker_manifest_ = WriteTempFile("restart-worker.yaml",
                                     "host: worker\nbackend:\n  plugin: torch\n  options: {intra_op_threads: 1}\n");
  }
  ~RestartCluster() {
    for (pid_t pid : {dispatcher_, worker_})
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
  void StartWorker(const std::string& grace_seconds, const std::string& after_grace = "exit") {
    worker_ = Spawn({BinDir() + "/gt-worker", "--connect", endpoint_, "--id", "worker-0", "--metrics", "", "--manifest",
                     worker_manifest_, "--reconnect-grace", grace_seconds, "--after-grace", after_grace},
                    worker_log_);
    ASSERT_GT(worker_, 0);
  }
  // The worker's exit status within `timeout_ms`, -1 while it runs.
  int WorkerExit(int timeout_ms) {
    const int status = WaitExit(worker_, timeout_ms);
    if (status >= 0) worker_ = -1;
    return status;
  }
  bool WorkerAlive() const { return worker_ > 0 && kill(worker_, 0) == 0; }
  const std::string& endpoint() const { return endpoint_; }
  std::string worker_log() const { return ReadFile(worker_log_); }
  std::string dispatcher_log() const { return ReadFile(dispatcher_log_); }

 private:
  std::string endpoint_, dispatcher_log_, worker_log_, dispatcher_manifest_, worker_manifest_;
  pid_t dispatcher_ = -1;
  pid_t worker_ = -1;
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

// A client's first steps: x = [1, 2, 3] (seq 1), y = x + x (seq 2),
// fetched (seq 3, a sync point); then z = y * y (seq 4) sent, not synced.
void FirstSteps(RawClient& client) {
  client.Send({FromFloats(1, {1, 2, 3}), Binary(Op::kAdd, 2, 2, 1, 1)});
  ASSERT_EQ(FetchFloats(client, 2, 3), (std::vector<float>{2, 4, 6}));
  client.Send({Binary(Op::kMul, 4, 3, 2, 2)});
}

TEST(DispatcherRestartTest, AClientAndAWorkerRideThroughASigkilledDispatcher) {
  RestartCluster cluster;
  cluster.StartDispatcher();
  cluster.StartWorker("30");
  zmq::context_t context(1);
  RawClient client(context, cluster.endpoint());
  FirstSteps(client);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // z reaches the worker
  cluster.KillDispatcher();
  cluster.StartDispatcher();

  RawClient resumed(context, cluster.endpoint(), /*hello=*/false);
  SendResume(resumed, client.token(), 3, {{1, 1}, {2, 2}, {3, 4}});
  std::optional<wire::Envelope> answer = ResumeAnswer(resumed, 20000);
  ASSERT_TRUE(answer.has_value()) << "no answer to RESUME";
  ASSERT_EQ(answer->kind(), wire::Envelope::RESUMED)
      << (answer->errors_size() ? answer->errors(0).message() : std::string("ERROR without errors"));
  EXPECT_GE(answer->seq(), 4u);  // the worker had received z's instruction
  EXPECT_TRUE(cluster.WorkerAlive());

  // The replay of z (seq 4) ran already: dropped, not refused as a second z.
  resumed.SendToken(wire::Envelope::HEARTBEAT, client.token());
  resumed.Send({Binary(Op::kMul, 4, 3, 2, 2), Binary(Op::kAdd, 5, 4, 3, 1)});
  wire::Envelope done;
  EXPECT_EQ(FetchFloats(resumed, 4, 6, &done), (std::vector<float>{5, 18, 39}));  // z + x = y*y + x
  EXPECT_EQ(done.errors_size(), 0) << done.errors(0).message();
  EXPECT_EQ(FetchFloats(resumed, 3, 7), (std::vector<float>{4, 16, 36}));
}

TEST(DispatcherRestartTest, RefusesAResumeOfASessionNoWorkerHolds) {
  RestartCluster cluster;
  cluster.StartDispatcher();
  cluster.StartWorker("30");
  zmq::context_t context(1);
  RawClient client(context, cluster.endpoint());
  FirstSteps(client);
  cluster.KillDispatcher();
  cluster.StartDispatcher();
  RawClient stranger(context, cluster.endpoint(), /*hello=*/false);
  SendResume(stranger, client.token() ^ 0x5a5a, 3, {{1, 1}});
  std::optional<wire::Envelope> answer = ResumeAnswer(stranger, 20000);
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->kind(), wire::Envelope::ERROR);
  ASSERT_GT(answer->errors_size(), 0);
  EXPECT_NE(answer->errors(0).message().find("unknown or expired session"), std::string::npos)
      << answer->errors(0).message();
  // The real session is still there for its own client.
  RawClient owner(context, cluster.endpoint(), /*hello=*/false);
  SendResume(owner, client.token(), 3, {{1, 1}, {2, 2}});
  answer = ResumeAnswer(owner, 20000);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->kind(), wire::Envelope::RESUMED);
}

TEST(DispatcherRestartTest, AResumeOnANewConnectionToTheSameDispatcherMovesTheSession) {
  RestartCluster cluster;
  cluster.StartDispatcher();
  cluster.StartWorker("30");
  zmq::context_t context(1);
  RawClient client(context, cluster.endpoint());
  FirstSteps(client);
  RawClient moved(context, cluster.endpoint(), /*hello=*/false);
  SendResume(moved, client.token(), 3, {{1, 1}, {2, 2}, {3, 4}});
  std::optional<wire::Envelope> answer = ResumeAnswer(moved, 20000);
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->kind(), wire::Envelope::RESUMED);
  EXPECT_EQ(answer->seq(), 4u);
  moved.Send({Binary(Op::kMul, 4, 3, 2, 2)});  // replayed: dropped
  wire::Envelope done;
  EXPECT_EQ(FetchFloats(moved, 3, 5, &done), (std::vector<float>{4, 16, 36}));
  EXPECT_EQ(done.errors_size(), 0) << done.errors(0).message();
}

TEST(DispatcherRestartTest, AWorkerFreesEverythingAndExitsWhenTheGraceRunsOut) {
  RestartCluster cluster;
  cluster.StartDispatcher();
  cluster.StartWorker("1");
  zmq::context_t context(1);
  RawClient client(context, cluster.endpoint());
  FirstSteps(client);
  cluster.KillDispatcher();
  EXPECT_EQ(cluster.WorkerExit(15000), 1);
  EXPECT_NE(cluster.worker_log().find("no dispatcher took this worker back within 1000 ms"), std::string::npos)
      << cluster.worker_log();
  EXPECT_NE(cluster.worker_log().find("freed the tensors of 1 client sessions"), std::string::npos);
}

TEST(DispatcherRestartTest, AWorkerToldToWaitStaysEmptyAfterTheGrace) {
  RestartCluster cluster;
  cluster.StartDispatcher();
  cluster.StartWorker("1", "wait");
  zmq::context_t context(1);
  RawClient client(context, cluster.endpoint());
  FirstSteps(client);
  cluster.KillDispatcher();
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_TRUE(cluster.WorkerAlive());
  cluster.StartDispatcher();
  // Its session was freed: nothing to resume.
  RawClient late(context, cluster.endpoint(), /*hello=*/false);
  SendResume(late, client.token(), 3, {{1, 1}, {2, 2}});
  std::optional<wire::Envelope> answer = ResumeAnswer(late, 20000);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->kind(), wire::Envelope::ERROR);
  // And the worker serves new clients.
  RawClient fresh(context, cluster.endpoint());
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

TEST(DispatcherRestartTest, RefusesASecondWorkerUnderALiveIndexAndFreesAMalformedInventory) {
  RestartCluster cluster;
  cluster.StartDispatcher();
  cluster.StartWorker("30");
  zmq::context_t context(1);
  RawClient client(context, cluster.endpoint());
  FirstSteps(client);  // worker #0 is registered and holds client 1's tensors

  RawClient impostor(context, cluster.endpoint(), /*hello=*/false);
  impostor.SendFrames({Rejoin(0, 0x77).SerializeAsString()});
  std::optional<wire::Envelope> answer = impostor.Receive(10000);
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->kind(), wire::Envelope::ERROR);
  EXPECT_NE(answer->errors(0).message().find("two workers, one identity"), std::string::npos)
      << answer->errors(0).message();

  RawClient odd(context, cluster.endpoint(), /*hello=*/false);
  wire::Envelope reg = Rejoin(5, 0x78);
  wire::SessionInventory* inv = reg.add_inventory();
  inv->mutable_session()->set_client(42);
  wire::HeldTensor* t = inv->add_tensors();
  t->set_id(1);
  t->set_dtype(99);
  odd.SendFrames({reg.SerializeAsString()});
  answer = odd.Receive(10000);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->kind(), wire::Envelope::WELCOME);  // a worker, yet its inventory is not trusted
  EXPECT_EQ(answer->worker_index(), 5u);
  std::optional<wire::Envelope> drop = odd.Receive(10000);
  ASSERT_TRUE(drop.has_value());
  ASSERT_EQ(drop->kind(), wire::Envelope::BATCH);
  ASSERT_EQ(drop->instructions_size(), 1);
  EXPECT_EQ(drop->instructions(0).op(), static_cast<uint32_t>(Op::kDropClient));
  EXPECT_EQ(drop->instructions(0).client(), 42u);
  EXPECT_NE(cluster.dispatcher_log().find("has dtype 99"), std::string::npos) << cluster.dispatcher_log();
  // The real client is unaffected.
  EXPECT_EQ(FetchFloats(client, 2, 5), (std::vector<float>{2, 4, 6}));
}

}  // namespace
}  // namespace gt::testing
