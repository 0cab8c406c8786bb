// Test plugin "dispatcher_only": a modifier that may run only in a
// dispatcher (hosts = HostBit(kDispatcher)) and declares one option of each
// kind the manifest tests need: an int with a range and a bool, each with an
// environment override. At run time
// it passes every instruction on and counts them; nothing reads the count.
#include <cstdint>
#include <iterator>
#include <memory>

#include "gt/plugin.h"

namespace gt::test_plugins {
namespace {

// The one place these options' defaults and ranges are written.
constexpr OptionSpec kOptions[] = {
    {"limit", OptionType::kInt, "5", "instructions", "a bounded int option for the manifest tests", 1, 10,
     "GT_TEST_COUNTING_LIMIT"},
    {"verbose", OptionType::kBool, "false", "", "a bool option for the manifest tests", 0, 0,
     "GT_TEST_COUNTING_VERBOSE"},
};

class CountingStage final : public Stage {
 public:
  Status Process(Instruction&& inst, Emitter& out) override {
    ++seen_;
    out.Emit(std::move(inst));
    return Status::Ok();
  }

 private:
  uint64_t seen_ = 0;
};

Result<std::unique_ptr<Stage>> CreateStage(const StageContext&) {
  return std::unique_ptr<Stage>(std::make_unique<CountingStage>());
}

const PluginDescriptor kDescriptor = {
    .kind = PluginKind::kModifier,
    .name = "dispatcher_only",
    .version = "0.0.1",
    .description = "Test plugin: a counting pass-through allowed only in a dispatcher",
    .hosts = HostBit(HostKind::kDispatcher),
    .options = kOptions,
    .option_count = std::size(kOptions),
    .create_stage = &CreateStage,
    .create_backend = nullptr,
};

}  // namespace
}  // namespace gt::test_plugins

GT_PLUGIN(gt::test_plugins::kDescriptor)
