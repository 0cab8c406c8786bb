// gt::worker_stats() through real gt-dispatcher and gt-worker processes: a
// dispatcher running hotpath (threshold 2) and compile, two workers, and an
// MLP training step repeated. The figures must add up across the stages,
// equal what each host's /metrics says, and a hung or killed worker must be
// named as missing within the timeout instead of stalling the call.
//
// One cluster serves the whole suite (a process connects once); the test
// that kills a worker is defined last.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "connected_cluster.h"
#include "gt/gt.h"
#include "gt/nn.h"

namespace gt::testing {
namespace {

constexpr int kSteps = 6;

// heartbeat_timeout_ms is long so that a paused or killed worker still
// counts as alive: the stats request must then time out on it (or find it
// unreachable), not skip it.
constexpr const char* kDispatcherManifest =
    "host: dispatcher\nid: dispatcher\nheartbeat_interval_ms: 200\nheartbeat_timeout_ms: 60000\n"
    "stages:\n"
    "  - name: hotpath\n    plugin: hotpath\n    options: {threshold: 2}\n"
    "  - name: compile\n    plugin: compile\n";
constexpr const char* kWorkerManifest = "host: worker\nheartbeat_interval_ms: 200\nbackend:\n  plugin: torch\n";

class StatsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.workers = 2;
    options.dispatcher_manifest = WriteTempFile("dispatcher.yaml", kDispatcherManifest);
    options.worker_manifest = WriteTempFile("worker.yaml", kWorkerManifest);
    ConnectedCluster::Start(options);
    if (ConnectedCluster::ready()) Train();
  }
  static void TearDownTestSuite() { ConnectedCluster::Stop(); }

  void SetUp() override {
    if (!ConnectedCluster::ready()) GTEST_SKIP() << ConnectedCluster::NotReady();
  }

  // kSteps identical training steps, each ending in a sync point with every
  // temporary freed before it, so that each step is one hotpath candidate
  // with the same signature.
  static void Train() {
    nn::Linear fc1(8, 16, true, 1), fc2(16, 2, true, 2);
    std::vector<Tensor> params = fc1.parameters();
    for (const Tensor& p : fc2.parameters()) params.push_back(p);
    nn::SGD sgd(params, 0.1);
    Tensor x = randn({4, 8}, DType::kFloat32, 3);
    Tensor y = randn({4, 2}, DType::kFloat32, 4);
    sync();  // the setup is not part of the first step's candidate
    for (int s = 0; s < kSteps; ++s) {
      {
        Tensor loss = nn::mse_loss(fc2.forward(fc1.forward(x).relu()), y);
        loss.backward();
        sgd.step();
        sgd.zero_grad();
      }
      sync();
    }
  }

  static const HostStats* Find(const WorkerStats& stats, const std::string& instance) {
    for (const HostStats& h : stats.hosts)
      if (h.instance == instance) return &h;
    return nullptr;
  }

  static double Sample(const HostStats& h, const std::string& name) {
    double total = 0;
    for (const MetricSample& s : h.samples)
      if (s.name == name) total += s.value;
    return total;
  }

  static int MetricsPort(const std::string& instance) {
    ProcessCluster& c = ConnectedCluster::cluster();
    if (instance == "dispatcher") return c.dispatcher_metrics_port();
    return c.worker_metrics_ports().at(std::stoul(instance.substr(instance.find('-') + 1)));
  }
};

TEST_F(StatsTest, EveryHostAnswersTheDispatcherFirst) {
  WorkerStats stats = worker_stats();
  EXPECT_TRUE(stats.missing.empty());
  ASSERT_EQ(stats.hosts.size(), 3u);
  EXPECT_EQ(stats.hosts[0].instance, "dispatcher");
  EXPECT_EQ(stats.hosts[0].host, "dispatcher");
  EXPECT_EQ(stats.hosts[0].stages, (std::vector<std::string>{"hotpath", "compile", "router"}));
  for (const char* w : {"worker-0", "worker-1"}) {
    const HostStats* h = Find(stats, w);
    ASSERT_NE(h, nullptr) << w;
    EXPECT_EQ(h->host, "worker");
    EXPECT_EQ(h->stages, (std::vector<std::string>{"backend"}));
  }
}

TEST_F(StatsTest, TheTrainingStepIsOneHotSequenceCompiledOnceAndReplayed) {
  WorkerStats stats = worker_stats();
  const HostStats* d = Find(stats, "dispatcher");
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->hot_sequences.size(), 1u) << "the steps should share one signature";
  const HotSequenceStats& step = d->hot_sequences[0];
  EXPECT_EQ(step.stage, "hotpath");
  EXPECT_EQ(step.id.size(), 16u);
  EXPECT_EQ(step.repetitions, kSteps);
  EXPECT_EQ(d->hot_sequences_found, 1u);
  // Threshold 2: the first occurrence runs eagerly, every later one is
  // marked, compiled (defined once, then replayed) and run as one unit.
  const uint64_t marked = kSteps - 1;
  EXPECT_EQ(Sample(*d, "gt_hotpath_marked_sequences_total"), marked);
  EXPECT_EQ(d->units_run, marked);
  EXPECT_EQ(d->cache_misses, 1u);
  EXPECT_EQ(d->cache_hits, d->units_run - d->cache_misses);
  // The compile stage's count of what it replaced agrees with the hotpath
  // stage's length of the sequence.
  EXPECT_GT(step.length, 10);
  EXPECT_EQ(d->compiled, marked * static_cast<uint64_t>(step.length));
}

TEST_F(StatsTest, CompiledAndEagerAccountForEveryInstructionOfTheCompileStage) {
  WorkerStats stats = worker_stats();
  const HostStats* d = Find(stats, "dispatcher");
  ASSERT_NE(d, nullptr);
  EXPECT_GT(d->instructions, 0u);
  EXPECT_GT(d->eager, 0u);
  double compile_received = 0;
  for (const MetricSample& s : d->samples)
    if (s.name == "gt_stage_instructions_received_total" && s.labels.at("stage") == "compile") compile_received = s.value;
  // The compile stage also received the hotpath's hot_start / hot_end pairs,
  // which it consumes.
  const double markers = 2 * Sample(*d, "gt_hotpath_marked_sequences_total");
  EXPECT_EQ(static_cast<double>(d->compiled + d->eager) + markers, compile_received);
}

TEST_F(StatsTest, TheWorkersRanTheUnitsTheDispatcherSent) {
  WorkerStats stats = worker_stats();
  const HostStats* d = Find(stats, "dispatcher");
  ASSERT_NE(d, nullptr);
  // The client's tensors all live on one worker (the first to register);
  // summed over the workers, the figures do not depend on which.
  uint64_t instructions = 0, runs = 0, misses = 0, hits = 0, unit_instructions = 0, stage_compiled = 0;
  double compile_seconds = 0;
  for (const HostStats& w : stats.hosts) {
    if (w.host != "worker") continue;
    EXPECT_EQ(w.instructions, w.terminal_instructions) << "a worker without stages: its backend is its first stage";
    EXPECT_EQ(w.unit_instructions.size(), 3u) << "interpreted, graph, fused, each from the start";
    instructions += w.instructions;
    runs += w.unit_runs;
    misses += w.unit_cache_misses;
    hits += w.unit_cache_hits;
    compile_seconds += w.compile_seconds;
    stage_compiled += w.compiled + w.eager;
    for (const auto& [strategy, n] : w.unit_instructions) unit_instructions += n;
  }
  EXPECT_GT(instructions, 0u);
  EXPECT_EQ(runs, d->units_run);
  EXPECT_EQ(misses, 1u) << "one define_unit reached a worker";
  EXPECT_EQ(hits, 0u);
  EXPECT_GT(compile_seconds, 0.0);
  EXPECT_EQ(unit_instructions, d->compiled) << "each unit body instruction ran once, by some strategy";
  EXPECT_EQ(stage_compiled, 0u) << "no compile stage runs on the workers";
}

TEST_F(StatsTest, EveryFigureEqualsTheHostsMetricsEndpoint) {
  WorkerStats stats = worker_stats();
  ASSERT_EQ(stats.hosts.size(), 3u);
  for (const HostStats& h : stats.hosts) {
    SCOPED_TRACE(h.instance);
    const std::string scrape = HttpGet(MetricsPort(h.instance), "/metrics");
    ASSERT_FALSE(scrape.empty());
    auto metric = [&](const std::string& name, const std::map<std::string, std::string>& labels = {}) {
      return MetricValue(scrape, name, labels).value_or(0);
    };
    EXPECT_EQ(h.instructions, metric("gt_stage_instructions_received_total", {{"stage", h.stages.front()}}));
    EXPECT_EQ(h.terminal_instructions, metric("gt_stage_instructions_received_total", {{"stage", h.stages.back()}}));
    EXPECT_EQ(h.compiled, metric("gt_compile_instructions_compiled_total"));
    EXPECT_EQ(h.eager, metric("gt_compile_instructions_eager_total"));
    EXPECT_EQ(h.units_run, metric("gt_compile_units_run_total"));
    EXPECT_EQ(h.cache_hits, metric("gt_compile_cache_hits_total"));
    EXPECT_EQ(h.cache_misses, metric("gt_compile_cache_misses_total"));
    EXPECT_EQ(h.hot_sequences_found, metric("gt_hotpath_hot_sequences_total"));
    EXPECT_EQ(h.unit_cache_hits, metric("gt_backend_unit_cache_hits_total"));
    EXPECT_EQ(h.unit_cache_misses, metric("gt_backend_unit_cache_misses_total"));
    EXPECT_EQ(h.unit_runs, metric("gt_backend_unit_runs_total"));
    EXPECT_DOUBLE_EQ(h.compile_seconds, metric("gt_backend_unit_compile_seconds_total"));
    for (const auto& [strategy, n] : h.unit_instructions)
      EXPECT_EQ(n, metric("gt_backend_unit_instructions_total", {{"strategy", strategy}})) << strategy;
    for (const HotSequenceStats& q : h.hot_sequences) {
      EXPECT_EQ(q.length, metric("gt_hotpath_sequence_length", {{"sequence", q.id}}));
      EXPECT_EQ(q.repetitions, metric("gt_hotpath_sequence_occurrences_total", {{"sequence", q.id}}));
    }
    // Every raw sample too, but the host's traffic counters: heartbeats move
    // them between the snapshot and the scrape.
    size_t compared = 0;
    for (const MetricSample& s : h.samples) {
      if (s.name.rfind("gt_host_", 0) == 0) continue;
      EXPECT_DOUBLE_EQ(s.value, metric(s.name, s.labels)) << s.name;
      ++compared;
    }
    EXPECT_GT(compared, 20u);
  }
}

TEST_F(StatsTest, AHungWorkerIsNamedMissingOnceTheTimeoutPasses) {
  ConnectedCluster::cluster().SignalWorkerForTest(1, SIGSTOP);
  const auto start = std::chrono::steady_clock::now();
  WorkerStats stats = worker_stats(500);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ConnectedCluster::cluster().SignalWorkerForTest(1, SIGCONT);
  EXPECT_EQ(stats.missing, (std::vector<std::string>{"worker-1"}));
  EXPECT_EQ(stats.hosts.size(), 2u);
  EXPECT_NE(Find(stats, "dispatcher"), nullptr);
  EXPECT_NE(Find(stats, "worker-0"), nullptr);
  EXPECT_GE(seconds, 0.4) << "answered before the timeout without worker-1's answer";
  EXPECT_LT(seconds, 4.0);
  // Resumed, it answers again (its late answer to the old request is ignored).
  WorkerStats again = worker_stats();
  EXPECT_TRUE(again.missing.empty());
  EXPECT_EQ(again.hosts.size(), 3u);
}

// Last: the worker stays dead for the rest of the suite. Its connection
// closes, so the dispatcher drops it at once: asked just after, it is named
// missing (the request went out first) or already gone from the hosts.
TEST_F(StatsTest, AKilledWorkerIsMissingOrGoneWithinSeconds) {
  ConnectedCluster::cluster().KillWorkerForTest(1);
  const auto start = std::chrono::steady_clock::now();
  WorkerStats stats = worker_stats(1000);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(stats.missing.empty() || stats.missing == std::vector<std::string>{"worker-1"});
  EXPECT_EQ(stats.hosts.size(), 2u);
  EXPECT_EQ(Find(stats, "worker-1"), nullptr);
  EXPECT_LT(seconds, 4.0);
  WorkerStats later = worker_stats(1000);
  EXPECT_TRUE(later.missing.empty()) << "a lost worker is no longer asked";
  EXPECT_EQ(later.hosts.size(), 2u);
}

TEST(WorkerStatsArgumentsTest, ANonPositiveTimeoutIsRefused) {
  try {
    worker_stats(0);
    FAIL() << "worker_stats(0) returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("timeout_ms"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gt::testing
