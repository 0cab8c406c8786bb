// Manifest validation and the settings, against the test plugins in
// GT_TEST_PLUGIN_DIR (tests/plugins/, built by tests/manifest_tests.cmake):
//   gt_wrong_abi.so         a modifier built for plugin ABI 99
//   gt_not_a_plugin.so      a shared library with no gt symbols
//   gt_throwing.so          modifier "throwing": throws on every neg
//   gt_dispatcher_only.so   modifier "dispatcher_only": dispatcher hosts only,
//                           options limit (int 1..10, default 5), verbose (bool)
// and the build tree's real plugins (torch, instruction_log).
// Plugin loading and a throwing stage in a real pipeline are in
// plugin_loader_test.cc (the same suite, manifest_test).
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "gt/instruction.h"
#include "gt/plugin.h"
#include "gt/settings.h"
#include "host/host_metrics.h"
#include "host/manifest.h"
#include "host/pipeline.h"
#include "host/plugin_loader.h"
#include "host/shipped_configs.h"
#include "worker/worker.h"

#include "manifest_test_support.h"

namespace gt {
namespace {
using namespace manifest_test;

// ---- Many problems at once -------------------------------------------------

// Line numbers are 1-based; the comment on each line says which problem it
// carries.
constexpr char kManyProblems[] =
    "host: worker\n"                      // 1   (root: no backend)
    "colour: blue\n"                      // 2   unknown top-level key
    "stages:\n"                           // 3
    "  - name: tape\n"                    // 4   stages[0]
    "    plugin: instruction_log\n"       // 5
    "    options:\n"                      // 6
    "      path: /tmp/gt-test.log\n"      // 7
    "      flush_every: lots\n"           // 8   string for an int
    "      colour: red\n"                 // 9   unknown option
    "  - name: gate\n"                    // 10  stages[1]
    "    plugin: dispatcher_only\n"       // 11  dispatcher-only plugin in a worker
    "    options: {limit: 11}\n"          // 12  out of range (1..10)
    "  - name: missing\n"                 // 13  stages[2]
    "    plugin: nope\n"                  // 14  unknown plugin
    "  - name: exec\n"                    // 15  stages[3]
    "    plugin: torch\n"                 // 16  a backend used as a stage
    "  - name: tape\n"                    // 17  stages[4]: duplicate name
    "    plugin: throwing\n";             // 18

TEST(ManifestTest, ReportsEveryProblemInOneErrorWithPathAndLine) {
  Result<HostManifest> m = ParseManifest(kManyProblems, "many.yaml", std::nullopt);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kInvalidArgument);
  const std::string& msg = m.status().message();
  EXPECT_THAT(msg, HasSubstr("many.yaml: 9 problems:"));
  const std::vector<std::string> expected = {
      "many.yaml:2: colour: unknown key 'colour' (known: after_grace, backend, clients, connect, discovery, "
      "heartbeat_interval_ms, heartbeat_timeout_ms, host, id, limits, listen, metrics, reconnect_grace_ms, "
      "resume_wait_ms, security, stages)",
      "many.yaml:8: stages[0].options.flush_every: option 'flush_every' expects int, got 'lots'",
      "many.yaml:9: stages[0].options.colour: unknown option 'colour' of plugin 'instruction_log' "
      "(known: append, flush_every, max_file_bytes, path)",
      "many.yaml:11: stages[1].plugin: plugin 'dispatcher_only' may not run in a worker host",
      "many.yaml:12: stages[1].options.limit: option 'limit' = 11 is out of range [1, 10]",
      "many.yaml:14: stages[2].plugin: unknown plugin 'nope' (no gt_nope.so in " + kTestPluginDir + ":",
      "many.yaml:16: stages[3].plugin: plugin 'torch' is a backend, expected a modifier",
      "many.yaml:17: stages[4].name: duplicate stage name 'tape'",
      "many.yaml:1: backend: missing backend: a worker host needs one",
  };
  for (const std::string& line : expected) EXPECT_THAT(msg, HasSubstr("\n  " + line)) << "in:\n" << msg;
}

// `plugin: null` is YAML's null, not the null backend's name: say so.
TEST(ManifestTest, ABarePluginNullIsNamedAsYamlNull) {
  Result<HostManifest> m = ParseManifest("host: worker\nbackend: {plugin: null}\n", "null.yaml", std::nullopt);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("null.yaml:2: backend.plugin: 'plugin' is YAML null, not a name"));
}

TEST(ManifestTest, ValidateManifestReturnsTheSameProblemsAsData) {
  std::vector<ManifestProblem> problems = ValidateManifest(kManyProblems, std::nullopt);
  ASSERT_EQ(problems.size(), 9u);
  struct Want {
    const char* path;
    int line;
  };
  const Want want[] = {{"colour", 2},
                       {"stages[0].options.colour", 9},
                       {"stages[0].options.flush_every", 8},
                       {"stages[1].plugin", 11},
                       {"stages[1].options.limit", 12},
                       {"stages[2].plugin", 14},
                       {"stages[3].plugin", 16},
                       {"stages[4].name", 17},
                       {"backend", 1}};
  for (const Want& w : want) {
    bool found = false;
    for (const ManifestProblem& p : problems) found = found || (p.path == w.path && p.line == w.line);
    EXPECT_TRUE(found) << "no problem at " << w.path << " line " << w.line;
  }
}

TEST(ManifestTest, DispatcherTakesNoBackend) {
  constexpr char kYaml[] =
      "host: dispatcher\n"
      "listen: tcp://127.0.0.1:5555\n"
      "backend:\n"
      "  plugin: torch\n";
  Result<HostManifest> m = ParseManifest(kYaml, "d.yaml", std::nullopt);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr("d.yaml:4: backend: a dispatcher host takes no backend (its last stage is the router)"));
}

TEST(ManifestTest, ManifestForTheOtherHostIsRejected) {
  Result<HostManifest> m = ParseManifest("host: dispatcher\n", "d.yaml", HostKind::kWorker);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("d.yaml:1: host: this manifest is for a dispatcher, not a worker"));
}

TEST(ManifestTest, YamlSyntaxErrorReportsItsLine) {
  constexpr char kYaml[] =
      "host: worker\n"
      "backend:\n"
      "  plugin: torch\n"
      "  options: {intra_op_threads: 1\n";  // unterminated flow map
  Result<HostManifest> m = ParseManifest(kYaml, "broken.yaml", std::nullopt);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("broken.yaml: 1 problem:"));
  EXPECT_THAT(m.status().message(), HasSubstr("broken.yaml:5: (root): YAML syntax error: "));
}

TEST(ManifestTest, YamlSyntaxErrorInTheMiddleReportsItsLine) {
  constexpr char kYaml[] =
      "host: worker\n"
      "id: w\n"
      "metrics: a: b\n"
      "backend:\n"
      "  plugin: torch\n";
  std::vector<ManifestProblem> problems = ValidateManifest(kYaml, std::nullopt);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].path, "");
  EXPECT_EQ(problems[0].line, 3);
  EXPECT_THAT(problems[0].message, HasSubstr("YAML syntax error: "));
}

TEST(ManifestTest, NonScalarKeyIsAProblemNotACrash) {
  constexpr char kYaml[] =
      "host: worker\n"
      "? [a, b]\n"
      ": c\n"
      "backend:\n"
      "  plugin: torch\n";
  Result<HostManifest> m = ParseManifest(kYaml, "key.yaml", std::nullopt);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("key.yaml:2: (root): unexpected YAML structure: "));
}

TEST(ManifestTest, WrongAbiPluginInAManifestIsAProblemNotACrash) {
  constexpr char kYaml[] =
      "host: dispatcher\n"
      "stages:\n"
      "  - plugin: wrong_abi\n";
  Result<HostManifest> m = ParseManifest(kYaml, "abi.yaml", std::nullopt);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr("abi.yaml:3: stages[0].plugin: " + TestPlugin("gt_wrong_abi.so") +
                        ": plugin ABI version 99 does not match host ABI version " + std::to_string(kPluginAbiVersion)));
}

// ---- Valid manifests -------------------------------------------------------

TEST(ManifestTest, ValidWorkerManifestGetsDefaults) {
  constexpr char kYaml[] =
      "host: worker\n"
      "connect: tcp://127.0.0.1:5555\n"
      "stages:\n"
      "  - name: tape\n"
      "    plugin: instruction_log\n"
      "    options: {path: /tmp/gt-test.log, flush_every: 8}\n"
      "backend:\n"
      "  plugin: torch\n";
  Result<HostManifest> m = ParseManifest(kYaml, "w.yaml", HostKind::kWorker);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->source, "w.yaml");
  EXPECT_EQ(m->host, HostKind::kWorker);
  EXPECT_EQ(m->id, "worker");
  EXPECT_EQ(m->connect, "tcp://127.0.0.1:5555");
  EXPECT_EQ(m->listen, "");
  EXPECT_EQ(m->metrics, "");
  EXPECT_EQ(m->heartbeat_interval_ms, 500);
  EXPECT_EQ(m->heartbeat_timeout_ms, 5000);

  ASSERT_EQ(m->stages.size(), 1u);
  const ManifestStage& tape = m->stages[0];
  EXPECT_EQ(tape.name, "tape");
  EXPECT_STREQ(tape.plugin.descriptor->name, "instruction_log");
  EXPECT_EQ(tape.options.all().size(), 4u);
  EXPECT_EQ(tape.options.GetString("path"), "/tmp/gt-test.log");
  EXPECT_EQ(tape.options.GetInt("flush_every"), 8);
  EXPECT_FALSE(tape.options.GetBool("append"));         // default
  EXPECT_EQ(tape.options.GetInt("max_file_bytes"), 0);  // default

  ASSERT_TRUE(m->backend.has_value());
  EXPECT_EQ(m->backend->name, "backend");
  EXPECT_STREQ(m->backend->plugin.descriptor->name, "torch");
  EXPECT_EQ(m->backend->plugin.descriptor->kind, PluginKind::kBackend);
  EXPECT_EQ(m->backend->options.GetInt("intra_op_threads"), 0);  // default
}

// gt-worker's built-in manifest: stages and options left out entirely.
TEST(ManifestTest, StagesWithoutOptionsGetDefaults) {
  Result<HostManifest> w =
      ParseManifest("host: worker\nid: worker\nbackend:\n  plugin: torch\n", "<default>", HostKind::kWorker);
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE(w->backend.has_value());
  EXPECT_EQ(w->backend->options.GetInt("intra_op_threads"), 0);

  Result<HostManifest> d =
      ParseManifest("host: dispatcher\nstages:\n  - plugin: dispatcher_only\n", "d.yaml", HostKind::kDispatcher);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->stages.size(), 1u);
  EXPECT_EQ(d->stages[0].options.GetInt("limit"), 5);
  EXPECT_FALSE(d->stages[0].options.GetBool("verbose"));
}

TEST(ManifestTest, ValidDispatcherManifestGetsDefaults) {
  constexpr char kYaml[] =
      "host: dispatcher\n"
      "id: d-1\n"
      "listen: tcp://0.0.0.0:5555\n"
      "metrics: 127.0.0.1:9100\n"
      "heartbeat_timeout_ms: 2000\n"
      "stages:\n"
      "  - plugin: dispatcher_only\n"
      "  - name: strict\n"
      "    plugin: dispatcher_only\n"
      "    options:\n"
      "      limit: 10\n"
      "      verbose: true\n";
  Result<HostManifest> m = ParseManifest(kYaml, "d.yaml", HostKind::kDispatcher);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->host, HostKind::kDispatcher);
  EXPECT_EQ(m->id, "d-1");
  EXPECT_EQ(m->listen, "tcp://0.0.0.0:5555");
  EXPECT_EQ(m->metrics, "127.0.0.1:9100");
  EXPECT_EQ(m->heartbeat_interval_ms, 500);
  EXPECT_EQ(m->heartbeat_timeout_ms, 2000);
  EXPECT_FALSE(m->backend.has_value());
  ASSERT_EQ(m->stages.size(), 2u);

  const ManifestStage& plain = m->stages[0];
  EXPECT_EQ(plain.name, "dispatcher_only");  // a stage's name defaults to its plugin's
  EXPECT_EQ(plain.plugin.path, TestPlugin("gt_dispatcher_only.so"));
  ASSERT_EQ(plain.options.all().size(), 2u);
  EXPECT_EQ(plain.options.GetInt("limit"), 5);
  EXPECT_FALSE(plain.options.GetBool("verbose"));

  const ManifestStage& strict = m->stages[1];
  EXPECT_EQ(strict.name, "strict");
  EXPECT_EQ(strict.options.GetInt("limit"), 10);
  EXPECT_TRUE(strict.options.GetBool("verbose"));
}

TEST(ManifestTest, AnOptionsEnvironmentVariableReplacesItsValue) {
  constexpr char kYaml[] = "host: dispatcher\nstages:\n  - plugin: dispatcher_only\n    options: {limit: 3}\n";
  setenv("GT_TEST_COUNTING_LIMIT", "7", 1);
  setenv("GT_TEST_COUNTING_VERBOSE", "1", 1);
  Result<HostManifest> m = ParseManifest(kYaml, "d.yaml", HostKind::kDispatcher);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->stages[0].options.GetInt("limit"), 7);
  EXPECT_TRUE(m->stages[0].options.GetBool("verbose"));
  // Parsed as the option's type and range; the problem names the variable.
  setenv("GT_TEST_COUNTING_LIMIT", "70", 1);
  Result<HostManifest> bad = ParseManifest(kYaml, "d.yaml", HostKind::kDispatcher);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("stages[0].options.limit: $GT_TEST_COUNTING_LIMIT: "));
  unsetenv("GT_TEST_COUNTING_LIMIT");
  unsetenv("GT_TEST_COUNTING_VERBOSE");
  Result<HostManifest> plain = ParseManifest(kYaml, "d.yaml", HostKind::kDispatcher);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->stages[0].options.GetInt("limit"), 3);
  EXPECT_FALSE(plain->stages[0].options.GetBool("verbose"));
}

TEST(ManifestTest, AWorkerRefusesABackendThatLacksAnOp) {
  Result<HostManifest> m = ParseManifest("host: worker\nid: w\nbackend:\n  plugin: partial_backend\n", "w.yaml",
                                         HostKind::kWorker);
  ASSERT_TRUE(m.ok()) << m.status().message();
  zmq::context_t context;
  prometheus::Registry registry;
  Result<std::unique_ptr<Worker>> worker = Worker::Create(*m, context, registry);
  ASSERT_FALSE(worker.ok());
  EXPECT_EQ(worker.status().code(), Code::kUnimplemented);
  EXPECT_THAT(worker.status().message(),
              ::testing::HasSubstr("w.yaml: backend plugin 'partial_backend' lacks ops a worker must run: matmul"));
}

TEST(ManifestTest, TheBuiltInManifestsAreTheShippedFiles) {
  const std::string dir = GT_SOURCE_DIR "/configs/";
  for (const char* file : {"embedded-dispatcher.yaml", "embedded-worker.yaml", "client-compile.yaml"}) {
    std::ifstream in(dir + file);
    std::stringstream text;
    text << in.rdbuf();
    std::optional<std::string_view> built_in = ShippedConfig(file);
    ASSERT_TRUE(built_in.has_value()) << file;
    EXPECT_EQ(*built_in, text.str()) << file << " changed since the build";
  }
  Result<HostManifest> d = LoadShippedManifest("embedded-dispatcher.yaml", HostKind::kDispatcher);
  ASSERT_TRUE(d.ok()) << d.status().message();
  std::vector<std::string> stages;
  for (const ManifestStage& s : d->stages) stages.push_back(s.name);
  EXPECT_EQ(stages, (std::vector<std::string>{"instruction_log", "sharding", "hotpath", "compile"}));
  // A stage left out is never read: its options' environment cannot break the rest.
  setenv("GT_HOTPATH_WINDOW", "abc", 1);
  Result<HostManifest> without = LoadShippedManifest("embedded-dispatcher.yaml", HostKind::kDispatcher,
                                                     [](const std::string& stage) { return stage == "sharding"; });
  unsetenv("GT_HOTPATH_WINDOW");
  ASSERT_TRUE(without.ok()) << without.status().message();
  ASSERT_EQ(without->stages.size(), 1u);
  EXPECT_EQ(without->stages[0].name, "sharding");
  Result<HostManifest> w = LoadShippedManifest("embedded-worker.yaml", HostKind::kWorker);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_STREQ(w->backend->plugin.descriptor->name, "torch");
}

TEST(ManifestTest, ShippedConfigsAreValid) {
  const std::string dir = GT_SOURCE_DIR "/configs/";
  for (const char* file : {"dispatcher.yaml", "dispatcher-logged.yaml"}) {
    Result<HostManifest> m = LoadManifestFile(dir + file, HostKind::kDispatcher);
    EXPECT_TRUE(m.ok()) << file << ": " << m.status().message();
  }
  for (const char* file : {"worker.yaml", "worker-logged.yaml"}) {
    Result<HostManifest> m = LoadManifestFile(dir + file, HostKind::kWorker);
    ASSERT_TRUE(m.ok()) << file << ": " << m.status().message();
    ASSERT_TRUE(m->backend.has_value());
    EXPECT_STREQ(m->backend->plugin.descriptor->name, "torch");
  }
  Result<HostManifest> client = LoadManifestFile(dir + "client-compile.yaml", HostKind::kClient);
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(client->stages.size(), 2u);
}

TEST(ManifestTest, AClientManifestTakesOnlyStagesThatMayRunInAClient) {
  constexpr char kYaml[] =
      "host: client\n"
      "listen: tcp://127.0.0.1:5555\n"
      "metrics: 0.0.0.0:9100\n"
      "stages:\n"
      "  - plugin: dispatcher_only\n"
      "backend:\n"
      "  plugin: torch\n";
  Result<HostManifest> m = ParseManifest(kYaml, "c.yaml", std::nullopt);
  ASSERT_FALSE(m.ok());
  const std::string& message = m.status().message();
  EXPECT_THAT(message, HasSubstr("c.yaml:2: listen: a client manifest takes only host, id, stages, not 'listen'"));
  EXPECT_THAT(message, HasSubstr("c.yaml:3: metrics: a client manifest takes only"));
  EXPECT_THAT(message, HasSubstr("stages[0].plugin: plugin 'dispatcher_only' may not run in a client host"));
  EXPECT_THAT(message, HasSubstr("c.yaml:7: backend: a client takes no backend"));
  // The two modifiers a client runs for GT_COMPILE=1 may.
  Result<HostManifest> ok = ParseManifest(
      "host: client\nstages:\n  - {name: h, plugin: hotpath}\n  - {name: c, plugin: compile}\n", "ok.yaml",
      HostKind::kClient);
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

TEST(ManifestTest, SecurityAndLimitsAreReadAndCheckedWithLines) {
  Result<HostManifest> d = ParseManifest(
      "host: dispatcher\n"
      "security: {key: k/d.key, clients: k/clients, workers: k/workers.pub}\n"
      "limits: {max_live_tensors: 10, max_inflight: 0}\n",
      "d.yaml", HostKind::kDispatcher);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->security.key, "k/d.key");
  EXPECT_EQ(d->security.client_keys, "k/clients");
  EXPECT_EQ(d->security.worker_keys, "k/workers.pub");
  EXPECT_TRUE(d->security.enabled());
  EXPECT_EQ(d->limits.max_live_tensors, 10);
  EXPECT_EQ(d->limits.max_inflight, 0);
  Result<HostManifest> defaults = ParseManifest("host: dispatcher\n", "d.yaml", HostKind::kDispatcher);
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->security.enabled());
  EXPECT_EQ(defaults->limits.max_live_tensors, 1000000);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"host: dispatcher\nsecurity:\n  key: d.key\n  clients: c\n", "d.yaml:3: security: a dispatcher with a key needs both allow-lists"},
      {"host: dispatcher\nsecurity: {clients: c, workers: w}\n", "d.yaml:2: security: missing key"},
      {"host: dispatcher\nsecurity: {insecure: maybe}\n", "d.yaml:2: security.insecure: expected true or false"},
      {"host: dispatcher\nsecurity: {key: d.key, clients: c, workers: w, insecure: true}\n", "insecure contradicts the keys"},
      {"host: dispatcher\nsecurity: {server_key: d.pub}\n", "unknown key 'server_key' (known: clients, insecure, key, workers)"},
      {"host: worker\nsecurity: {key: w.key}\nbackend: {plugin: torch}\n", "missing server_key"},
      {"host: worker\nlimits: {max_inflight: 5}\nbackend: {plugin: torch}\n", "d.yaml:2: limits: only a dispatcher enforces client limits"},
      {"host: dispatcher\nlimits: {max_live_tensors: -1}\n", "d.yaml:2: limits.max_live_tensors:"},
      {"host: dispatcher\nlimits: [1]\n", "d.yaml:2: limits: expected a map"},
  };
  for (const auto& [yaml, want] : bad) {
    Result<HostManifest> m = ParseManifest(yaml, "d.yaml", std::nullopt);
    ASSERT_FALSE(m.ok()) << yaml;
    EXPECT_THAT(m.status().message(), HasSubstr(want)) << yaml;
  }
}

// gt/settings.h: one rule for every GT_* variable. A switch takes 1/true/
// yes/on and 0/false/no/off in any case; an integer must be one, in range;
// anything else is an error naming the variable and its text; empty is unset.
TEST(SettingsTest, OneParsingRuleForEveryVariable) {
  for (const char* on : {"1", "true", "YES", "On"}) EXPECT_TRUE(*ParseSwitch("GT_X", on)) << on;
  for (const char* off : {"0", "False", "no", "OFF"}) EXPECT_FALSE(*ParseSwitch("GT_X", off)) << off;
  Result<bool> bad = ParseSwitch("GT_VERBOSE", "maybe");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "GT_VERBOSE: expected a switch (1, true, yes, on or 0, false, no, off), got 'maybe'");

  const std::optional<std::string> workers = EnvironmentText("GT_WORKERS"), compile = EnvironmentText("GT_COMPILE");
  setenv("GT_WORKERS", "", 1);
  EXPECT_EQ(*IntSetting("GT_WORKERS"), 2) << "empty is unset: the default";
  for (const char* wrong : {"two", "0", "3x", "99999"}) {
    setenv("GT_WORKERS", wrong, 1);
    Result<int64_t> n = IntSetting("GT_WORKERS");
    ASSERT_FALSE(n.ok()) << wrong;
    EXPECT_THAT(n.status().message(), HasSubstr(std::string("GT_WORKERS: expected an integer from 1 to ")));
    EXPECT_THAT(n.status().message(), HasSubstr(std::string("got '") + wrong + "'"));
    EXPECT_FALSE(CheckSettings().ok()) << "the first op and a service's start fail on it";
  }
  unsetenv("GT_WORKERS");
  setenv("GT_COMPILE", "true", 1);  // on, as for every switch (it used to mean eager)
  EXPECT_TRUE(*CompileStagesFromEnv());
  EXPECT_FALSE(*CompileScopesEager());
  setenv("GT_COMPILE", "off", 1);
  EXPECT_FALSE(*CompileStagesFromEnv());
  EXPECT_TRUE(*CompileScopesEager());
  unsetenv("GT_COMPILE");
  EXPECT_TRUE(CheckSettings().ok());
  if (workers) setenv("GT_WORKERS", workers->c_str(), 1);
  if (compile) setenv("GT_COMPILE", compile->c_str(), 1);
  for (const SettingSpec& s : AllSettings()) EXPECT_EQ(FindSetting(s.name), &s) << s.name;
}

}  // namespace
}  // namespace gt
