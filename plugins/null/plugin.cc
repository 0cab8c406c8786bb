// Registration of the null backend (null_backend.h): no options, a
// descriptor, and the factory. A worker loads it from its manifest:
//   backend: {plugin: null_backend}
// (not "null": unquoted, YAML reads that as no value).
#include <memory>

#include "gt/plugin.h"
#include "null_backend.h"

namespace gt::null_backend {
namespace {

Result<std::unique_ptr<Backend>> CreateBackend(const StageContext&) {
  return std::unique_ptr<Backend>(std::make_unique<NullBackend>());
}

const PluginDescriptor kDescriptor = {
    .kind = PluginKind::kBackend,
    .name = "null_backend",
    .version = "0.1.0",
    .description = "Executes nothing: tracks shapes and answers fetches with zeros (dispatcher benchmarks)",
    .hosts = HostBit(HostKind::kWorker),
    .options = nullptr,
    .option_count = 0,
    .create_stage = nullptr,
    .create_backend = &CreateBackend,
};

}  // namespace
}  // namespace gt::null_backend

GT_PLUGIN(gt::null_backend::kDescriptor)
