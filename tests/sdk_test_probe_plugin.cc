// Test plugin "probe" for tests/sdk_test_safety.cc: a pass-through modifier
// that tells the test what the host did with it, through environment
// variables of the process it is loaded into:
//   GT_SDK_PROBE_DESCRIPTOR_READ  set to the plugin's name when the host
//                                 calls gt_plugin_descriptor()
//   GT_SDK_PROBE_FACTORY_SAW      set by the factory to the options it got,
//                                 "mode=pass limit=5 ratio=0.5 verbose=false"
// Option `mode` makes it misbehave on purpose:
//   pass             pass every instruction on (the default)
//   fail_factory     the factory returns InvalidArgument
//   throw_factory    the factory throws std::runtime_error
//   throw_end_batch  EndBatch() throws an int (not a std::exception)
//
// tests/sdk_tests.cmake builds this file several times (gt_add_sdk_probe),
// each as its own plugin name (GT_SDK_PROBE_NAME) with one of:
//   GT_PLUGIN_ABI_VERSION=99        built for another plugin ABI
//   GT_SDK_PROBE_BAD_DEFAULT        option `limit` defaults to 11, outside [1, 10]
//   GT_SDK_PROBE_DUPLICATE_OPTION   option `limit` declared twice
//   GT_SDK_PROBE_EMPTY_RANGE        option `ratio` has min 1 > max 0
#include <cstdlib>
#include <iterator>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "gt/plugin.h"

#ifndef GT_SDK_PROBE_NAME
#error "build with GT_SDK_PROBE_NAME=\"<plugin name>\""
#endif

namespace gt::sdk_test {
namespace {

#ifdef GT_SDK_PROBE_BAD_DEFAULT
constexpr const char* kLimitDefault = "11";
#else
constexpr const char* kLimitDefault = "5";
#endif
#ifdef GT_SDK_PROBE_EMPTY_RANGE
constexpr double kRatioMin = 1, kRatioMax = 0;
#else
constexpr double kRatioMin = 0, kRatioMax = 1;
#endif

constexpr OptionSpec kOptions[] = {
    {"mode", OptionType::kString, "pass", "", "pass | fail_factory | throw_factory | throw_end_batch", 0, 0},
    {"limit", OptionType::kInt, kLimitDefault, "instructions", "an int option with a range", 1, 10},
    {"ratio", OptionType::kDouble, "0.5", "", "a double option with a range", kRatioMin, kRatioMax},
    {"verbose", OptionType::kBool, "false", "", "a bool option", 0, 0},
#ifdef GT_SDK_PROBE_DUPLICATE_OPTION
    {"limit", OptionType::kInt, "5", "", "the same name again", 1, 10},
#endif
};

class ProbeStage final : public Stage {
 public:
  explicit ProbeStage(std::string mode) : mode_(std::move(mode)) {}

  Status Process(Instruction&& inst, Emitter& out) override {
    out.Emit(std::move(inst));
    return Status::Ok();
  }

  Status EndBatch(Emitter&) override {
    if (mode_ == "throw_end_batch") throw 7;  // deliberately not a std::exception
    return Status::Ok();
  }

 private:
  const std::string mode_;
};

Result<std::unique_ptr<Stage>> CreateStage(const StageContext& context) {
  const OptionValues& o = *context.options;
  std::ostringstream saw;
  saw << "mode=" << o.GetString("mode") << " limit=" << o.GetInt("limit") << " ratio=" << o.GetDouble("ratio")
      << " verbose=" << (o.GetBool("verbose") ? "true" : "false");
  setenv("GT_SDK_PROBE_FACTORY_SAW", saw.str().c_str(), 1);
  const std::string& mode = o.GetString("mode");
  if (mode == "fail_factory") return InvalidArgument("probe: asked to fail (mode=fail_factory)");
  if (mode == "throw_factory") throw std::runtime_error("probe: thrown from the factory");
  if (mode != "pass" && mode != "throw_end_batch") return InvalidArgument("probe: unknown mode '" + mode + "'");
  return std::unique_ptr<Stage>(std::make_unique<ProbeStage>(mode));
}

const PluginDescriptor kDescriptor = {
    .kind = PluginKind::kModifier,
    .name = GT_SDK_PROBE_NAME,
    .version = "1.2.3",
    .description = "SDK test plugin: reports what the host did with it",
    .hosts = kAnyHost,
    .options = kOptions,
    .option_count = std::size(kOptions),
    .create_stage = &CreateStage,
    .create_backend = nullptr,
};

}  // namespace
}  // namespace gt::sdk_test

// GT_PLUGIN() spelled out, so that reading the descriptor leaves a trace.
GT_PLUGIN_EXPORT uint32_t gt_plugin_abi_version() { return ::gt::kPluginAbiVersion; }
GT_PLUGIN_EXPORT const ::gt::PluginDescriptor* gt_plugin_descriptor() {
  setenv("GT_SDK_PROBE_DESCRIPTOR_READ", GT_SDK_PROBE_NAME, 1);
  return &gt::sdk_test::kDescriptor;
}
