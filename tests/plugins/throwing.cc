// Test plugin "throwing": a modifier whose Process() throws
// std::runtime_error for every kNeg instruction and passes every other
// instruction on unchanged. It breaks the stage contract on purpose, so tests
// can check that the host turns the exception into a kPluginError for that
// instruction only and keeps the pipeline running.
#include <memory>
#include <stdexcept>
#include <string>

#include "gt/plugin.h"

namespace gt::test_plugins {
namespace {

class ThrowingStage final : public Stage {
 public:
  Status Process(Instruction&& inst, Emitter& out) override {
    if (inst.op == Op::kNeg) throw std::runtime_error("throwing: refusing neg #" + std::to_string(inst.seq));
    out.Emit(std::move(inst));
    return Status::Ok();
  }
};

Result<std::unique_ptr<Stage>> CreateStage(const StageContext&) {
  return std::unique_ptr<Stage>(std::make_unique<ThrowingStage>());
}

const PluginDescriptor kDescriptor = {
    .kind = PluginKind::kModifier,
    .name = "throwing",
    .version = "0.0.1",
    .description = "Test plugin: throws std::runtime_error on every neg, passes everything else",
    .hosts = kEveryHost,
    .options = nullptr,
    .option_count = 0,
    .create_stage = &CreateStage,
    .create_backend = nullptr,
};

}  // namespace
}  // namespace gt::test_plugins

GT_PLUGIN(gt::test_plugins::kDescriptor)
