// Dispatcher capacity: routed instructions per second and sync latency
// through ONE gt-dispatcher, with null workers (plugins/null: they execute
// nothing), so that the dispatcher is what is measured.
//
// For every worker count a fresh process cluster starts (a gt-dispatcher
// with only its router unless --stages, and W gt-worker processes with the
// null backend, over the dispatcher's ipc socket). For every client count C,
// C client threads of this process each open their own session (own
// DEALER, HELLO: the dispatcher sees C clients) and run a closed loop of
// batched streams, as gt's client sends them:
//
//   once:  zeros %1 [64, 64]
//   loop:  `sync_every` BATCH messages of `batch` instructions each
//          (add %2 <- %1, %1; free %2; add ...: half adds, half frees),
//          then one BATCH with a sync, waited for (its round trip is the
//          sync latency), and a heartbeat.
//
// The batches are encoded once; a client thread only hands bytes to
// ZeroMQ, so that it costs as little as possible next to the dispatcher.
// After a warm-up, for `seconds`:
//   routed/s   instructions the router took (the dispatcher's own counter,
//              gt_stage_instructions_received_total{stage="router"}),
//              per second of wall time
//   sync p50/p99 of the syncs answered in the window
//   CPU        seconds of CPU the dispatcher, the workers and this process
//              (the clients) used in the window, per wall second: on a
//              small machine the clients and workers compete with the
//              dispatcher for the same cores
//   disp us/instr  the dispatcher's CPU per routed instruction: what one
//              dedicated core would sustain is 1e6 / that
//
//   gt-bench-capacity [--clients 1,4,16,64,256] [--workers 1,2,4,8,16,32]
//                     [--seconds 3] [--warmup 1] [--batch 256] [--sync-every 4]
//                     [--csv FILE] [--stages sharding,...]
//
// --stages puts those stages (plugins of the same names) in front of the
// router, e.g. `sharding`, which the default dispatcher manifest runs.
//
// The dispatcher's pid is printed when its cluster starts (for perf).
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "cluster.h"
#include "gt/op_attrs.h"
#include "ir/codec.h"
#include "net/curve_keys.h"
#include "net/default_keys.h"
#include "net/transport.h"

namespace gt::bench {
namespace {

using Clock = std::chrono::steady_clock;
using testing::ClusterOptions;
using testing::HttpGet;
using testing::MetricValue;
using testing::ProcessCluster;
using testing::WriteTempFile;

struct Settings {
  std::vector<int> clients = {1, 4, 16, 64, 256};
  std::vector<int> workers = {1, 2, 4, 8, 16, 32};
  double seconds = 3;
  double warmup = 1;
  int batch = 256;
  int sync_every = 4;
  std::string csv;
  std::vector<std::string> stages;  // the dispatcher's stages (plugins of the same name); none: the router alone
};

std::vector<int> ParseList(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

Settings ParseSettings(int argc, char** argv) {
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--clients") s.clients = ParseList(value);
    else if (flag == "--workers") s.workers = ParseList(value);
    else if (flag == "--seconds") s.seconds = std::stod(value);
    else if (flag == "--warmup") s.warmup = std::stod(value);
    else if (flag == "--batch") s.batch = std::stoi(value);
    else if (flag == "--sync-every") s.sync_every = std::stoi(value);
    else if (flag == "--csv") s.csv = value;
    else if (flag == "--stages") {
      std::stringstream in(value);
      for (std::string stage; std::getline(in, stage, ',');) s.stages.push_back(stage);
    }
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  return s;
}

// ---- process CPU time, from /proc -----------------------------------------

double ClockTicks() { return static_cast<double>(sysconf(_SC_CLK_TCK)); }

// utime + stime of `pid` in seconds; 0 if it is gone.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string skip;
  for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt
  double utime = 0, stime = 0;
  fields >> utime >> stime;
  return (utime + stime) / ClockTicks();
}

// This process's children named `comm` (gt-dispatcher, gt-worker).
std::vector<pid_t> ChildrenNamed(const std::string& comm) {
  std::vector<pid_t> out;
  DIR* dir = opendir("/proc");
  if (!dir) return out;
  while (dirent* entry = readdir(dir)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    const size_t open = text.find('('), close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    std::string state;
    pid_t parent = 0;
    rest >> state >> parent;
    if (parent == getpid() && text.substr(open + 1, close - open - 1) == comm) out.push_back(pid);
  }
  closedir(dir);
  return out;
}

double SumCpu(const std::vector<pid_t>& pids) {
  double total = 0;
  for (pid_t p : pids) total += CpuSeconds(p);
  return total;
}

// ---- one client session ------------------------------------------------------

// The messages one client sends, encoded once.
struct Stream {
  std::string setup;  // zeros %1
  std::string batch;  // add/free pairs
  std::string sync;   // the sync that ends a round
  uint64_t sync_id = 0;
};

std::string Encode(const std::vector<Instruction>& instructions) {
  wire::Envelope env;
  env.set_kind(wire::Envelope::BATCH);
  std::vector<BlobPtr> payloads;
  for (const Instruction& inst : instructions) EncodeInstruction(inst, env.add_instructions(), &payloads);
  return env.SerializeAsString();
}

Stream MakeStream(int batch) {
  Stream s;
  Instruction zeros = testing::MakeInstruction(Op::kZeros, 1, {1}, {});
  zeros.attrs.shape = {64, 64};
  s.setup = Encode({zeros});
  std::vector<Instruction> pairs;
  for (int i = 0; i < batch / 2; ++i) {
    // The same result id each time: freed before it is made again.
    pairs.push_back(testing::MakeInstruction(Op::kAdd, 2 + 2 * i, {2}, {1, 1}));
    pairs.push_back(MakeFree(0, 3 + 2 * i, {2}));
  }
  s.batch = Encode(pairs);
  s.sync_id = 7;
  s.sync = Encode({MakeSync(0, 1u << 30, s.sync_id)});
  return s;
}

std::string TokenEnvelope(wire::Envelope::Kind kind, uint64_t token) {
  wire::Envelope env;
  env.set_kind(kind);
  env.set_token(token);
  return env.SerializeAsString();
}

enum Phase : int { kWarmup, kMeasure, kStop };

struct ClientOutcome {
  std::vector<double> sync_seconds;  // answered in the measured window
  std::string error;                 // empty: fine
};

// Waits for SYNC_DONE of `sync_id`; false on timeout or an error it reports.
bool AwaitSync(zmq::socket_t& socket, uint64_t sync_id, std::string& error) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
    auto frames = ReceiveFrames(socket, zmq::recv_flags::none);
    if (!frames) continue;
    Result<WireMessage> msg = DecodeFrames(std::move(*frames), false);
    if (!msg.ok()) continue;
    const wire::Envelope& env = msg->envelope;
    if (env.kind() == wire::Envelope::ERROR) {
      error = "dispatcher refused a message: " + env.DebugString();
      return false;
    }
    if (env.kind() != wire::Envelope::SYNC_DONE || env.sync_id() != sync_id) continue;
    if (env.errors_size() > 0) {
      error = "op error: " + env.errors(0).DebugString();
      return false;
    }
    return true;
  }
  error = "no SYNC_DONE within 60 s";
  return false;
}

void RunClient(zmq::context_t& context, const std::string& endpoint, const Stream& stream, int sync_every,
               const std::atomic<int>& phase, ClientOutcome& out) {
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  // The dispatcher runs on this user's key set, as a default one does: so
  // does each client (CURVE's cost is in every figure since keys by default).
  Result<CurveClientKeys> keys = ResolveConnectKeys({}, endpoint, false, "client");
  if (keys.ok() && keys->enabled()) (void)ApplyCurveClient(socket, *keys);
  socket.connect(endpoint);
  const uint64_t token = RandomToken();
  const std::string hello = TokenEnvelope(wire::Envelope::HELLO, token);
  const std::string heartbeat = TokenEnvelope(wire::Envelope::HEARTBEAT, token);
  socket.send(zmq::buffer(hello), zmq::send_flags::none);
  socket.send(zmq::buffer(stream.setup), zmq::send_flags::none);
  while (phase.load(std::memory_order_relaxed) != kStop) {
    socket.send(zmq::buffer(heartbeat), zmq::send_flags::none);
    for (int b = 0; b < sync_every; ++b) socket.send(zmq::buffer(stream.batch), zmq::send_flags::none);
    const bool measured = phase.load(std::memory_order_relaxed) == kMeasure;
    const auto start = Clock::now();
    socket.send(zmq::buffer(stream.sync), zmq::send_flags::none);
    if (!AwaitSync(socket, stream.sync_id, out.error)) return;
    if (measured && phase.load(std::memory_order_relaxed) == kMeasure)
      out.sync_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  wire::Envelope bye;
  bye.set_kind(wire::Envelope::BYE);
  socket.send(zmq::buffer(bye.SerializeAsString()), zmq::send_flags::none);
}

// ---- one point of the sweep -----------------------------------------------------

struct Point {
  int clients = 0;
  int workers = 0;
  double routed_per_second = 0;
  double sync_p50_ms = 0;
  double sync_p99_ms = 0;
  size_t syncs = 0;
  double dispatcher_cpu = 0;  // CPU seconds per wall second
  double workers_cpu = 0;
  double clients_cpu = 0;
  double dispatcher_us_per_instruction = 0;
  std::string error;
};

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

double RouterCount(int metrics_port) {
  return MetricValue(HttpGet(metrics_port, "/metrics"), "gt_stage_instructions_received_total", {{"stage", "router"}})
      .value_or(0);
}

double SelfCpuSeconds() { return CpuSeconds(getpid()); }

Point Measure(const ProcessCluster& cluster, const Settings& s, int clients, pid_t dispatcher,
              const std::vector<pid_t>& workers) {
  Point p;
  p.clients = clients;
  p.workers = static_cast<int>(workers.size());
  const Stream stream = MakeStream(s.batch);
  zmq::context_t context(2);
  std::atomic<int> phase{kWarmup};
  std::vector<ClientOutcome> outcomes(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back(RunClient, std::ref(context), cluster.endpoint(), std::cref(stream), s.sync_every,
                         std::cref(phase), std::ref(outcomes[static_cast<size_t>(c)]));
  std::this_thread::sleep_for(std::chrono::duration<double>(s.warmup));
  const double routed0 = RouterCount(cluster.dispatcher_metrics_port());
  const double d0 = CpuSeconds(dispatcher), w0 = SumCpu(workers), c0 = SelfCpuSeconds();
  const auto t0 = Clock::now();
  phase = kMeasure;
  std::this_thread::sleep_for(std::chrono::duration<double>(s.seconds));
  phase = kStop;
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double d1 = CpuSeconds(dispatcher), w1 = SumCpu(workers), c1 = SelfCpuSeconds();
  const double routed1 = RouterCount(cluster.dispatcher_metrics_port());
  for (std::thread& t : threads) t.join();
  std::vector<double> syncs;
  for (const ClientOutcome& o : outcomes) {
    syncs.insert(syncs.end(), o.sync_seconds.begin(), o.sync_seconds.end());
    if (!o.error.empty() && p.error.empty()) p.error = o.error;
  }
  const double routed = routed1 - routed0;
  p.routed_per_second = routed / wall;
  p.sync_p50_ms = Quantile(syncs, 0.50) * 1e3;
  p.sync_p99_ms = Quantile(syncs, 0.99) * 1e3;
  p.syncs = syncs.size();
  p.dispatcher_cpu = (d1 - d0) / wall;
  p.workers_cpu = (w1 - w0) / wall;
  p.clients_cpu = (c1 - c0) / wall;
  p.dispatcher_us_per_instruction = routed > 0 ? (d1 - d0) / routed * 1e6 : 0;
  return p;
}

void PrintHeader(FILE* out) {
  std::fprintf(out, "%7s %7s %12s %10s %10s %6s %9s %9s %9s %14s\n", "clients", "workers", "routed/s", "sync p50",
               "sync p99", "syncs", "disp CPU", "work CPU", "cli CPU", "disp us/instr");
}

void PrintPoint(FILE* out, const Point& p) {
  std::fprintf(out, "%7d %7d %12.0f %8.2fms %8.2fms %6zu %9.2f %9.2f %9.2f %14.3f%s%s\n", p.clients, p.workers,
               p.routed_per_second, p.sync_p50_ms, p.sync_p99_ms, p.syncs, p.dispatcher_cpu, p.workers_cpu,
               p.clients_cpu, p.dispatcher_us_per_instruction, p.error.empty() ? "" : "  ERROR: ", p.error.c_str());
  std::fflush(out);
}

void WriteCsv(const std::string& path, const std::vector<Point>& points) {
  std::ofstream out(path);
  out << "clients,workers,routed_per_second,sync_p50_ms,sync_p99_ms,syncs,dispatcher_cpu,workers_cpu,clients_cpu,"
         "dispatcher_us_per_instruction,error\n";
  for (const Point& p : points)
    out << p.clients << ',' << p.workers << ',' << p.routed_per_second << ',' << p.sync_p50_ms << ','
        << p.sync_p99_ms << ',' << p.syncs << ',' << p.dispatcher_cpu << ',' << p.workers_cpu << ','
        << p.clients_cpu << ',' << p.dispatcher_us_per_instruction << ",\"" << p.error << "\"\n";
}

ClusterOptions NullCluster(int workers, const std::vector<std::string>& stages) {
  ClusterOptions options;
  options.workers = workers;
  std::string manifest = "host: dispatcher\nstages:" + std::string(stages.empty() ? " []\n" : "\n");
  for (const std::string& stage : stages) manifest += "  - name: " + stage + "\n    plugin: " + stage + "\n";
  options.dispatcher_manifest = WriteTempFile("capacity-dispatcher.yaml", manifest);
  options.worker_manifest = WriteTempFile("capacity-worker.yaml", "host: worker\nbackend:\n  plugin: null_backend\n");
  return options;
}

}  // namespace
}  // namespace gt::bench

int main(int argc, char** argv) {
  using namespace gt::bench;
  const Settings s = ParseSettings(argc, argv);
  std::vector<Point> points;
  PrintHeader(stderr);
  for (int w : s.workers) {
    gt::testing::ProcessCluster cluster(NullCluster(w, s.stages));
    if (!cluster.WaitForWorkers(w, 60000)) {
      std::fprintf(stderr, "%d null workers did not all register; skipped\n", w);
      continue;
    }
    const std::vector<pid_t> dispatchers = ChildrenNamed("gt-dispatcher");
    const std::vector<pid_t> workers = ChildrenNamed("gt-worker");
    if (dispatchers.size() != 1) {
      std::fprintf(stderr, "expected one gt-dispatcher child, found %zu\n", dispatchers.size());
      return 1;
    }
    std::fprintf(stderr, "dispatcher pid %d, %zu workers\n", static_cast<int>(dispatchers[0]), workers.size());
    for (int c : s.clients) {
      points.push_back(Measure(cluster, s, c, dispatchers[0], workers));
      PrintPoint(stderr, points.back());
      if (!s.csv.empty()) WriteCsv(s.csv, points);
    }
  }
  return 0;
}
