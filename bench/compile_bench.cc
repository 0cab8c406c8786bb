// Hot-path + compile benchmark: the same client program with the hotpath and
// compile stages and without them, in the same run: stages in the dispatcher
// (real gt-dispatcher and gt-worker processes), stages in the client itself
// (GT_COMPILE=1, plain processes), and the embedded default with GT_COMPILE=0
// and 1. Each program runs in a child process, since a client connects once.
//
//   mlp step      a 64-128-10 MLP training step on a batch of 32 (forward,
//                 MSE, backward, SGD), one loss.item() per step
//   chain         an arithmetic-only elementwise chain (16 ops) on 1M floats,
//                 one fetch of one element per iteration
//
// Paired rounds: both children (plain and compiled, each with its cluster)
// start, warm up and wait until every compiled unit settled on a strategy;
// then they take turns, a chunk of steps each per round (who goes first
// alternates), and the speedup is the median of the rounds' ratios. Load on
// the machine that comes and goes (this VM's neighbours) then falls on both
// sides of a round alike instead of on whichever ran at that moment.
//
// Reported: time per step (median over rounds), the median ratio with its
// quartiles, and per timed step the messages and instructions the worker
// received and the time inside the worker's backend and the dispatcher's
// stages (the hosts' own metrics, read through gt::worker_stats() by each
// child before its first chunk and after its last).
//
//   build/bin/gt-bench-compile [rounds=40]
//   build/bin/gt-bench-compile floor [ipc|tcp] [sleep|spin]
//
// "floor" prints only the bare ZeroMQ round trip over the benchmark's three
// processes (seconds): over ipc or tcp loopback, each process asleep in
// zmq_poll between messages or spinning on non-blocking receives.
#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <memory>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "cluster.h"
#include "gt/gt.h"
#include "gt/nn.h"

#include "compile_bench.h"

namespace {

using Clock = std::chrono::steady_clock;

using namespace compile_bench;

// ---- the parent --------------------------------------------------------------

// A child process driven over its stdin and stdout (see Driven).
class DrivenChild {
 public:
  // Runs `self child <endpoint> <program>` with GT_COMPILE=`compile` and
  // waits for its "ready"; ok() is false when it did not get there.
  DrivenChild(const char* self, const std::string& endpoint, const std::string& program, bool compile) {
    // Close-on-exec: a child started later must not hold this one's stdin
    // open (it would never see the end of it).
    int to_child[2], from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0) return;
    if (pipe2(from_child, O_CLOEXEC) != 0) {
      close(to_child[0]);
      close(to_child[1]);
      return;
    }
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_child[0], STDIN_FILENO);
      dup2(from_child[1], STDOUT_FILENO);
      for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);
      setenv("GT_COMPILE", compile ? "1" : "0", 1);
      execl(self, self, "child", endpoint.c_str(), program.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    if (pid_ < 0) {
      close(to_child[1]);
      close(from_child[0]);
      return;
    }
    in_ = fdopen(to_child[1], "w");
    out_ = fdopen(from_child[0], "r");
    ready_ = in_ && out_ && ReadLine() == "ready";
  }
  ~DrivenChild() { (void)Finish(); }
  DrivenChild(const DrivenChild&) = delete;
  DrivenChild& operator=(const DrivenChild&) = delete;

  bool ok() const { return ready_; }
  // Seconds per step of `steps` more timed steps; 0 when the child failed.
  double Run(int steps) {
    if (!ready_) return 0;
    std::fprintf(in_, "%d\n", steps);
    std::fflush(in_);
    const double seconds = std::atof(ReadLine().c_str());
    if (seconds <= 0) ready_ = false;
    return seconds;
  }
  // Ends the child; its last line (per-step counters over all timed steps).
  std::string Finish() {
    if (pid_ <= 0) return "";
    std::string counters;
    if (in_) std::fclose(in_);
    if (out_) counters = ReadLine();
    if (out_) std::fclose(out_);
    in_ = out_ = nullptr;
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return counters;
  }

 private:
  std::string ReadLine() {
    char line[256] = {0};
    if (!out_ || !std::fgets(line, sizeof line, out_)) return "";
    std::string text(line);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return text;
  }

  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
  bool ready_ = false;
};

// Per-step figures of one side (plain or compiled) over all its chunks.
struct Side {
  std::vector<double> seconds;     // per step, one entry per round
  double worker_messages = 0;      // per step
  double worker_instructions = 0;  // per step
  double backend_seconds = 0;      // per step: time inside the worker's backend
  double dispatcher_seconds = 0;   // per step: time inside the dispatcher's stages and router
  double dispatcher_instructions = 0;  // per step: instructions that entered the dispatcher
  double client_seconds = 0;       // per step: time inside the client's own stages
  void ReadCounters(const std::string& line) {
    std::sscanf(line.c_str(), "%lf %lf %lf %lf %lf %lf", &worker_messages, &worker_instructions, &backend_seconds,
                &dispatcher_seconds, &dispatcher_instructions, &client_seconds);
  }
};

struct Paired {
  Side plain, compiled;
  bool ok = false;
  std::vector<double> Ratios() const {
    std::vector<double> r;
    for (size_t i = 0; i < plain.seconds.size() && i < compiled.seconds.size(); ++i)
      r.push_back(plain.seconds[i] / compiled.seconds[i]);
    return r;
  }
};

// `rounds` rounds of `chunk` steps on each side, taking turns.
Paired TakeTurns(DrivenChild& plain, DrivenChild& compiled, int rounds, int chunk) {
  Paired p;
  if (!plain.ok() || !compiled.ok()) return p;
  for (int r = 0; r < rounds; ++r) {
    const bool plain_first = r % 2 == 0;
    DrivenChild& first = plain_first ? plain : compiled;
    DrivenChild& second = plain_first ? compiled : plain;
    const double a = first.Run(chunk), b = second.Run(chunk);
    if (a <= 0 || b <= 0) return p;
    p.plain.seconds.push_back(plain_first ? a : b);
    p.compiled.seconds.push_back(plain_first ? b : a);
  }
  p.plain.ReadCounters(plain.Finish());
  p.compiled.ReadCounters(compiled.Finish());
  p.ok = true;
  return p;
}

const char* kWorker = "host: worker\nheartbeat_interval_ms: 500\nbackend:\n  plugin: torch\n  options: {intra_op_threads: 1}\n";

std::string Dispatcher(bool compile) {
  std::string m = "host: dispatcher\nid: dispatcher\nheartbeat_interval_ms: 500\nheartbeat_timeout_ms: 5000\n";
  if (compile) m += "stages:\n  - name: hotpath\n    plugin: hotpath\n  - name: compile\n    plugin: compile\n";
  return m;
}

std::unique_ptr<gt::testing::ProcessCluster> StartCluster(bool compile) {
  gt::testing::ClusterOptions options;
  options.workers = 1;
  options.dispatcher_manifest =
      gt::testing::WriteTempFile(compile ? "dispatcher-compiled.yaml" : "dispatcher-plain.yaml", Dispatcher(compile));
  options.worker_manifest = gt::testing::WriteTempFile("worker.yaml", kWorker);
  auto cluster = std::make_unique<gt::testing::ProcessCluster>(options);
  if (!cluster->WaitForWorkers(1)) return nullptr;
  return cluster;
}

// The worker backend's units by chosen strategy, from its /metrics.
std::string Strategies(const gt::testing::ProcessCluster& cluster) {
  const std::string metrics = gt::testing::HttpGet(cluster.worker_metrics_ports()[0], "/metrics");
  std::string out;
  for (const char* strategy : {"interpreted", "graph", "fused"}) {
    const double units = gt::testing::MetricValue(metrics, "gt_backend_units_chosen_total", {{"strategy", strategy}}).value_or(0);
    if (units > 0) out += std::string(out.empty() ? "" : ", ") + strategy + " " + std::to_string(static_cast<int>(units));
  }
  return out.empty() ? "none" : out;
}

// Where the compiled side runs the hotpath and compile stages.
enum class Where { kDispatcher, kClient };

// Paired rounds of `program` on two process clusters: a plain dispatcher and
// client against either a dispatcher with the stages (and a plain client) or
// a plain dispatcher and a client running the stages itself (GT_COMPILE=1).
Paired OnProcessClusters(const char* self, const std::string& program, int rounds, int chunk, Where where,
                         std::string* strategies) {
  const bool in_dispatcher = where == Where::kDispatcher;
  auto plain_cluster = StartCluster(false), compiled_cluster = StartCluster(in_dispatcher);
  if (!plain_cluster || !compiled_cluster) return {};
  DrivenChild plain(self, plain_cluster->endpoint(), program, false);
  DrivenChild compiled(self, compiled_cluster->endpoint(), program, !in_dispatcher);
  Paired p = TakeTurns(plain, compiled, rounds, chunk);
  *strategies = Strategies(*compiled_cluster);
  return p;
}

// Paired rounds of `program` on the embedded default (GT_COMPILE=0 and 1:
// each child runs a dispatcher and a worker on threads, ZeroMQ inproc; with
// 1 the client runs the stages, and its dispatcher too, for clients whose
// configs place tensors).
Paired OnEmbedded(const char* self, const std::string& program, int rounds, int chunk) {
  DrivenChild plain(self, "embedded", program, false);
  DrivenChild compiled(self, "embedded", program, true);
  return TakeTurns(plain, compiled, rounds, chunk);
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

std::string RatioSummary(const Paired& p) {
  const std::vector<double> r = p.Ratios();
  char text[160];
  std::snprintf(text, sizeof text, "%.3f ms -> %.3f ms, %.2fx (rounds: quartiles %.2fx-%.2fx, %zu rounds)",
                Median(p.plain.seconds) * 1e3, Median(p.compiled.seconds) * 1e3, Median(r), Quantile(r, 0.25),
                Quantile(r, 0.75), r.size());
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "child") return Child(argv[2], argv[3]);
  if (argc >= 2 && std::string(argv[1]) == "floor") {  // floor [ipc|tcp] [sleep|spin]
    const bool tcp = argc > 2 && std::string(argv[2]) == "tcp";
    const FloorWait wait = argc > 3 && std::string(argv[3]) == "spin" ? FloorWait::kSpin : FloorWait::kSleep;
    std::printf("%.9f\n", BareRoundTrip(5000, tcp, wait));
    return 0;
  }
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 40;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("gt compile benchmark: hotpath + compile stages vs none, 1 worker (1 intra-op thread); "
              "%d paired rounds, the two sides taking turns\n", rounds);
  struct Program {
    const char* name;
    const char* label;
    int chunk;  // steps per side per round
  };
  for (Program p : {Program{"mlp", "MLP 64-128-10 training step (b=32)", 100},
                    Program{"chain", "16-op elementwise chain on 1M floats", 4}}) {
    std::printf("%s, %d steps per side per round\n", p.label, p.chunk);
    for (Where where : {Where::kDispatcher, Where::kClient}) {
      std::string strategies;
      const Paired cluster = OnProcessClusters(argv[0], p.name, rounds, p.chunk, where, &strategies);
      const char* label = where == Where::kDispatcher ? "stages in the dispatcher" : "stages in the client (GT_COMPILE=1)";
      if (!cluster.ok) {
        std::printf("  process clusters, %s: FAILED (a child or cluster did not run)\n", label);
        continue;
      }
      std::printf("  process clusters (ipc), %s: %s\n", label, RatioSummary(cluster).c_str());
      std::printf("    per step: worker messages %.2f -> %.2f, instructions into the dispatcher %.1f -> %.1f, into the worker "
                  "%.1f -> %.1f; backend %.3f -> %.3f ms, dispatcher stages+router %.3f -> %.3f ms, client stages "
                  "%.3f ms\n",
                  cluster.plain.worker_messages, cluster.compiled.worker_messages, cluster.plain.dispatcher_instructions,
                  cluster.compiled.dispatcher_instructions, cluster.plain.worker_instructions,
                  cluster.compiled.worker_instructions, cluster.plain.backend_seconds * 1e3,
                  cluster.compiled.backend_seconds * 1e3, cluster.plain.dispatcher_seconds * 1e3,
                  cluster.compiled.dispatcher_seconds * 1e3, cluster.compiled.client_seconds * 1e3);
      std::printf("    worker units by chosen strategy: %s\n", strategies.c_str());
    }
    const Paired embedded = OnEmbedded(argv[0], p.name, rounds, p.chunk);
    if (!embedded.ok) {
      std::printf("  embedded default: FAILED (a child did not run)\n");
    } else {
      std::printf("  embedded default (inproc, GT_COMPILE=0 vs 1, stages in the client): %s\n",
                  RatioSummary(embedded).c_str());
    }
  }
  // The round trip every step with a sync point pays, plain or compiled.
  double floor = 0;
  if (FILE* pipe = popen((std::string(argv[0]) + " floor").c_str(), "r")) {
    char line[64] = {0};
    if (std::fgets(line, sizeof line, pipe)) floor = std::atof(line);
    pclose(pipe);
  }
  double sync = 0;
  if (auto cluster = StartCluster(false)) {
    DrivenChild child(argv[0], cluster->endpoint(), "sync", false);
    std::vector<double> chunks;
    for (int r = 0; r < 10 && child.ok(); ++r) chunks.push_back(child.Run(200));
    sync = Median(chunks);
  }
  std::printf("round trip shared by both: bare ZeroMQ client->broker->worker->back (3 processes, ipc) %.3f ms; "
              "gt sync point (a + 1).item() %.3f ms\n", floor * 1e3, sync * 1e3);
  return 0;
}
