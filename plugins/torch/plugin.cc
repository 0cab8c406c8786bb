// Registration of the LibTorch backend: its option schema, its descriptor and
// the factory that turns validated options into a TorchBackend. The backend
// itself lives in torch_backend.cc.
#include <iterator>
#include <memory>
#include <string>

#include "gt/plugin.h"
#include "torch_backend.h"

namespace gt::torch_backend {
namespace {

// Each default is written here and nowhere else.
constexpr OptionSpec kOptions[] = {
    {"intra_op_threads", OptionType::kInt, "0", "threads",
     "LibTorch intra-op thread pool size (process-wide); 0 keeps LibTorch's default", 0, 256},
};

Result<std::unique_ptr<Backend>> CreateBackend(const StageContext& context) {
  if (context.options == nullptr) return Internal("torch backend created without options");
  const TorchBackendOptions options{context.options->GetInt("intra_op_threads")};
  try {
    return std::unique_ptr<Backend>(std::make_unique<TorchBackend>(options));
  } catch (const std::exception& e) {  // exceptions never leave the plugin
    return PluginError(std::string("torch backend: ") + e.what());
  }
}

const PluginDescriptor kDescriptor = {
    .kind = PluginKind::kBackend,
    .name = "torch",
    .version = "0.1.0",
    .description = "Executes gt instructions on CPU tensors with LibTorch (ATen)",
    .hosts = HostBit(HostKind::kWorker),
    .options = kOptions,
    .option_count = std::size(kOptions),
    .create_stage = nullptr,
    .create_backend = &CreateBackend,
};

}  // namespace
}  // namespace gt::torch_backend

GT_PLUGIN(gt::torch_backend::kDescriptor)
