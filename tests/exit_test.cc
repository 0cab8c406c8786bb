// A program that ends with work pending exits cleanly: status 0, nothing on
// stderr, no hang. Each case runs tests/exit_client.cc in a fresh process
// several times (the failures this guards against, a worker still inside
// LibTorch while exit() destroyed LibTorch's statics, crashed or hung most
// runs but not all), embedded and connected to separate host processes.
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

extern char** environ;

namespace gt::testing {
namespace {

constexpr int kRuns = 4;
constexpr auto kTimeout = std::chrono::seconds(90);  // generous: the machine may be loaded

struct Exit {
  bool timed_out = false;
  int status = -1;  // waitpid's
  std::string stderr_text;
};

Exit RunClient(const std::vector<std::string>& args) {
  const std::string err_path = TempPath("exit_client.err");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> argv_text = {BinDir() + "/exit_client"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  Exit out;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    out.stderr_text = "posix_spawn failed: " + std::to_string(rc);
    return out;
  }
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  while (waitpid(pid, &out.status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      out.timed_out = true;
      kill(pid, SIGKILL);
      waitpid(pid, &out.status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::ifstream err(err_path);
  std::stringstream text;
  text << err.rdbuf();
  out.stderr_text = text.str();
  return out;
}

void ExpectCleanExits(const std::vector<std::string>& args) {
  for (int run = 0; run < kRuns; ++run) {
    const Exit e = RunClient(args);
    SCOPED_TRACE("exit_client " + args[0] + (args.size() > 1 ? " " + args[1] : "") + ", run " + std::to_string(run));
    ASSERT_FALSE(e.timed_out) << "hung at exit; stderr:\n" << e.stderr_text;
    ASSERT_TRUE(WIFEXITED(e.status)) << "killed by signal " << (WIFSIGNALED(e.status) ? WTERMSIG(e.status) : 0)
                                     << "; stderr:\n" << e.stderr_text;
    EXPECT_EQ(WEXITSTATUS(e.status), 0) << e.stderr_text;
    EXPECT_EQ(e.stderr_text, "");
  }
}

const std::vector<std::string> kModes = {"rand", "linear", "backward", "busy", "static"};

TEST(ExitTest, EmbeddedDefaultExitsCleanlyWithWorkPending) {
  for (const std::string& mode : kModes) ExpectCleanExits({mode});
}

TEST(ExitTest, ConnectedClientExitsCleanlyWithWorkPending) {
  ClusterOptions options;
  options.workers = 2;
  ProcessCluster cluster(options);
  ASSERT_TRUE(cluster.WaitForWorkers(2));
  for (const std::string& mode : kModes) ExpectCleanExits({mode, cluster.endpoint()});
  // The cluster outlived its clients' exits, and still serves a new one.
  EXPECT_TRUE(cluster.AllAlive());
  ExpectCleanExits({"rand", cluster.endpoint()});
}

}  // namespace
}  // namespace gt::testing
