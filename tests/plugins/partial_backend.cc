// Test plugin "partial_backend": a backend that says it lacks matmul (and
// executes nothing). A worker must refuse to start with it, naming the op.
#include <iterator>
#include <memory>

#include "gt/plugin.h"

namespace gt::test_plugins {
namespace {

class PartialBackend final : public Backend {
 public:
  Status Execute(const Instruction& inst, ReplySink&) override {
    return Unimplemented(std::string(OpName(inst.op)) + " is not implemented by partial_backend");
  }
  bool Supports(Op op) const override { return op != Op::kMatmul; }
  BackendStats Stats() const override { return {}; }
};

Result<std::unique_ptr<Backend>> CreateBackend(const StageContext&) {
  return std::unique_ptr<Backend>(std::make_unique<PartialBackend>());
}

const PluginDescriptor kDescriptor = {
    .kind = PluginKind::kBackend,
    .name = "partial_backend",
    .version = "0.0.1",
    .description = "Test plugin: a backend that lacks matmul",
    .hosts = HostBit(HostKind::kWorker),
    .options = nullptr,
    .option_count = 0,
    .create_stage = nullptr,
    .create_backend = &CreateBackend,
};

}  // namespace
}  // namespace gt::test_plugins

GT_PLUGIN(gt::test_plugins::kDescriptor)
