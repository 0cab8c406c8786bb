// Plugin loading and a misbehaving stage in a real pipeline, against the
// test plugins in GT_TEST_PLUGIN_DIR (manifest_test_support.h): ABI
// refusals naming the file and both versions, libraries that are not
// plugins, the search path, listings that survive bad plugins, and a
// throwing stage that becomes a plugin error while the pipeline goes on.
// Part of manifest_test.
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

// ---- Plugin loading --------------------------------------------------------

TEST(PluginLoaderTest, SearchPathStartsWithGtPluginPath) {
  std::vector<std::string> path = PluginSearchPath();
  ASSERT_GE(path.size(), 3u);
  EXPECT_EQ(path[0], kTestPluginDir);
}

TEST(PluginLoaderTest, WrongAbiIsRefusedNamingFileAndBothVersions) {
  const std::string file = TestPlugin("gt_wrong_abi.so");
  Result<LoadedPlugin> p = LoadPluginFile(file);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kPluginError);
  EXPECT_EQ(p.status().message(), file + ": plugin ABI version 99 does not match host ABI version " + std::to_string(kPluginAbiVersion));
  // The same refusal the second time (failures are not cached as successes).
  Result<LoadedPlugin> again = LoadPluginFile(file);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.status().message(), HasSubstr("plugin ABI version 99 does not match host ABI version " + std::to_string(kPluginAbiVersion)));
  Result<LoadedPlugin> by_name = FindPlugin("wrong_abi");
  ASSERT_FALSE(by_name.ok());
  EXPECT_THAT(by_name.status().message(), HasSubstr("plugin ABI version 99 does not match host ABI version " + std::to_string(kPluginAbiVersion)));
}

TEST(PluginLoaderTest, LibraryWithoutGtSymbolsIsNotAPlugin) {
  const std::string file = TestPlugin("gt_not_a_plugin.so");
  Result<LoadedPlugin> p = LoadPluginFile(file);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr(file));
  EXPECT_THAT(p.status().message(), HasSubstr("not a gt plugin"));
}

TEST(PluginLoaderTest, MissingFileFails) {
  const std::string file = TestPlugin("gt_does_not_exist.so");
  Result<LoadedPlugin> p = LoadPluginFile(file);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kNotFound);
  EXPECT_THAT(p.status().message(), HasSubstr(file));
  EXPECT_THAT(p.status().message(), HasSubstr("no such file"));
}

TEST(PluginLoaderTest, UnknownPluginListsTheSearchPath) {
  Result<LoadedPlugin> p = FindPlugin("nope");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kNotFound);
  const std::string& msg = p.status().message();
  EXPECT_THAT(msg, HasSubstr("unknown plugin 'nope'"));
  EXPECT_THAT(msg, HasSubstr("gt_nope.so"));
  for (const std::string& dir : PluginSearchPath()) EXPECT_THAT(msg, HasSubstr(dir));
}

TEST(PluginLoaderTest, ValidTestPluginsLoad) {
  Result<LoadedPlugin> p = FindPlugin("dispatcher_only");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->descriptor->kind, PluginKind::kModifier);
  EXPECT_EQ(p->descriptor->hosts, HostBit(HostKind::kDispatcher));
  ASSERT_EQ(p->descriptor->option_count, 2u);
  EXPECT_STREQ(p->descriptor->options[0].name, "limit");
  EXPECT_STREQ(p->descriptor->options[1].name, "verbose");
  Result<LoadedPlugin> t = FindPlugin("throwing");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->descriptor->hosts, kEveryHost);
}

TEST(PluginLoaderTest, ListingSurvivesBadPlugins) {
  bool saw_wrong_abi = false, saw_not_a_plugin = false, saw_torch = false, saw_throwing = false;
  for (const PluginListing& l : ListPlugins()) {
    if (l.path == TestPlugin("gt_wrong_abi.so")) {
      saw_wrong_abi = true;
      EXPECT_FALSE(l.plugin.ok());
    } else if (l.path == TestPlugin("gt_not_a_plugin.so")) {
      saw_not_a_plugin = true;
      EXPECT_FALSE(l.plugin.ok());
    } else if (l.plugin.ok()) {
      saw_torch = saw_torch || std::string(l.plugin->descriptor->name) == "torch";
      saw_throwing = saw_throwing || std::string(l.plugin->descriptor->name) == "throwing";
    }
  }
  EXPECT_TRUE(saw_wrong_abi);
  EXPECT_TRUE(saw_not_a_plugin);
  EXPECT_TRUE(saw_torch);
  EXPECT_TRUE(saw_throwing);
}

// ---- A throwing stage in a real pipeline -----------------------------------

class RecordingTerminal final : public Terminal {
 public:
  Status Accept(Instruction inst) override {
    accepted.push_back(std::move(inst));
    return Status::Ok();
  }
  std::vector<Instruction> accepted;
};

struct RecordedError {
  OpRef ref;
  Status status;
};

Instruction MakeInstruction(Op op, uint64_t seq, TensorId result, std::vector<TensorId> operands) {
  Instruction inst;
  inst.op = op;
  inst.client = 7;
  inst.seq = seq;
  inst.results = {result};
  inst.operands = std::move(operands);
  return inst;
}

// The value of counter `family`{stage, kind}; nullopt when there is no such series.
std::optional<double> CounterValue(prometheus::Registry& registry, const std::string& family,
                                   const std::string& stage, const std::string& kind) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != family) continue;
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

TEST(PipelineTest, ThrowingStageBecomesPluginErrorAndThePipelineGoesOn) {
  constexpr char kYaml[] =
      "host: dispatcher\n"
      "id: d-test\n"
      "stages:\n"
      "  - name: boom\n"
      "    plugin: throwing\n";
  Result<HostManifest> manifest = ParseManifest(kYaml, "pipeline.yaml", HostKind::kDispatcher);
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();

  prometheus::Registry registry;
  HostMetrics metrics(HostKind::kDispatcher, manifest->id, registry);
  Result<std::unique_ptr<Pipeline>> built = Pipeline::Build(*manifest, metrics, registry);
  ASSERT_TRUE(built.ok()) << built.status().message();
  Pipeline& pipeline = **built;
  ASSERT_EQ(pipeline.stage_count(), 1u);

  RecordingTerminal terminal;
  std::vector<RecordedError> errors;
  pipeline.SetTerminal(&terminal, "router");
  pipeline.SetErrorSink([&errors](const OpRef& ref, const Status& status) { errors.push_back({ref, status}); });

  pipeline.Push(MakeInstruction(Op::kAdd, 1, 3, {1, 2}));
  pipeline.Push(MakeInstruction(Op::kNeg, 2, 4, {3}));
  pipeline.Push(MakeInstruction(Op::kRelu, 3, 5, {3}));
  pipeline.Push(MakeInstruction(Op::kSum, 4, 6, {5}));
  pipeline.EndBatch();

  // Everything but the neg went through, in order.
  ASSERT_EQ(terminal.accepted.size(), 3u);
  EXPECT_EQ(terminal.accepted[0].seq, 1u);
  EXPECT_EQ(terminal.accepted[0].op, Op::kAdd);
  EXPECT_EQ(terminal.accepted[1].seq, 3u);
  EXPECT_EQ(terminal.accepted[1].op, Op::kRelu);
  EXPECT_EQ(terminal.accepted[2].seq, 4u);
  EXPECT_EQ(terminal.accepted[2].op, Op::kSum);

  // The neg became exactly one error, about that instruction.
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ref.client, 7u);
  EXPECT_EQ(errors[0].ref.seq, 2u);
  EXPECT_EQ(errors[0].ref.op, Op::kNeg);
  EXPECT_EQ(errors[0].status.code(), Code::kPluginError);
  EXPECT_THAT(errors[0].status.message(), HasSubstr("stage 'boom' threw: throwing: refusing neg #2"));

  EXPECT_EQ(CounterValue(registry, "gt_stage_errors_total", "boom", "plugin_error"), 1.0);
  EXPECT_EQ(CounterValue(registry, "gt_stage_errors_total", "boom", "invalid_argument"), 0.0);
  EXPECT_EQ(CounterValue(registry, "gt_stage_errors_total", "router", "plugin_error"), 0.0);

  // A second neg later in the stream fails the same way; the rest still flows.
  pipeline.Push(MakeInstruction(Op::kNeg, 5, 7, {6}));
  pipeline.Push(MakeInstruction(Op::kExp, 6, 8, {6}));
  pipeline.EndBatch();
  EXPECT_EQ(terminal.accepted.size(), 4u);
  EXPECT_EQ(terminal.accepted.back().seq, 6u);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[1].ref.seq, 5u);
  EXPECT_EQ(CounterValue(registry, "gt_stage_errors_total", "boom", "plugin_error"), 2.0);
}

}  // namespace
}  // namespace gt
