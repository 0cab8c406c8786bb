// The out-of-tree plugin story, end to end, run by tests/sdk_test.sh after it
// has installed gt into a prefix and built the two example plugins against
// that install with find_package(gt):
//   GT_SDK_PREFIX        the install prefix (bin/, lib/, include/)
//   GT_SDK_TEMPLATE_DIR  build dir of examples/modifier-template (gt_op_filter.so)
//   GT_SDK_INJECT_DIR    build dir of examples/modifier-inject (gt_decompose.so)
// Every test starts the *installed* gt-dispatcher / gt-worker, which find the
// installed torch backend beside their libgt_core and the example plugins
// through GT_PLUGIN_PATH, and talks to them with the raw wire client.
// Without those variables every test is skipped.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cluster.h"
#include "gt/instruction.h"
#include "gt/status.h"

namespace gt::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

const std::string kPrefix = EnvOr("GT_SDK_PREFIX");
const std::string kTemplateDir = EnvOr("GT_SDK_TEMPLATE_DIR");
const std::string kInjectDir = EnvOr("GT_SDK_INJECT_DIR");

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `command` through the shell with GT_PLUGIN_PATH=`plugin_path`.
CommandResult RunCommand(const std::string& plugin_path, const std::string& command) {
  CommandResult result;
  std::string line = "env GT_PLUGIN_PATH='" + plugin_path + "' timeout 30 " + command + " 2>&1";
  std::FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// A dispatcher and one worker from the install prefix, with the plugins of
// `plugin_path`; an empty manifest means the service's built-in default.
ClusterOptions InstalledCluster(const std::string& plugin_path, const std::string& dispatcher_manifest,
                                const std::string& worker_manifest) {
  ClusterOptions options;
  options.bin_dir = kPrefix + "/bin";
  options.env = {{"GT_PLUGIN_PATH", plugin_path}};
  options.dispatcher_manifest = dispatcher_manifest;
  options.worker_manifest = worker_manifest;
  return options;
}

class SdkInstallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kPrefix.empty() || kTemplateDir.empty() || kInjectDir.empty())
      GTEST_SKIP() << "run by tests/sdk_test.sh (GT_SDK_PREFIX, GT_SDK_TEMPLATE_DIR, GT_SDK_INJECT_DIR)";
  }
  zmq::context_t context_{1};
};

// ---- The template: drop an op, count every op ------------------------------

TEST_F(SdkInstallTest, TemplatePluginDropsItsOpAndCountsEveryOp) {
  const std::string manifest = WriteTempFile(
      "filter.yaml",
      "host: dispatcher\nid: sdk-dispatcher\nstages:\n"
      "  - name: filter\n    plugin: op_filter\n    options: {drop_op: neg}\n");
  // The worker runs its default manifest: the torch backend comes from the
  // prefix's lib/gt/plugins, found beside the installed libgt_core.
  ProcessCluster cluster(InstalledCluster(kTemplateDir, manifest, ""));
  ASSERT_TRUE(cluster.WaitForWorkers(1)) << "the installed hosts did not come up";

  RawClient client(context_, cluster.endpoint());
  client.Send({FromFloats(1, {1, -2, 3}), MakeInstruction(Op::kNeg, 2, {2}, {1}), MakeInstruction(Op::kRelu, 3, {3}, {1}),
               MakeInstruction(Op::kNeg, 4, {4}, {3})});
  wire::Envelope done;
  EXPECT_EQ(FetchFloats(client, 3, 5, &done), (std::vector<float>{1, 0, 3}));
  EXPECT_EQ(done.errors_size(), 0) << done.DebugString();

  // The dropped neg never made %2: using it is an error at the next sync.
  EXPECT_TRUE(FetchFloats(client, 2, 6, &done).empty());
  ASSERT_EQ(done.errors_size(), 1) << done.DebugString();
  EXPECT_EQ(done.errors(0).seq(), 6u);
  EXPECT_EQ(done.errors(0).code(), static_cast<uint32_t>(Code::kNotFound));
  EXPECT_THAT(done.errors(0).message(), HasSubstr("unknown tensor %2"));

  const std::string d = HttpGet(cluster.dispatcher_metrics_port(), "/metrics");
  const std::map<std::string, std::string> stage = {
      {"host", "dispatcher"}, {"instance", "sdk-dispatcher"}, {"stage", "filter"}};
  auto by_op = [&](const char* op) {
    std::map<std::string, std::string> labels = stage;
    labels["op"] = op;
    return MetricValue(d, "gt_op_filter_instructions_total", labels);
  };
  EXPECT_EQ(by_op("neg"), 2.0);
  EXPECT_EQ(by_op("relu"), 1.0);
  EXPECT_EQ(by_op("from_bytes"), 1.0);
  EXPECT_EQ(by_op("fetch"), 2.0);
  EXPECT_EQ(by_op("sync"), 2.0);
  EXPECT_EQ(by_op("add"), std::nullopt);  // series appear when their op does
  EXPECT_EQ(MetricValue(d, "gt_op_filter_dropped_total", stage), 2.0);
  EXPECT_EQ(MetricValue(d, "gt_stage_instructions_dropped_total", stage), 2.0);
  EXPECT_EQ(MetricValue(d, "gt_stage_instructions_received_total", stage), 8.0);
  // No neg ever reached the backend.
  EXPECT_EQ(MetricValue(HttpGet(cluster.worker_metrics_ports()[0], "/metrics"), "gt_backend_op_seconds_count", {{"op", "neg"}}).value_or(0), 0);
  EXPECT_EQ(MetricValue(HttpGet(cluster.worker_metrics_ports()[0], "/metrics"), "gt_backend_op_seconds_count", {{"op", "relu"}}), 1.0);
  EXPECT_TRUE(cluster.AllAlive());
}

TEST_F(SdkInstallTest, TemplateFactoryRefusesAnUnknownOrUnsafeDropOp) {
  for (const auto& [value, message] : std::vector<std::pair<std::string, std::string>>{
           {"nope", "invalid_argument: plugin 'op_filter' (stage 'filter'): option 'drop_op': unknown op 'nope' "
                    "(known: from_bytes, randn, "},
           {"sync", "invalid_argument: plugin 'op_filter' (stage 'filter'): option 'drop_op': refusing to drop "
                    "'sync': the client waiting at that sync point would never be answered"}}) {
    const std::string manifest = WriteTempFile(
        "bad-filter.yaml", "host: dispatcher\nstages:\n  - name: filter\n    plugin: op_filter\n"
                           "    options: {drop_op: " + value + "}\n");
    // The schema is fine (a string), so validation passes ...
    CommandResult v = RunCommand(kTemplateDir, kPrefix + "/bin/gt validate " + manifest);
    EXPECT_EQ(v.exit_code, 0) << v.output;
    // ... and the factory stops the host when it starts.
    CommandResult r = RunCommand(kTemplateDir, kPrefix + "/bin/gt-dispatcher --manifest " + manifest +
                                            " --listen ipc:///tmp/gt-sdk-unused-" + std::to_string(getpid()));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr(message));
  }
}

// ---- The injecting example -------------------------------------------------

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

TEST_F(SdkInstallTest, InjectPluginLowersSigmoidAndTanhInAWorker) {
  const std::string manifest = WriteTempFile(
      "lower.yaml", "host: worker\nstages:\n  - name: lower\n    plugin: decompose\n"
                    "backend:\n  plugin: torch\n");
  // No sharding stage: it would refuse the reserved id below before the
  // worker's stage sees it (its own range starts at 2^62).
  const std::string plain = WriteTempFile("plain.yaml", "host: dispatcher\nstages: []\n");
  ProcessCluster cluster(InstalledCluster(kInjectDir, plain, manifest));
  ASSERT_TRUE(cluster.WaitForWorkers(1)) << "the installed hosts did not come up";

  const std::vector<float> x = {-100, -3, -0.5f, 0, 0.25f, 2, 100};
  RawClient client(context_, cluster.endpoint());
  client.Send({FromFloats(1, x), MakeInstruction(Op::kSigmoid, 2, {2}, {1}), MakeInstruction(Op::kTanh, 3, {3}, {1})});
  wire::Envelope done;
  std::vector<float> sigmoid = FetchFloats(client, 2, 4, &done);
  EXPECT_EQ(done.errors_size(), 0) << done.DebugString();
  std::vector<float> tanh = FetchFloats(client, 3, 5, &done);
  EXPECT_EQ(done.errors_size(), 0) << done.DebugString();
  ASSERT_EQ(sigmoid.size(), x.size());
  ASSERT_EQ(tanh.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(sigmoid[i], Sigmoid(x[i]), 1e-6) << "sigmoid(" << x[i] << ")";
    EXPECT_NEAR(tanh[i], std::tanh(x[i]), 1e-6) << "tanh(" << x[i] << ")";
  }

  const std::string w = HttpGet(cluster.worker_metrics_ports()[0], "/metrics");
  const std::map<std::string, std::string> stage = {{"host", "worker"}, {"instance", "worker-0"}, {"stage", "lower"}};
  // The backend ran the lowered ops, never sigmoid or tanh.
  EXPECT_EQ(MetricValue(w, "gt_backend_op_seconds_count", {{"op", "sigmoid"}}).value_or(0), 0);
  EXPECT_EQ(MetricValue(w, "gt_backend_op_seconds_count", {{"op", "tanh"}}).value_or(0), 0);
  EXPECT_EQ(MetricValue(w, "gt_backend_op_seconds_count", {{"op", "exp"}}), 2.0);
  EXPECT_EQ(MetricValue(w, "gt_backend_op_seconds_count", {{"op", "div"}}), 2.0);
  // sigmoid: 1 in, 5 out; tanh: 1 in, 6 out.
  EXPECT_EQ(MetricValue(w, "gt_stage_instructions_injected_total", stage), 9.0);
  std::map<std::string, std::string> sigmoid_labels = stage, tanh_labels = stage;
  sigmoid_labels["op"] = "sigmoid";
  tanh_labels["op"] = "tanh";
  EXPECT_EQ(MetricValue(w, "gt_decompose_lowered_total", sigmoid_labels), 1.0);
  EXPECT_EQ(MetricValue(w, "gt_decompose_lowered_total", tanh_labels), 1.0);
  // The temporaries are gone: x, sigmoid(x), tanh(x) remain.
  EXPECT_EQ(MetricValue(w, "gt_worker_live_tensors"), 3.0);

  // A client id in the stage's reserved range is refused, naming the op.
  const TensorId reserved = (TensorId{1} << 63) + 1;
  client.Send({FromFloats(reserved, {1})});
  std::optional<wire::Envelope> sync = client.Sync();
  ASSERT_TRUE(sync);
  ASSERT_EQ(sync->errors_size(), 1) << sync->DebugString();
  EXPECT_EQ(sync->errors(0).code(), static_cast<uint32_t>(Code::kInvalidArgument));
  EXPECT_EQ(sync->errors(0).host(), "worker-0");  // reported by the worker's stage
  // The dispatcher names the worker it placed a new client's creation on (placement by load).
  EXPECT_THAT(sync->errors(0).message(), HasSubstr("result=%9223372036854775809 shape=[1] dtype=float32"));
  EXPECT_THAT(sync->errors(0).message(),
              HasSubstr(": tensor ids from 2^63 up are reserved for the decompose stage's temporaries"));
  EXPECT_TRUE(cluster.AllAlive());
}

TEST_F(SdkInstallTest, InjectPluginIsRefusedInADispatcherAndChecksItsOption) {
  const std::string in_dispatcher =
      WriteTempFile("d.yaml", "host: dispatcher\nstages:\n  - name: lower\n    plugin: decompose\n");
  CommandResult v = RunCommand(kInjectDir, kPrefix + "/bin/gt validate " + in_dispatcher);
  EXPECT_EQ(v.exit_code, 1) << v.output;
  EXPECT_THAT(v.output, HasSubstr(in_dispatcher + ":4: stages[0].plugin: plugin 'decompose' may not run in a "
                                  "dispatcher host"));

  const std::string bad_ops = WriteTempFile(
      "w.yaml", "host: worker\nstages:\n  - name: lower\n    plugin: decompose\n    options: {ops: 'sigmoid, relu'}\n"
                "backend:\n  plugin: torch\n");
  CommandResult r = RunCommand(kInjectDir, kPrefix + "/bin/gt-worker --manifest " + bad_ops +
                                        " --connect ipc:///tmp/gt-sdk-unused-" + std::to_string(getpid()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("invalid_argument: plugin 'decompose' (stage 'lower'): option 'ops': cannot lower "
                                  "'relu' (supported: sigmoid, tanh)"));
}

// ---- Discovery from the install --------------------------------------------

TEST_F(SdkInstallTest, InstalledGtFindsItsBundledPluginsAndDescribesBuiltOnes) {
  CommandResult list = RunCommand(kTemplateDir + ":" + kInjectDir, kPrefix + "/bin/gt inspect");
  EXPECT_EQ(list.exit_code, 0) << list.output;
  // GT_PLUGIN_PATH first, then the directory beside the installed libgt_core.
  EXPECT_THAT(list.output, HasSubstr("plugin search path:\n  " + kTemplateDir + "\n  " + kInjectDir + "\n  " +
                                     kPrefix + "/lib/gt/plugins\n"));
  EXPECT_THAT(list.output, ContainsRegex("\n  decompose +modifier +0\\.1\\.0 +worker +Lowers sigmoid and tanh"));
  EXPECT_THAT(list.output, ContainsRegex("\n  op_filter +modifier +0\\.1\\.0 +dispatcher, worker +Counts instructions"));
  EXPECT_THAT(list.output, ContainsRegex("\n  torch +backend "));
  EXPECT_THAT(list.output, ContainsRegex("\n  instruction_log +modifier "));

  CommandResult torch = RunCommand("", kPrefix + "/bin/gt inspect torch");
  EXPECT_EQ(torch.exit_code, 0) << torch.output;
  EXPECT_THAT(torch.output, HasSubstr("  file:  " + kPrefix + "/lib/gt/plugins/gt_torch.so\n"));

  CommandResult check = RunCommand("", kPrefix + "/bin/gt inspect --check " + kTemplateDir + "/gt_op_filter.so");
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_THAT(check.output, HasSubstr("op_filter 0.1.0 (modifier)\n"
                                      "  Counts instructions by op and drops those of one configurable op\n"));
  EXPECT_THAT(check.output, HasSubstr("  hosts: dispatcher, worker\n"));
  EXPECT_THAT(check.output, ContainsRegex("\n    drop_op +string +default \"\"\n"));
}

}  // namespace
}  // namespace gt::testing
