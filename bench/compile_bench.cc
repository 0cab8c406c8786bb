// Hot-path + compile benchmark: the same client program against a cluster
// whose dispatcher runs the hotpath and compile stages and against a plain
// one, in the same run (real gt-dispatcher and gt-worker processes; each
// program runs in a child process, since a client connects once).
//
//   mlp step      a 64-128-10 MLP training step on a batch of 32 (forward,
//                 MSE, backward, SGD), one loss.item() per step
//   chain         an arithmetic-only elementwise chain (16 ops) on 1M floats,
//                 one fetch of one element per iteration
//
// Timing starts once every compiled unit settled on a strategy. Reported:
// time per step (median of rounds), the ratio, and per timed step the
// messages and instructions the worker received and the time inside the
// worker's backend and the dispatcher's stages (the hosts' own metrics, read
// through gt::worker_stats() by the child before and after its timed steps).
#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

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

namespace {

using Clock = std::chrono::steady_clock;

// Untimed steps first. Long enough for the worker backend's unit trials (one
// warm-up plus unit_trial_runs = 3 timed runs of each of up to three
// strategies, and the fuser's compile on its first run) to end before timing.
constexpr int kMlpWarmup = 20;
constexpr int kChainWarmup = 15;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ---- the child: runs a program and prints seconds per step -----------------

// Worker and dispatcher counters, read through gt::worker_stats() (a STATS
// request: the hosts' own metrics) before and after the timed steps.
struct Counters {
  double worker_messages = 0, worker_instructions = 0, backend_seconds = 0, dispatcher_seconds = 0;
  double units_defined = 0, units_chosen = 0;
};

Counters Read() {
  Counters c;
  for (const gt::HostStats& h : gt::worker_stats().hosts) {
    const bool worker = h.host == "worker";
    for (const gt::MetricSample& m : h.samples) {
      auto stage = m.labels.find("stage");
      const bool backend = stage != m.labels.end() && stage->second == "backend";
      if (worker && m.name == "gt_host_messages_received_total") c.worker_messages += m.value;
      if (worker && backend && m.name == "gt_stage_instructions_received_total") c.worker_instructions += m.value;
      if (worker && backend && m.name == "gt_stage_processing_seconds_sum") c.backend_seconds += m.value;
      if (!worker && m.name == "gt_stage_processing_seconds_sum") c.dispatcher_seconds += m.value;
      if (worker && m.name == "gt_backend_units_chosen_total") c.units_chosen += m.value;
    }
    if (worker) c.units_defined += static_cast<double>(h.unit_cache_misses);
  }
  return c;
}

// Runs `warmup` steps, then more until every unit the workers defined
// settled on a strategy (the fuser compiles on a thread of its own, which can
// take seconds; at most 60 s), then `steps` timed ones. Prints seconds per
// step and, per timed step, what the worker received and the hosts' times.
template <typename Step>
void Timed(int warmup, int steps, Step& step) {
  for (int i = 0; i < warmup; ++i) step();
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (Counters c = Read(); c.units_chosen < c.units_defined && Clock::now() < deadline; c = Read())
    for (int i = 0; i < 5; ++i) step();
  const Counters before = Read();
  const auto start = Clock::now();
  for (int i = 0; i < steps; ++i) step();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const Counters after = Read();
  const double n = steps;
  // The worker also received the second STATS request: not a step's.
  std::printf("%.9f %.4f %.4f %.9f %.9f\n", seconds / n, (after.worker_messages - before.worker_messages - 1) / n,
              (after.worker_instructions - before.worker_instructions) / n,
              (after.backend_seconds - before.backend_seconds) / n,
              (after.dispatcher_seconds - before.dispatcher_seconds) / n);
}

void MlpSteps(int warmup, int steps) {
  gt::nn::Linear fc1(64, 128, true, 1), fc2(128, 10, true, 2);
  std::vector<gt::Tensor> params = fc1.parameters();
  for (const gt::Tensor& p : fc2.parameters()) params.push_back(p);
  gt::nn::SGD sgd(params, 0.01);
  gt::Tensor x = gt::randn({32, 64}, gt::DType::kFloat32, 3), y = gt::randn({32, 10}, gt::DType::kFloat32, 4);
  auto step = [&] {
    gt::Tensor loss = gt::nn::mse_loss(fc2(fc1(x).relu()), y);
    loss.backward();
    sgd.step();
    sgd.zero_grad();
    volatile double sink = loss.item();
    (void)sink;
  };
  Timed(warmup, steps, step);
}

void ChainSteps(int warmup, int steps) {
  gt::Tensor a = gt::rand({1 << 20}, gt::DType::kFloat32, 5), b = gt::rand({1 << 20}, gt::DType::kFloat32, 6);
  auto step = [&] {
    gt::Tensor c = a * 1.5 + b;
    for (int k = 0; k < 7; ++k) c = (c * 0.5 - a) * b + 0.25;
    volatile float sink = c.slice(0, 0, 1).to_vector<float>()[0];
    (void)sink;
  };
  Timed(warmup, steps, step);
}

// The smallest sync point: one tiny op and its fetch. Its time is the round
// trip client -> dispatcher -> worker -> dispatcher -> client that every
// step with a sync pays, whatever the stages.
void SyncSteps(int warmup, int steps) {
  gt::Tensor a = gt::ones({1}, gt::DType::kFloat32);
  auto step = [&] {
    volatile double sink = (a + 1.0).item();
    (void)sink;
  };
  Timed(warmup, steps, step);
}

int Child(const std::string& endpoint, const std::string& program, int steps) {
  if (endpoint == "embedded") {
    gt::workers(1);  // the embedded default; GT_COMPILE (set by the parent) picks its stages
  } else {
    gt::connect(endpoint);
  }
  if (program == "mlp") {
    MlpSteps(kMlpWarmup, steps);
  } else if (program == "sync") {
    SyncSteps(kMlpWarmup, steps);
  } else {
    ChainSteps(kChainWarmup, steps);
  }
  gt::shutdown();
  return 0;
}

// ---- the floor: bare ZeroMQ over the same topology ---------------------------

// The broker of BareRoundTrip: relays client -> worker and back, until
// `parent` is gone or it is killed.
[[noreturn]] void RunBroker(const std::string& front, const std::string& back, pid_t parent) {
  zmq::context_t context;
  zmq::socket_t clients(context, zmq::socket_type::router), workers(context, zmq::socket_type::router);
  clients.bind(front);
  workers.bind(back);
  zmq::message_t worker_id, client_id, body;
  while (getppid() == parent) {
    zmq::pollitem_t items[] = {{clients.handle(), 0, ZMQ_POLLIN, 0}, {workers.handle(), 0, ZMQ_POLLIN, 0}};
    if (zmq::poll(items, 2, std::chrono::milliseconds(1000)) == 0) continue;
    if (items[1].revents & ZMQ_POLLIN) {  // the worker's hello, or a reply
      (void)workers.recv(worker_id);
      (void)workers.recv(body);
      if (client_id.size() == 0) continue;
      zmq::message_t to(client_id.data(), client_id.size());
      clients.send(to, zmq::send_flags::sndmore);
      clients.send(body, zmq::send_flags::none);
    }
    if (items[0].revents & ZMQ_POLLIN) {
      (void)clients.recv(client_id);
      (void)clients.recv(body);
      zmq::message_t to(worker_id.data(), worker_id.size());
      workers.send(to, zmq::send_flags::sndmore);
      workers.send(body, zmq::send_flags::none);
    }
  }
  _exit(0);
}

// The worker of BareRoundTrip: sends every message back.
[[noreturn]] void RunEcho(const std::string& back, pid_t parent) {
  zmq::context_t context;
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 1000);
  dealer.connect(back);
  dealer.send(zmq::str_buffer("hello"));
  while (getppid() == parent)
    if (zmq::message_t m; dealer.recv(m)) dealer.send(m, zmq::send_flags::none);
  _exit(0);
}

// Seconds per round trip of a 100-byte message client (DEALER) -> broker
// (ROUTER in front, ROUTER behind) -> worker (DEALER) and back, three
// processes over ipc:// as the benchmark's clusters are: what a gt sync
// point costs before gt does any work of its own; 0 when it could not be
// measured. Runs in a child process of its own (forks; no ZeroMQ context may
// exist before a fork).
double BareRoundTrip(int rounds) {
  const pid_t self = getpid();
  const std::string prefix = "ipc:///tmp/gt-bench-floor-" + std::to_string(self);
  const std::string front = prefix + "-front.sock", back = prefix + "-back.sock";
  const pid_t broker = fork();
  if (broker == 0) RunBroker(front, back, self);
  const pid_t worker = broker < 0 ? -1 : fork();
  if (worker == 0) RunEcho(back, self);
  double seconds = 0;
  if (worker > 0) {
    zmq::context_t context;
    zmq::socket_t dealer(context, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::rcvtimeo, 10000);
    dealer.connect(front);
    const std::string payload(100, 'x');
    auto round_trip = [&] {
      dealer.send(zmq::buffer(payload));
      zmq::message_t reply;
      return dealer.recv(reply).has_value();
    };
    bool ok = true;
    for (int i = 0; ok && i < 500; ++i) ok = round_trip();
    const auto start = Clock::now();
    for (int i = 0; ok && i < rounds; ++i) ok = round_trip();
    if (ok) seconds = std::chrono::duration<double>(Clock::now() - start).count() / rounds;
  }
  for (pid_t child : {broker, worker}) {
    if (child <= 0) continue;
    kill(child, SIGTERM);
    waitpid(child, nullptr, 0);
  }
  for (const std::string& endpoint : {front, back}) std::remove(endpoint.substr(6).c_str());  // past "ipc://"
  return seconds;
}

// ---- the parent --------------------------------------------------------------

struct Measure {
  double seconds = 0;
  double worker_messages = 0;      // per step
  double worker_instructions = 0;  // per step
  double backend_seconds = 0;      // per step: time inside the worker's backend
  double dispatcher_seconds = 0;   // per step: time inside the dispatcher's stages and router
  std::string strategies;          // the worker backend's units by chosen strategy
};

const char* kWorker = "host: worker\nheartbeat_interval_ms: 500\nbackend:\n  plugin: torch\n  options: {intra_op_threads: 1}\n";

std::string Dispatcher(bool compile) {
  std::string m = "host: dispatcher\nid: dispatcher\nheartbeat_interval_ms: 500\nheartbeat_timeout_ms: 5000\n";
  if (compile) m += "stages:\n  - name: hotpath\n    plugin: hotpath\n  - name: compile\n    plugin: compile\n";
  return m;
}

Measure RunOnce(const char* self, const std::string& program, bool compile, int steps) {
  gt::testing::ClusterOptions options;
  options.workers = 1;
  options.dispatcher_manifest = gt::testing::WriteTempFile("dispatcher.yaml", Dispatcher(compile));
  options.worker_manifest = gt::testing::WriteTempFile("worker.yaml", kWorker);
  gt::testing::ProcessCluster cluster(options);
  Measure m;
  if (!cluster.WaitForWorkers(1)) return m;
  int port = cluster.worker_metrics_ports()[0];
  std::string command = std::string(self) + " child " + cluster.endpoint() + " " + program + " " + std::to_string(steps);
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return m;
  char line[256] = {0};
  if (std::fgets(line, sizeof line, pipe))
    std::sscanf(line, "%lf %lf %lf %lf %lf", &m.seconds, &m.worker_messages, &m.worker_instructions,
                &m.backend_seconds, &m.dispatcher_seconds);
  pclose(pipe);
  const std::string worker_metrics = gt::testing::HttpGet(port, "/metrics");
  for (const char* strategy : {"interpreted", "graph", "fused"}) {
    const double units =
        gt::testing::MetricValue(worker_metrics, "gt_backend_units_chosen_total", {{"strategy", strategy}}).value_or(0);
    if (units > 0) m.strategies += std::string(m.strategies.empty() ? "" : ", ") + strategy + " " + std::to_string(static_cast<int>(units));
  }
  return m;
}

// The same program on the embedded default (dispatcher and worker on threads
// of the child, ZeroMQ inproc), with GT_COMPILE=1 or 0. Seconds per step.
double RunEmbedded(const char* self, const std::string& program, bool compile, int steps) {
  std::string command = std::string("GT_COMPILE=") + (compile ? "1 " : "0 ") + self + " child embedded " + program +
                        " " + std::to_string(steps);
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return 0;
  char line[256] = {0};
  double seconds = std::fgets(line, sizeof line, pipe) ? std::atof(line) : 0;
  pclose(pipe);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "child") return Child(argv[2], argv[3], std::atoi(argv[4]));
  if (argc == 2 && std::string(argv[1]) == "floor") {
    std::printf("%.9f\n", BareRoundTrip(5000));
    return 0;
  }
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  std::printf("gt compile benchmark: dispatcher with hotpath + compile stages vs without, 1 worker process "
              "(1 intra-op thread), median of %d rounds\n", rounds);
  std::printf("%-36s %12s %12s %8s %16s %16s\n", "benchmark", "plain", "compiled", "speedup", "worker msgs/step",
              "worker instr/step");
  struct Program {
    const char* name;
    const char* label;
    int steps;
  };
  for (Program p : {Program{"mlp", "MLP 64-128-10 training step (b=32)", 1000},
                    Program{"chain", "16-op elementwise chain on 1M floats", 30}}) {
    std::vector<double> plain, compiled;
    Measure last_plain, last_compiled;
    for (int r = 0; r < rounds; ++r) {
      last_plain = RunOnce(argv[0], p.name, false, p.steps);
      last_compiled = RunOnce(argv[0], p.name, true, p.steps);
      plain.push_back(last_plain.seconds);
      compiled.push_back(last_compiled.seconds);
    }
    double a = Median(plain), b = Median(compiled);
    std::printf("%-36s %9.3f ms %9.3f ms %7.2fx %7.2f -> %5.2f %7.1f -> %5.1f\n", p.label, a * 1e3, b * 1e3, a / b,
                last_plain.worker_messages, last_compiled.worker_messages, last_plain.worker_instructions,
                last_compiled.worker_instructions);
    std::printf("%-36s backend %.3f -> %.3f ms/step, dispatcher stages+router %.3f -> %.3f ms/step\n", "",
                last_plain.backend_seconds * 1e3, last_compiled.backend_seconds * 1e3,
                last_plain.dispatcher_seconds * 1e3, last_compiled.dispatcher_seconds * 1e3);
    std::string per_round;
    for (int r = 0; r < rounds; ++r) per_round += " " + std::to_string(plain[r] / compiled[r]).substr(0, 4) + "x";
    std::printf("%-36s speedup per round (plain and compiled run back to back):%s\n", "", per_round.c_str());
    std::printf("%-36s worker units by chosen strategy: %s\n", "",
                last_compiled.strategies.empty() ? "none" : last_compiled.strategies.c_str());
    std::vector<double> embedded_plain, embedded_compiled;
    for (int r = 0; r < rounds; ++r) {
      embedded_plain.push_back(RunEmbedded(argv[0], p.name, false, p.steps));
      embedded_compiled.push_back(RunEmbedded(argv[0], p.name, true, p.steps));
    }
    a = Median(embedded_plain);
    b = Median(embedded_compiled);
    per_round.clear();
    for (int r = 0; r < rounds; ++r)
      per_round += " " + std::to_string(embedded_plain[r] / embedded_compiled[r]).substr(0, 4) + "x";
    std::printf("%-36s embedded default (GT_COMPILE=0 vs 1, inproc): %.3f ms -> %.3f ms, %.2fx; per round:%s\n", "",
                a * 1e3, b * 1e3, a / b, per_round.c_str());
  }
  // The round trip every step with a sync point pays, plain or compiled.
  double floor = 0;
  if (FILE* pipe = popen((std::string(argv[0]) + " floor").c_str(), "r")) {
    char line[64] = {0};
    if (std::fgets(line, sizeof line, pipe)) floor = std::atof(line);
    pclose(pipe);
  }
  std::vector<double> syncs;
  for (int r = 0; r < rounds; ++r) syncs.push_back(RunOnce(argv[0], "sync", false, 2000).seconds);
  std::printf("round trip shared by both: bare ZeroMQ client->broker->worker->back (3 processes, ipc) %.3f ms; "
              "gt sync point (a + 1).item() %.3f ms\n", floor * 1e3, Median(syncs) * 1e3);
  return 0;
}
