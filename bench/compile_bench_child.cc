// gt-bench-compile's child (compile_bench.h): one client program, its
// untimed warm-up, then timed chunks of steps as the parent asks, with the
// hosts' counters before the first chunk and after the last.
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

namespace compile_bench {
namespace {

using Clock = std::chrono::steady_clock;

// Untimed steps first. Long enough for the worker backend's unit trials (one
// warm-up plus unit_trial_runs = 3 timed runs of each of up to three
// strategies, and the fuser's compile on its first run) to end before timing.
constexpr int kMlpWarmup = 20;
constexpr int kChainWarmup = 15;

// Worker, dispatcher and client-stage counters, read through
// gt::worker_stats() (a STATS request: the hosts' own metrics, and the
// client's stages' when it runs any) before and after the timed steps.
struct Counters {
  double worker_messages = 0, worker_instructions = 0, backend_seconds = 0, dispatcher_seconds = 0;
  double dispatcher_instructions = 0, client_seconds = 0;
  double units_defined = 0, units_chosen = 0;
};

Counters Read() {
  Counters c;
  for (const gt::HostStats& h : gt::worker_stats().hosts) {
    const bool worker = h.host == "worker", dispatcher = h.host == "dispatcher", client = h.host == "client";
    for (const gt::MetricSample& m : h.samples) {
      auto stage = m.labels.find("stage");
      const bool backend = stage != m.labels.end() && stage->second == "backend";
      if (worker && m.name == "gt_host_messages_received_total") c.worker_messages += m.value;
      if (worker && backend && m.name == "gt_stage_instructions_received_total") c.worker_instructions += m.value;
      if (worker && backend && m.name == "gt_stage_processing_seconds_sum") c.backend_seconds += m.value;
      if (dispatcher && m.name == "gt_stage_processing_seconds_sum") c.dispatcher_seconds += m.value;
      if (client && m.name == "gt_stage_processing_seconds_sum") c.client_seconds += m.value;
      if (worker && m.name == "gt_backend_units_chosen_total") c.units_chosen += m.value;
    }
    if (worker) c.units_defined += static_cast<double>(h.unit_cache_misses);
    if (dispatcher) c.dispatcher_instructions += static_cast<double>(h.instructions);
  }
  return c;
}

// Runs `warmup` steps, then more until every unit the workers defined
// settled on a strategy (the fuser compiles on a thread of its own, which can
// take seconds; at most 60 s), and prints "ready". Then, for every line "N"
// on stdin, runs N timed steps and prints seconds per step; at the end of
// stdin prints, per timed step, what the worker received and the hosts' times.
template <typename Step>
void Driven(int warmup, Step& step) {
  for (int i = 0; i < warmup; ++i) step();
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (Counters c = Read(); c.units_chosen < c.units_defined && Clock::now() < deadline; c = Read())
    for (int i = 0; i < 5; ++i) step();
  std::printf("ready\n");
  std::fflush(stdout);
  // Counters are read once before the first chunk and once after the last:
  // a STATS request between chunks would cut the next step's instructions
  // into two batches, and that step would run eagerly.
  const Counters before = Read();
  double timed_steps = 0;
  char line[64];
  while (std::fgets(line, sizeof line, stdin)) {
    const int n = std::atoi(line);
    if (n <= 0) break;
    const auto start = Clock::now();
    for (int i = 0; i < n; ++i) step();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    timed_steps += n;
    std::printf("%.9f\n", seconds / n);
    std::fflush(stdout);
  }
  const Counters after = Read();
  const double n = std::max(1.0, timed_steps);
  // The worker also received the second STATS request: not a step's.
  std::printf("%.4f %.4f %.9f %.9f %.4f %.9f\n", (after.worker_messages - before.worker_messages - 1) / n,
              (after.worker_instructions - before.worker_instructions) / n,
              (after.backend_seconds - before.backend_seconds) / n,
              (after.dispatcher_seconds - before.dispatcher_seconds) / n,
              (after.dispatcher_instructions - before.dispatcher_instructions) / n,
              (after.client_seconds - before.client_seconds) / n);
  std::fflush(stdout);
}

void MlpSteps(int warmup) {
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
  Driven(warmup, step);
}

void ChainSteps(int warmup) {
  gt::Tensor a = gt::rand({1 << 20}, gt::DType::kFloat32, 5), b = gt::rand({1 << 20}, gt::DType::kFloat32, 6);
  auto step = [&] {
    gt::Tensor c = a * 1.5 + b;
    for (int k = 0; k < 7; ++k) c = (c * 0.5 - a) * b + 0.25;
    volatile float sink = c.slice(0, 0, 1).to_vector<float>()[0];
    (void)sink;
  };
  Driven(warmup, step);
}

// The smallest sync point: one tiny op and its fetch. Its time is the round
// trip client -> dispatcher -> worker -> dispatcher -> client that every
// step with a sync pays, whatever the stages.
void SyncSteps(int warmup) {
  gt::Tensor a = gt::ones({1}, gt::DType::kFloat32);
  auto step = [&] {
    volatile double sink = (a + 1.0).item();
    (void)sink;
  };
  Driven(warmup, step);
}

}  // namespace

int Child(const std::string& endpoint, const std::string& program) {
  if (endpoint == "embedded") {
    gt::workers(1);  // the embedded default; GT_COMPILE (set by the parent) picks its stages
  } else {
    gt::connect(endpoint);
  }
  if (program == "mlp") {
    MlpSteps(kMlpWarmup);
  } else if (program == "sync") {
    SyncSteps(kMlpWarmup);
  } else {
    ChainSteps(kChainWarmup);
  }
  gt::shutdown();
  return 0;
}

}  // namespace compile_bench
