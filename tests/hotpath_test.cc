// Hot-path detection and compiled units through real gt-dispatcher and
// gt-worker processes. Each client program runs in its own process
// (hotpath_client), so that the same program can be run against clusters
// with and without the hotpath/compile stages and the values compared.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cluster.h"
#include "gt/unit.h"

namespace gt::testing {
namespace {

constexpr const char* kWorkerPlain = "host: worker\nheartbeat_interval_ms: 200\nbackend:\n  plugin: torch\n";

std::string DispatcherManifest(const std::string& stages) {
  return "host: dispatcher\nid: dispatcher\nheartbeat_interval_ms: 200\nheartbeat_timeout_ms: 3000\n" +
         (stages.empty() ? std::string() : "stages:\n" + stages);
}

std::string WorkerManifest(const std::string& stages) {
  return "host: worker\nheartbeat_interval_ms: 200\n" + (stages.empty() ? std::string() : "stages:\n" + stages) +
         "backend:\n  plugin: torch\n";
}

std::string HotpathStage(int threshold) {
  return "  - name: hotpath\n    plugin: hotpath\n    options: {threshold: " + std::to_string(threshold) + "}\n";
}
const std::string kCompileStage = "  - name: compile\n    plugin: compile\n";

std::string LogStage(const std::string& path) {
  return "  - name: log\n    plugin: instruction_log\n    options: {path: " + path + "}\n";
}

struct Outcome {
  std::vector<float> values;
  int dispatcher_port = 0;
  int worker_port = 0;
  std::string dispatcher_metrics;
  std::string worker_metrics;               // the first worker's
  std::vector<std::string> all_worker_metrics;
};

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

// Runs `program` for `steps` against a fresh cluster with the given manifests;
// `client_env` ("NAME=value ...") is the client process's extra environment.
// `earlier`, when set, is a program another client runs (one step, plainly)
// before it.
Outcome RunProgram(const std::string& dispatcher, const std::string& worker, const std::string& program, int steps,
                   const std::string& client_env = "", int workers = 1, const std::string& earlier = "") {
  ClusterOptions options;
  options.workers = workers;
  options.dispatcher_manifest = WriteTempFile("dispatcher.yaml", dispatcher);
  options.worker_manifest = WriteTempFile("worker.yaml", worker);
  ProcessCluster cluster(options);
  Outcome run;
  if (!cluster.WaitForWorkers(workers)) {
    ADD_FAILURE() << "worker did not register";
    return run;
  }
  if (!earlier.empty()) {
    const std::string first = BinDir() + "/hotpath_client " + cluster.endpoint() + " " + earlier + " 1 /dev/null";
    EXPECT_EQ(std::system(first.c_str()), 0) << first;
  }
  std::string out = WriteTempFile("values.bin", "");
  std::string command = "env " + client_env + " " + BinDir() + "/hotpath_client " + cluster.endpoint() + " " +
                        program + " " + std::to_string(steps) + " " + out;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  run.values = ReadFloats(out);
  std::remove(out.c_str());
  run.dispatcher_metrics = HttpGet(cluster.dispatcher_metrics_port(), "/metrics");
  for (int port : cluster.worker_metrics_ports()) run.all_worker_metrics.push_back(HttpGet(port, "/metrics"));
  run.worker_metrics = run.all_worker_metrics.front();
  EXPECT_TRUE(cluster.AllAlive());
  return run;
}

double Metric(const std::string& exposition, const std::string& name, const std::map<std::string, std::string>& labels = {}) {
  return MetricValue(exposition, name, labels).value_or(-1);
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_FALSE(std::isnan(want[i])) << "value " << i;
    EXPECT_LE(std::fabs(got[i] - want[i]), 1e-6 * std::max(1.0f, std::fabs(want[i]))) << "value " << i;
  }
}

const std::string kDispatcherCompiles = DispatcherManifest(HotpathStage(2) + kCompileStage);
const std::string kDispatcherPlain = DispatcherManifest("");

TEST(HotpathTest, DetectsTheWholeMlpTrainingStep) {
  std::string dlog = WriteTempFile("d.log", ""), wlog = WriteTempFile("w.log", "");
  Outcome run = RunProgram(DispatcherManifest(LogStage(dlog)), WorkerManifest(HotpathStage(2) + LogStage(wlog)), "mlp", 6);
  ASSERT_FALSE(run.values.empty());
  // The worker's log shows what the hotpath stage emitted: every step after
  // the first is marked, with the step's length.
  std::ifstream in(wlog);
  std::string line;
  std::vector<std::string> marked;  // op names inside the last marked region
  std::vector<int64_t> lengths;
  bool inside = false;
  std::regex length_re("axes=\\[([0-9]+)\\]");
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.find("| hot_start ") != std::string::npos) {
      inside = true;
      marked.clear();
      ASSERT_TRUE(std::regex_search(line, m, length_re)) << line;
      lengths.push_back(std::stoll(m[1]));
    } else if (line.find("| hot_end ") != std::string::npos) {
      inside = false;
    } else if (inside && line.find("| WORKER_RECV ") != std::string::npos) {  // not WORKER_DONE / CONNECT
      std::istringstream fields(line);
      std::string f;
      std::vector<std::string> parts;
      while (std::getline(fields, f, '|')) parts.push_back(f);
      ASSERT_GE(parts.size(), 5u) << line;
      std::istringstream op(parts[4]);
      std::string name;
      op >> name;
      marked.push_back(name);
    }
  }
  ASSERT_GE(lengths.size(), 4u) << "expected steps 2..6 (at least) to be marked";
  for (int64_t l : lengths) EXPECT_EQ(l, lengths.back());
  EXPECT_EQ(static_cast<int64_t>(marked.size()), lengths.back());
  // The expected length: what the client sent in its last step, minus what
  // cannot be in a sequence (fetch, sync, from_bytes), read from the dispatcher's log.
  std::ifstream d(dlog);
  std::vector<std::vector<std::string>> steps(1);
  while (std::getline(d, line)) {
    std::istringstream fields(line);
    std::string f;
    std::vector<std::string> parts;
    while (std::getline(fields, f, '|')) parts.push_back(f);
    if (parts.size() < 5 || parts[2].find(" RECV ") == std::string::npos) continue;  // not host events
    std::istringstream op(parts[4]);
    std::string name;
    op >> name;
    if (name == "sync") steps.emplace_back();
    else if (name != "fetch" && name != "from_bytes") steps.back().push_back(name);
  }
  // One sync per step, then one per parameter fetched (4).
  ASSERT_GE(steps.size(), 10u);
  const std::vector<std::string>& step = steps[5];
  EXPECT_EQ(lengths.back(), static_cast<int64_t>(step.size()));
  auto has = [&](const char* op) { return std::find(marked.begin(), marked.end(), op) != marked.end(); };
  EXPECT_TRUE(has("matmul")) << "forward";
  EXPECT_TRUE(has("relu"));
  EXPECT_TRUE(has("transpose")) << "backward";
  EXPECT_TRUE(has("add_into")) << "SGD update in place";
  EXPECT_TRUE(has("free"));
  EXPECT_GE(Metric(run.worker_metrics, "gt_hotpath_hot_sequences_total"), 1);
  EXPECT_GE(Metric(run.worker_metrics, "gt_hotpath_marked_sequences_total"), 4);
}

TEST(HotpathTest, CompiledMlpEqualsEagerAndCrossesTheWireAsOneInstruction) {
  Outcome eager = RunProgram(kDispatcherPlain, kWorkerPlain, "mlp", 8);
  Outcome compiled = RunProgram(kDispatcherCompiles, kWorkerPlain, "mlp", 8);
  ExpectClose(compiled.values, eager.values);
  EXPECT_GE(Metric(compiled.dispatcher_metrics, "gt_compile_units_run_total"), 6);
  EXPECT_EQ(Metric(compiled.dispatcher_metrics, "gt_compile_cache_misses_total"), 1);
  // After the defining step, every step is a replay matched by ops and wiring.
  EXPECT_EQ(Metric(compiled.dispatcher_metrics, "gt_compile_replays_total"),
            Metric(compiled.dispatcher_metrics, "gt_compile_cache_hits_total"));
  EXPECT_GE(Metric(compiled.dispatcher_metrics, "gt_compile_replays_total"), 5);
  EXPECT_GE(Metric(compiled.worker_metrics, "gt_backend_op_seconds_count", {{"op", "run_unit"}}), 6);
  EXPECT_EQ(Metric(compiled.worker_metrics, "gt_backend_op_seconds_count", {{"op", "define_unit"}}), 1);
  // Each replayed step is one instruction for the worker instead of dozens.
  const std::map<std::string, std::string> backend = {{"stage", "backend"}};
  double eager_in = Metric(eager.worker_metrics, "gt_stage_instructions_received_total", backend);
  double compiled_in = Metric(compiled.worker_metrics, "gt_stage_instructions_received_total", backend);
  EXPECT_LT(compiled_in * 2, eager_in) << "worker received " << compiled_in << " instructions, eager " << eager_in;
}

TEST(HotpathTest, CompilesAfterTheShardingStageAsTheEmbeddedDefaultDoes) {
  // GT_COMPILE=1's order: placement first, so a unit never spans two workers.
  const std::string sharding = "  - name: sharding\n    plugin: sharding\n";
  Outcome eager = RunProgram(kDispatcherPlain, kWorkerPlain, "mlp", 8);
  Outcome compiled = RunProgram(DispatcherManifest(sharding + HotpathStage(2) + kCompileStage), kWorkerPlain, "mlp", 8);
  ExpectClose(compiled.values, eager.values);
  EXPECT_GE(Metric(compiled.dispatcher_metrics, "gt_compile_units_run_total"), 6);
  EXPECT_GE(Metric(compiled.worker_metrics, "gt_backend_op_seconds_count", {{"op", "run_unit"}}), 6);
}

TEST(HotpathTest, CompiledEqualsEagerForEveryOpKind) {
  Outcome eager = RunProgram(kDispatcherPlain, kWorkerPlain, "ops", 5);
  Outcome compiled = RunProgram(kDispatcherCompiles, kWorkerPlain, "ops", 5);
  ExpectClose(compiled.values, eager.values);
  EXPECT_GE(Metric(compiled.dispatcher_metrics, "gt_compile_units_run_total"), 3);
  // The same with both stages in the worker.
  Outcome in_worker = RunProgram(kDispatcherPlain, WorkerManifest(HotpathStage(2) + kCompileStage), "ops", 5);
  ExpectClose(in_worker.values, eager.values);
  EXPECT_GE(Metric(in_worker.worker_metrics, "gt_compile_units_run_total"), 3);
}

TEST(HotpathTest, AShapeChangeMakesANewUnitAndStaysCorrect) {
  Outcome eager = RunProgram(kDispatcherPlain, kWorkerPlain, "shapes", 5);
  Outcome compiled = RunProgram(kDispatcherCompiles, kWorkerPlain, "shapes", 5);
  ExpectClose(compiled.values, eager.values);
  EXPECT_GE(Metric(compiled.dispatcher_metrics, "gt_compile_cache_misses_total"), 2) << "one unit per batch size";
  EXPECT_GE(Metric(compiled.dispatcher_metrics, "gt_compile_cache_hits_total"), 2);
  // Batch 16 is another hot sequence with another id: never a replay of the batch-8 unit.
}

TEST(HotpathTest, CompileScopeIsCompiledOnFirstUse) {
  // A threshold no sequence reaches: only the client's scope makes units.
  const std::string dispatcher = DispatcherManifest(HotpathStage(1000) + kCompileStage);
  Outcome eager = RunProgram(kDispatcherPlain, kWorkerPlain, "scope", 1);
  Outcome compiled = RunProgram(dispatcher, kWorkerPlain, "scope", 1);
  ExpectClose(compiled.values, eager.values);
  EXPECT_EQ(Metric(compiled.dispatcher_metrics, "gt_compile_units_run_total"), 1);
  EXPECT_EQ(Metric(compiled.dispatcher_metrics, "gt_hotpath_marked_sequences_total"), 0);
}

TEST(HotpathTest, CompileTrueInASignalConfigCompilesItsScopeOnFirstUse) {
  const std::string dispatcher = DispatcherManifest(HotpathStage(1000) + kCompileStage);
  Outcome eager = RunProgram(kDispatcherPlain, kWorkerPlain, "ops", 2);
  Outcome compiled = RunProgram(dispatcher, kWorkerPlain, "config", 2);
  ExpectClose(compiled.values, eager.values);
  EXPECT_EQ(Metric(compiled.dispatcher_metrics, "gt_compile_units_run_total"), 2);
  EXPECT_EQ(Metric(compiled.dispatcher_metrics, "gt_compile_cache_misses_total"), 1) << "defined on first use";
  EXPECT_EQ(Metric(compiled.dispatcher_metrics, "gt_hotpath_marked_sequences_total"), 0);
}

TEST(HotpathTest, WithoutTheStagesMarkersChangeNothing) {
  // The scope's markers reach a worker whose pipeline has no compile stage.
  Outcome plain = RunProgram(kDispatcherPlain, kWorkerPlain, "ops", 3);
  Outcome scoped = RunProgram(kDispatcherPlain, kWorkerPlain, "scope", 3);
  ExpectClose(scoped.values, plain.values);
  Outcome marked_only = RunProgram(DispatcherManifest(HotpathStage(1)), kWorkerPlain, "mlp", 4);
  Outcome eager = RunProgram(kDispatcherPlain, kWorkerPlain, "mlp", 4);
  ExpectClose(marked_only.values, eager.values);
}


// ---- the same stages in the client's own pipeline -------------------------

const std::string kClientCompiles = "GT_COMPILE=1";

std::string ClientManifestEnv(const std::string& stages) {
  return "GT_CLIENT_MANIFEST=" + WriteTempFile("client.yaml", "host: client\nid: the-client\nstages:\n" + stages);
}

// Runs `program` in a client process with `client_env`, expecting it to
// fail; returns what it wrote to stderr.
std::string FailingClientStderr(const std::string& client_env, const std::string& endpoint, const std::string& program,
                                int steps) {
  const std::string err = WriteTempFile("stderr.txt", "");
  const std::string command = "env " + client_env + " " + BinDir() + "/hotpath_client " + endpoint + " " + program +
                              " " + std::to_string(steps) + " /dev/null 2> " + err;
  EXPECT_NE(std::system(command.c_str()), 0) << command;
  std::ifstream in(err);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(err.c_str());
  return text;
}

// The same against a fresh cluster, which must survive it.
std::string FailingRun(const std::string& dispatcher, int workers, const std::string& client_env,
                       const std::string& program, int steps) {
  ClusterOptions options;
  options.workers = workers;
  options.dispatcher_manifest = WriteTempFile("dispatcher.yaml", dispatcher);
  options.worker_manifest = WriteTempFile("worker.yaml", kWorkerPlain);
  ProcessCluster cluster(options);
  if (!cluster.WaitForWorkers(workers)) {
    ADD_FAILURE() << "workers did not register";
    return "";
  }
  std::string text = FailingClientStderr(client_env, cluster.endpoint(), program, steps);
  EXPECT_TRUE(cluster.AllAlive());
  return text;
}

double RouterReceived(const Outcome& run) {
  return Metric(run.dispatcher_metrics, "gt_stage_instructions_received_total", {{"stage", "router"}});
}

TEST(ClientStagesTest, AReplayedStepLeavesTheClientAsOneRunUnit) {
  Outcome eager = RunProgram(kDispatcherPlain, kWorkerPlain, "mlp", 8);
  Outcome compiled = RunProgram(kDispatcherPlain, kWorkerPlain, "mlp", 8, kClientCompiles);
  ExpectClose(compiled.values, eager.values);
  // The dispatcher runs no stages: the units are the client's.
  EXPECT_EQ(Metric(compiled.worker_metrics, "gt_backend_op_seconds_count", {{"op", "define_unit"}}), 1);
  EXPECT_GE(Metric(compiled.worker_metrics, "gt_backend_op_seconds_count", {{"op", "run_unit"}}), 6);
  // Steps 3..8 reach the dispatcher as a run_unit, the fetch and the sync
  // (and a few frees) instead of the step's ~40 instructions.
  EXPECT_LT(RouterReceived(compiled) * 2, RouterReceived(eager))
      << "router received " << RouterReceived(compiled) << ", eager " << RouterReceived(eager);
}

TEST(ClientStagesTest, EveryOpKindAndAShapeChangeGiveEagerValues) {
  Outcome eager = RunProgram(kDispatcherPlain, kWorkerPlain, "ops", 5);
  Outcome compiled = RunProgram(kDispatcherPlain, kWorkerPlain, "ops", 5, kClientCompiles);
  ExpectClose(compiled.values, eager.values);
  EXPECT_GE(Metric(compiled.worker_metrics, "gt_backend_op_seconds_count", {{"op", "run_unit"}}), 3);
  Outcome eager_shapes = RunProgram(kDispatcherPlain, kWorkerPlain, "shapes", 5);
  Outcome shapes = RunProgram(kDispatcherPlain, kWorkerPlain, "shapes", 5, kClientCompiles);
  ExpectClose(shapes.values, eager_shapes.values);
  // The step's template names no shape (the fused mse_loss and its backward
  // take theirs from their operands), so the batch-16 steps may replay the
  // batch-8 unit: either way they run as units, with eager's values.
  EXPECT_GE(Metric(shapes.worker_metrics, "gt_backend_op_seconds_count", {{"op", "define_unit"}}), 1);
  EXPECT_GE(Metric(shapes.worker_metrics, "gt_backend_op_seconds_count", {{"op", "run_unit"}}), 6)
      << "steps of both batch sizes replayed";
}

TEST(ClientStagesTest, CompileScopesAreUnitsFromTheirFirstUse) {
  // A threshold no sequence reaches: only the scopes make units.
  const std::string client = ClientManifestEnv(HotpathStage(1000) + kCompileStage);
  Outcome eager = RunProgram(kDispatcherPlain, kWorkerPlain, "ops", 2);
  Outcome by_option = RunProgram(kDispatcherPlain, kWorkerPlain, "scope", 2, client);
  Outcome by_config = RunProgram(kDispatcherPlain, kWorkerPlain, "config", 2, client);
  ExpectClose(by_option.values, eager.values);
  ExpectClose(by_config.values, eager.values);
  for (const Outcome* run : {&by_option, &by_config}) {
    EXPECT_EQ(Metric(run->worker_metrics, "gt_backend_op_seconds_count", {{"op", "run_unit"}}), 2);
    EXPECT_EQ(Metric(run->worker_metrics, "gt_backend_op_seconds_count", {{"op", "define_unit"}}), 1);
  }
}

TEST(ClientStagesTest, AClientThatPlacesTensorsBypassesItsStagesFromThenOn) {
  // Two workers and the dispatcher's sharding stage: the sharded scope's ops
  // must reach it one by one (were they units, its repetitions would be), and
  // so must everything after, since tensors it placed stay placed.
  const std::string dispatcher = DispatcherManifest("  - name: sharding\n    plugin: sharding\n");
  Outcome eager = RunProgram(dispatcher, kWorkerPlain, "placing", 5, "", 2);
  Outcome compiled = RunProgram(dispatcher, kWorkerPlain, "placing", 5, kClientCompiles, 2);
  ExpectClose(compiled.values, eager.values);
  double runs = 0;
  for (const std::string& metrics : compiled.all_worker_metrics)
    runs += MetricValue(metrics, "gt_backend_op_seconds_count", {{"op", "run_unit"}}).value_or(0);
  EXPECT_GE(runs, 3) << "steps before the first config are replayed";
  EXPECT_LE(runs, 5) << "nothing is a unit once a config placed tensors";
  // The scope was sharded: the worker the client's other tensors are not on
  // got work too (its shard of x).
  for (const std::string& metrics : compiled.all_worker_metrics)
    EXPECT_GT(MetricValue(metrics, "gt_stage_instructions_received_total", {{"stage", "backend"}}).value_or(0), 0);
}

TEST(ClientStagesTest, TensorsPlacedByAConfigNeverReachTheClientsUnits) {
  // The parameters are sharded, and stay so after the config is cleared: the
  // client keeps sending their training step one instruction at a time.
  const std::string dispatcher = DispatcherManifest("  - name: sharding\n    plugin: sharding\n");
  Outcome eager = RunProgram(dispatcher, kWorkerPlain, "placed", 5, "", 2);
  Outcome compiled = RunProgram(dispatcher, kWorkerPlain, "placed", 5, kClientCompiles, 2);
  ExpectClose(compiled.values, eager.values);
  for (const std::string& metrics : compiled.all_worker_metrics)
    EXPECT_EQ(MetricValue(metrics, "gt_backend_op_seconds_count", {{"op", "run_unit"}}).value_or(0), 0);
}

TEST(ClientStagesTest, AUnitThatTakesNoTensorRunsWhereTheClientsTensorsAre) {
  // The second client of a two-worker cluster has its tensors on worker 1;
  // its compile scope takes no tensor, and its unit must run there too.
  const std::string dispatcher = DispatcherManifest("  - name: sharding\n    plugin: sharding\n");
  Outcome eager = RunProgram(dispatcher, kWorkerPlain, "made", 3, "", 2, "mlp");
  Outcome compiled = RunProgram(dispatcher, kWorkerPlain, "made", 3, kClientCompiles, 2, "mlp");
  ExpectClose(compiled.values, eager.values);
  double runs = 0;
  for (const std::string& metrics : compiled.all_worker_metrics)
    runs += MetricValue(metrics, "gt_backend_op_seconds_count", {{"op", "run_unit"}}).value_or(0);
  EXPECT_GE(runs, 3) << "the scope's unit, every step";
}

TEST(ClientStagesTest, AUnitThatWouldTakeAShardedTensorIsRefusedClearly) {
  // A dispatcher that places tensors with no config (auto_shard replicates
  // the MLP's bias) and a client that cannot know it: its units reach the
  // sharding stage, which refuses one that takes a tensor not whole on one
  // worker, naming it (run as it was, it would update a temporary copy).
  const std::string dispatcher =
      DispatcherManifest("  - name: sharding\n    plugin: sharding\n    options: {auto_shard: true}\n");
  ASSERT_FALSE(RunProgram(dispatcher, kWorkerPlain, "mlp", 6, "", 2).values.empty()) << "fine without the stages";
  const std::string text = FailingRun(dispatcher, 2, kClientCompiles, "mlp", 6);
  EXPECT_NE(text.find("run_unit"), std::string::npos) << text;
  EXPECT_NE(text.find("a compiled unit takes only tensors whole on the client's worker"), std::string::npos) << text;
}

TEST(ClientStagesTest, AUnitTheShardingStageRefusesStillFreesWhatItConsumes) {
  // A raw client: a row-sharded tensor, and a unit that consumes it (the
  // client forgets it when it sends the run). The sharding stage refuses the
  // unit and must free the shards on both workers.
  ClusterOptions options;
  options.workers = 2;
  options.dispatcher_manifest =
      WriteTempFile("dispatcher.yaml", DispatcherManifest("  - name: sharding\n    plugin: sharding\n"));
  options.worker_manifest = WriteTempFile("worker.yaml", kWorkerPlain);
  ProcessCluster cluster(options);
  ASSERT_TRUE(cluster.WaitForWorkers(2));
  zmq::context_t context(1);
  RawClient client(context, cluster.endpoint());
  Instruction configure = MakeInstruction(Op::kConfigure, 1, {}, {});
  configure.signal = "rows";
  configure.attrs.axes = {0};
  configure.attrs.shape = {0, 1};
  Instruction sharded = FromFloats(2, {1, 2, 3, 4}, {4, 1});
  sharded.signal = "rows";
  UnitTemplate neg;
  neg.inputs = 1;
  neg.body = {MakeInstruction(Op::kNeg, 0, {2}, {1}), MakeInstruction(Op::kFree, 0, {}, {1})};
  Instruction define = MakeInstruction(Op::kDefineUnit, 3, {}, {});
  define.attrs.seed = 5;
  define.payload = EncodeUnit(neg);
  Instruction run = MakeInstruction(Op::kRunUnit, 4, {3}, {2});
  run.attrs.seed = 5;
  run.attrs.axes = {0};
  client.Send({configure, sharded});
  ASSERT_TRUE(client.Sync());
  auto live = [&cluster] {
    double n = 0;
    for (int port : cluster.worker_metrics_ports())
      n += MetricValue(HttpGet(port, "/metrics"), "gt_worker_live_tensors").value_or(-100);
    return n;
  };
  EXPECT_EQ(live(), 2) << "one shard on each worker";
  client.Send({define, run});
  std::optional<wire::Envelope> done = client.Sync();
  ASSERT_TRUE(done);
  ASSERT_GE(done->errors_size(), 1);
  EXPECT_NE(done->errors(0).message().find("a compiled unit takes only tensors whole"), std::string::npos)
      << done->errors(0).message();
  EXPECT_EQ(live(), 0) << "the refused unit's consumed shards are freed";
  EXPECT_TRUE(cluster.AllAlive());
}

TEST(ClientStagesTest, HotpathAloneInTheClientChangesNothing) {
  // Its markers carry sequence ids, which no host takes from a client: the
  // client drops them when no compile stage consumed them.
  Outcome eager = RunProgram(kDispatcherPlain, kWorkerPlain, "mlp", 5);
  Outcome marked = RunProgram(kDispatcherPlain, kWorkerPlain, "mlp", 5, ClientManifestEnv(HotpathStage(2)));
  ExpectClose(marked.values, eager.values);
}

TEST(ClientStagesTest, AClientStagesErrorIsRaisedAtTheNextSyncPoint) {
  const std::string manifest = WriteTempFile(
      "throwing-client.yaml", "host: client\nstages:\n  - name: refuses_neg\n    plugin: throwing\n");
  const std::string text = FailingRun(kDispatcherPlain, 1,
                                      std::string("GT_PLUGIN_PATH=") + GT_TEST_PLUGIN_DIR + " GT_CLIENT_MANIFEST=" + manifest,
                                      "ops", 1);
  EXPECT_NE(text.find("failed on client"), std::string::npos) << text;
  EXPECT_NE(text.find("throwing: refusing neg"), std::string::npos) << text;
}

TEST(ClientStagesTest, ABadClientManifestIsAClearErrorAtTheFirstOp) {
  const std::string manifest = WriteTempFile(
      "bad-client.yaml", "host: client\nlisten: tcp://0.0.0.0:5555\nstages:\n  - name: x\n    plugin: no_such_plugin\n");
  // Nothing to connect to: the client fails before it tries.
  const std::string text = FailingClientStderr("GT_CLIENT_MANIFEST=" + manifest, "inproc://nowhere", "mlp", 1);
  EXPECT_NE(text.find("GT_CLIENT_MANIFEST"), std::string::npos) << text;
  EXPECT_NE(text.find("a client manifest takes only"), std::string::npos) << text;
  EXPECT_NE(text.find("no_such_plugin"), std::string::npos) << text;
}

}  // namespace
}  // namespace gt::testing
