// The safety rules a plugin author relies on (docs/writing-a-modifier.md,
// "What the host guarantees"), each with the exact message a user sees:
//   - the ABI version is checked before the descriptor is read or anything
//     is created, and a mismatch names the file and both versions;
//   - options are checked against the declared schema (unknown, wrong type,
//     out of range), all problems at once, before any factory runs;
//   - a plugin whose own option table is broken is refused when loaded;
//   - a factory's error or exception names the plugin and the stage;
//   - a plugin that throws while processing costs that client's instruction
//     an error reply and counts gt_stage_errors_total{kind="plugin_error"};
//     the host keeps serving (real gt-dispatcher / gt-worker processes);
//   - a plugin says which hosts it may run in;
//   - gt inspect describes a plugin from its descriptor alone;
//   - the search path puts GT_PLUGIN_PATH first, then the plugins beside the
//     libgt_core in use, each directory once.
//
// Plugins: the probes of tests/sdk_test_probe_plugin.cc (in
// GT_SDK_TEST_PLUGIN_DIR) and tests/plugins/{throwing,counting}.cc (in
// GT_TEST_PLUGIN_DIR).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "cluster.h"
#include "gt/instruction.h"
#include "gt/plugin.h"
#include "host/host_metrics.h"
#include "host/manifest.h"
#include "host/pipeline.h"
#include "host/plugin_loader.h"

namespace gt::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

const std::string kProbeDir = GT_SDK_TEST_PLUGIN_DIR;
const std::string kTestPluginDir = GT_TEST_PLUGIN_DIR;
const std::string kHostAbi = std::to_string(kPluginAbiVersion);

// Read on every lookup, and inherited by every process a test starts: set
// before main() so nothing runs without it.
const bool kPluginPathSet = [] {
  setenv("GT_PLUGIN_PATH", (kProbeDir + ":" + kTestPluginDir).c_str(), 1);
  return true;
}();

std::string Probe(const std::string& name) { return kProbeDir + "/gt_" + name + ".so"; }

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `command` through the shell (killed after 30 s) and collects its output.
CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  std::FILE* pipe = popen(("timeout 30 " + command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// An endpoint nothing listens on, for hosts that must stop before using it.
std::string Unused(const std::string& what) {
  return "ipc://" + TempPath(what + ".sock");
}

std::optional<std::string> Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::optional<std::string>(v) : std::nullopt;
}

// ---- Search path -----------------------------------------------------------

TEST(SdkSafetyTest, SearchPathPutsThePluginsBesideLibgtCoreRightAfterGtPluginPath) {
  // This test binary runs with the build tree's libgt_core, so the directory
  // beside it is the build tree's plugin directory.
  const std::string beside_core =
      std::filesystem::weakly_canonical(BinDir() + "/../lib/gt/plugins").string();
  std::vector<std::string> path = PluginSearchPath();
  ASSERT_GE(path.size(), 3u);
  EXPECT_EQ(path[0], kProbeDir);
  EXPECT_EQ(path[1], kTestPluginDir);
  EXPECT_EQ(path[2], beside_core);
  EXPECT_EQ(std::count(path.begin(), path.end(), beside_core), 1);

  // A directory named twice is searched once, where it first appears.
  setenv("GT_PLUGIN_PATH", (kProbeDir + ":" + beside_core + ":" + kProbeDir + "/.").c_str(), 1);
  std::vector<std::string> deduplicated = PluginSearchPath();
  setenv("GT_PLUGIN_PATH", (kProbeDir + ":" + kTestPluginDir).c_str(), 1);
  ASSERT_GE(deduplicated.size(), 2u);
  EXPECT_EQ(deduplicated[0], kProbeDir);
  EXPECT_EQ(deduplicated[1], beside_core);
  EXPECT_EQ(std::count(deduplicated.begin(), deduplicated.end(), kProbeDir), 1);
  EXPECT_EQ(std::count(deduplicated.begin(), deduplicated.end(), beside_core), 1);
}

// ---- ABI -------------------------------------------------------------------

TEST(SdkSafetyTest, AbiIsCheckedBeforeTheDescriptorIsRead) {
  unsetenv("GT_SDK_PROBE_DESCRIPTOR_READ");
  const std::string file = Probe("probe_abi99");
  Result<LoadedPlugin> p = LoadPluginFile(file);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kPluginError);
  EXPECT_EQ(p.status().message(), file + ": plugin ABI version 99 does not match host ABI version " + kHostAbi);
  Result<LoadedPlugin> by_name = FindPlugin("probe_abi99");
  ASSERT_FALSE(by_name.ok());
  EXPECT_EQ(by_name.status().message(), p.status().message());
  EXPECT_EQ(Env("GT_SDK_PROBE_DESCRIPTOR_READ"), std::nullopt) << "the descriptor of a wrong-ABI plugin was read";

  // The same source built for this ABI does report the read.
  (void)LoadPluginFile(Probe("probe_bad_default"));
  EXPECT_EQ(Env("GT_SDK_PROBE_DESCRIPTOR_READ"), "probe_bad_default");
}

TEST(SdkSafetyTest, AbiMismatchStopsARealHostNamingFileAndBothVersions) {
  const std::string manifest =
      WriteTempFile("abi.yaml", "host: dispatcher\nstages:\n  - name: old\n    plugin: probe_abi99\n");
  CommandResult r = RunCommand(BinDir() + "/gt-dispatcher --manifest " + manifest + " --listen " + Unused("abi"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(manifest + ":4: stages[0].plugin: " + Probe("probe_abi99") +
                                  ": plugin ABI version 99 does not match host ABI version " + kHostAbi));

  CommandResult check = RunCommand(BinDir() + "/gt inspect --check " + Probe("probe_abi99"));
  EXPECT_EQ(check.exit_code, 1);
  EXPECT_EQ(check.output, "not a loadable gt plugin: " + Probe("probe_abi99") +
                              ": plugin ABI version 99 does not match host ABI version " + kHostAbi + "\n");
}

// ---- Options ---------------------------------------------------------------

constexpr char kBadOptions[] =
    "host: dispatcher\n"        // 1
    "stages:\n"                 // 2
    "  - name: p\n"             // 3
    "    plugin: probe\n"       // 4
    "    options:\n"            // 5
    "      colour: red\n"       // 6   not declared
    "      limit: lots\n"       // 7   int expected
    "      ratio: half\n"       // 8   double expected
    "      verbose: yes\n"      // 9   bool expected (true | false)
    "  - name: q\n"             // 10
    "    plugin: probe\n"       // 11
    "    options:\n"            // 12
    "      limit: 11\n"         // 13  above 10
    "      ratio: 1.5\n"        // 14  above 1
    "      verbose: [true]\n";  // 15  not a scalar

TEST(SdkSafetyTest, OptionsAreCheckedAgainstTheSchemaBeforeAnyFactoryRuns) {
  unsetenv("GT_SDK_PROBE_FACTORY_SAW");
  Result<HostManifest> m = ParseManifest(kBadOptions, "options.yaml", HostKind::kDispatcher);
  ASSERT_FALSE(m.ok());
  const std::string& msg = m.status().message();
  EXPECT_THAT(msg, HasSubstr("options.yaml: 7 problems:"));
  for (const char* line : {
           "options.yaml:6: stages[0].options.colour: unknown option 'colour' of plugin 'probe' "
           "(known: limit, mode, ratio, verbose)",
           "options.yaml:7: stages[0].options.limit: option 'limit' expects int, got 'lots'",
           "options.yaml:8: stages[0].options.ratio: option 'ratio' expects double, got 'half'",
           "options.yaml:9: stages[0].options.verbose: option 'verbose' expects bool, got 'yes'",
           "options.yaml:13: stages[1].options.limit: option 'limit' = 11 is out of range [1, 10]",
           "options.yaml:14: stages[1].options.ratio: option 'ratio' = 1.5 is out of range [0, 1]",
           "options.yaml:15: stages[1].options.verbose: option 'verbose' expects bool, got a sequence",
       })
    EXPECT_THAT(msg, HasSubstr(std::string("\n  ") + line)) << msg;
  EXPECT_EQ(Env("GT_SDK_PROBE_FACTORY_SAW"), std::nullopt) << "a factory ran for an invalid manifest";

  // A real host refuses to start with the same list.
  const std::string file = WriteTempFile("options.yaml", kBadOptions);
  CommandResult r = RunCommand(BinDir() + "/gt-dispatcher --manifest " + file + " --listen " + Unused("options"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(file + ": 7 problems:"));
  EXPECT_THAT(r.output, HasSubstr(file + ":13: stages[1].options.limit: option 'limit' = 11 is out of range [1, 10]"));
}

TEST(SdkSafetyTest, FactoryGetsValidatedOptionsWithDefaultsFilledIn) {
  Result<HostManifest> m = ParseManifest(
      "host: dispatcher\nstages:\n  - name: p\n    plugin: probe\n    options: {limit: 7, verbose: true}\n",
      "ok.yaml", HostKind::kDispatcher);
  ASSERT_TRUE(m.ok()) << m.status().message();
  unsetenv("GT_SDK_PROBE_FACTORY_SAW");
  prometheus::Registry registry;
  HostMetrics metrics(HostKind::kDispatcher, "d", registry);
  Result<std::unique_ptr<Pipeline>> p = Pipeline::Build(*m, metrics, registry);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(Env("GT_SDK_PROBE_FACTORY_SAW"), "mode=pass limit=7 ratio=0.5 verbose=true");
}

TEST(SdkSafetyTest, BrokenOptionTablesAreRefusedWhenLoaded) {
  struct Case {
    const char* plugin;
    std::string reason;
  };
  const Case cases[] = {
      {"probe_bad_default",
       "plugin 'probe_bad_default': option 'limit': its default does not fit its own spec: "
       "option 'limit' = 11 is out of range [1, 10]"},
      {"probe_duplicate_option", "plugin 'probe_duplicate_option': option 'limit' is declared twice"},
      {"probe_empty_range", "plugin 'probe_empty_range': option 'ratio' has an empty range"},
  };
  for (const Case& c : cases) {
    Result<LoadedPlugin> p = LoadPluginFile(Probe(c.plugin));
    ASSERT_FALSE(p.ok()) << c.plugin;
    EXPECT_EQ(p.status().code(), Code::kPluginError);
    EXPECT_EQ(p.status().message(), Probe(c.plugin) + ": " + c.reason);
  }
  // Listing carries on past them.
  CommandResult r = RunCommand(BinDir() + "/gt inspect");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("(unusable) " + Probe("probe_duplicate_option") + ": " + cases[1].reason));
  EXPECT_THAT(r.output, ContainsRegex("\n  probe +modifier +1\\.2\\.3 +dispatcher, worker +SDK test plugin"));
}

// ---- Factories -------------------------------------------------------------

Result<std::unique_ptr<Pipeline>> BuildProbe(const std::string& mode, prometheus::Registry& registry,
                                             HostMetrics& metrics) {
  Result<HostManifest> m = ParseManifest(
      "host: dispatcher\nstages:\n  - name: p\n    plugin: probe\n    options: {mode: " + mode + "}\n", "f.yaml",
      HostKind::kDispatcher);
  if (!m.ok()) return m.status();
  return Pipeline::Build(*m, metrics, registry);
}

TEST(SdkSafetyTest, FactoryErrorsAndExceptionsNameThePluginAndTheStage) {
  prometheus::Registry registry;
  HostMetrics metrics(HostKind::kDispatcher, "d", registry);
  Result<std::unique_ptr<Pipeline>> failed = BuildProbe("fail_factory", registry, metrics);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(failed.status().message(), "plugin 'probe' (stage 'p'): probe: asked to fail (mode=fail_factory)");

  Result<std::unique_ptr<Pipeline>> threw = BuildProbe("throw_factory", registry, metrics);
  ASSERT_FALSE(threw.ok());
  EXPECT_EQ(threw.status().code(), Code::kPluginError);
  EXPECT_EQ(threw.status().message(), "plugin 'probe' threw while creating stage 'p': probe: thrown from the factory");

  // A real host stops with it instead of crashing.
  const std::string file = WriteTempFile(
      "throw.yaml", "host: dispatcher\nstages:\n  - name: p\n    plugin: probe\n    options: {mode: throw_factory}\n");
  CommandResult r = RunCommand(BinDir() + "/gt-dispatcher --manifest " + file + " --listen " + Unused("throw"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("plugin_error: plugin 'probe' threw while creating stage 'p': probe: thrown from the factory"));
}

// ---- Processing ------------------------------------------------------------

class RecordingTerminal final : public Terminal {
 public:
  Status Accept(Instruction inst) override {
    accepted.push_back(std::move(inst));
    return Status::Ok();
  }
  std::vector<Instruction> accepted;
};

std::optional<double> StageErrors(prometheus::Registry& registry, const std::string& stage, const std::string& kind) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != "gt_stage_errors_total") continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      bool stage_ok = false, kind_ok = false;
      for (const prometheus::ClientMetric::Label& l : m.label) {
        stage_ok = stage_ok || (l.name == "stage" && l.value == stage);
        kind_ok = kind_ok || (l.name == "kind" && l.value == kind);
      }
      if (stage_ok && kind_ok) return m.counter.value;
    }
  }
  return std::nullopt;
}

TEST(SdkSafetyTest, NonStandardExceptionAtEndOfBatchIsAPluginErrorNotACrash) {
  prometheus::Registry registry;
  HostMetrics metrics(HostKind::kDispatcher, "d", registry);
  Result<std::unique_ptr<Pipeline>> built = BuildProbe("throw_end_batch", registry, metrics);
  ASSERT_TRUE(built.ok()) << built.status().message();
  Pipeline& pipeline = **built;
  RecordingTerminal terminal;
  std::vector<std::string> errors;
  pipeline.SetTerminal(&terminal, "router");
  pipeline.SetErrorSink([&errors](const OpRef&, const Status& s) { errors.push_back(s.ToString()); });
  for (uint64_t seq = 1; seq <= 2; ++seq) {
    Instruction inst;
    inst.op = Op::kZeros;
    inst.seq = seq;
    inst.results = {seq};
    pipeline.Push(std::move(inst));
    pipeline.EndBatch();
  }
  EXPECT_EQ(terminal.accepted.size(), 2u);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], "plugin_error: stage 'p' threw a non-standard exception at end of batch");
  EXPECT_EQ(StageErrors(registry, "p", "plugin_error"), 2.0);
}




TEST(SdkSafetyTest, ThrowingPluginInARealDispatcherFailsOnlyThatInstruction) {
  ClusterOptions options;
  options.workers = 1;
  options.dispatcher_manifest = WriteTempFile(
      "throwing.yaml", "host: dispatcher\nid: sdk-dispatcher\nstages:\n  - name: boom\n    plugin: throwing\n");
  ProcessCluster cluster(options);
  ASSERT_TRUE(cluster.WaitForWorkers(1)) << "no worker registered";
  zmq::context_t context(1);
  RawClient a(context, cluster.endpoint());
  RawClient b(context, cluster.endpoint());

  // a: the neg throws inside the plugin; everything around it runs.
  a.Send({FromFloats(1, {1, -2, 3}), MakeInstruction(Op::kNeg, 2, {2}, {1}), MakeInstruction(Op::kRelu, 3, {3}, {1})});
  wire::Envelope done;
  EXPECT_EQ(FetchFloats(a, 3, 4, &done), (std::vector<float>{1, 0, 3}));
  ASSERT_EQ(done.errors_size(), 1) << done.DebugString();
  const wire::OpError& e = done.errors(0);
  EXPECT_EQ(e.seq(), 2u);
  EXPECT_EQ(e.op(), static_cast<uint32_t>(Op::kNeg));
  EXPECT_EQ(e.code(), static_cast<uint32_t>(Code::kPluginError));
  EXPECT_EQ(e.message(), "stage 'boom' threw: throwing: refusing neg #2");
  EXPECT_EQ(e.host(), "sdk-dispatcher");

  // b, meanwhile, is untouched.
  b.Send({FromFloats(1, {2, 3}), MakeInstruction(Op::kMul, 2, {2}, {1, 1})});
  wire::Envelope b_done;
  EXPECT_EQ(FetchFloats(b, 2, 3, &b_done), (std::vector<float>{4, 9}));
  EXPECT_EQ(b_done.errors_size(), 0);

  // The same again later: one more error, the host still serves.
  a.Send({MakeInstruction(Op::kNeg, 5, {5}, {3}), MakeInstruction(Op::kAdd, 6, {6}, {3, 3})});
  EXPECT_EQ(FetchFloats(a, 6, 7, &done), (std::vector<float>{2, 0, 6}));
  ASSERT_EQ(done.errors_size(), 1);
  EXPECT_EQ(done.errors(0).message(), "stage 'boom' threw: throwing: refusing neg #5");

  const std::string scrape = HttpGet(cluster.dispatcher_metrics_port(), "/metrics");
  EXPECT_EQ(MetricValue(scrape, "gt_stage_errors_total", {{"stage", "boom"}, {"kind", "plugin_error"}}), 2.0);
  EXPECT_EQ(MetricValue(scrape, "gt_stage_instructions_received_total", {{"stage", "boom"}}), 13.0);
  EXPECT_TRUE(cluster.AllAlive());
}

// ---- Hosts -----------------------------------------------------------------

TEST(SdkSafetyTest, PluginRestrictedToDispatchersStopsARealWorker) {
  const std::string file = WriteTempFile(
      "hosts.yaml", "host: worker\nstages:\n  - plugin: dispatcher_only\nbackend:\n  plugin: torch\n");
  CommandResult r = RunCommand(BinDir() + "/gt-worker --manifest " + file + " --connect " + Unused("hosts"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(file + ":3: stages[0].plugin: plugin 'dispatcher_only' may not run in a worker host"));
  CommandResult v = RunCommand(BinDir() + "/gt validate " + file);
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_THAT(v.output, HasSubstr(file + ":3: stages[0].plugin: plugin 'dispatcher_only' may not run in a worker host"));
}

// ---- Discovery -------------------------------------------------------------

TEST(SdkSafetyTest, InspectDescribesAPluginFromItsDescriptor) {
  unsetenv("GT_SDK_PROBE_FACTORY_SAW");
  for (const std::string& args : {"--check " + Probe("probe"), std::string("probe")}) {
    CommandResult r = RunCommand(BinDir() + "/gt inspect " + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("probe 1.2.3 (modifier)\n  SDK test plugin: reports what the host did with it\n"));
    EXPECT_THAT(r.output, HasSubstr("  hosts: dispatcher, worker\n"));
    EXPECT_THAT(r.output, ContainsRegex("\n    mode +string +default pass\n"));
    EXPECT_THAT(r.output, ContainsRegex("\n    limit +int +default 5 instructions +range \\[1, 10\\]\n"));
    EXPECT_THAT(r.output, ContainsRegex("\n    ratio +double +default 0.5 +range \\[0, 1\\]\n"));
    EXPECT_THAT(r.output, ContainsRegex("\n    verbose +bool +default false\n"));
  }
}

}  // namespace
}  // namespace gt::testing
