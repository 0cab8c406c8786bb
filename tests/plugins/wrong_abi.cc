// Test plugin: a well-formed modifier built against a different plugin ABI.
//
// tests/manifest_tests.cmake compiles this file with GT_PLUGIN_ABI_VERSION=99,
// so gt_plugin_abi_version() returns 99 and every host (ABI 1) must refuse the
// file, naming it and both versions, without reading the descriptor or
// running the factory.
#include <iterator>
#include <memory>

#include "gt/plugin.h"

static_assert(GT_PLUGIN_ABI_VERSION == 99, "build this file with GT_PLUGIN_ABI_VERSION=99");

namespace gt::test_plugins {
namespace {

class PassThrough final : public Stage {
 public:
  Status Process(Instruction&& inst, Emitter& out) override {
    out.Emit(std::move(inst));
    return Status::Ok();
  }
};

Result<std::unique_ptr<Stage>> CreateStage(const StageContext&) {
  return std::unique_ptr<Stage>(std::make_unique<PassThrough>());
}

const PluginDescriptor kDescriptor = {
    .kind = PluginKind::kModifier,
    .name = "wrong_abi",
    .version = "0.0.1",
    .description = "Test plugin built for plugin ABI 99; every host must refuse it",
    .hosts = kAnyHost,
    .options = nullptr,
    .option_count = 0,
    .create_stage = &CreateStage,
    .create_backend = nullptr,
};

}  // namespace
}  // namespace gt::test_plugins

GT_PLUGIN(gt::test_plugins::kDescriptor)
