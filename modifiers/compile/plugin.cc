// Registration of the compile modifier: option schema, descriptor, factory.
// The runtime is in compile.{h,cc}; README.md documents both.
#include <iterator>

#include "compile.h"
#include "gt/plugin.h"

namespace gt::compile {
namespace {

// The one place each option's type, default, unit, doc and range are written.
constexpr OptionSpec kOptions[] = {
    {kOptionBatchSize, OptionType::kInt, "1", "instructions",
     "1: compile only marked sequences; N > 1: also group unmarked runs of up to N instructions into units", 1,
     1e6, kEnvBatchSize},
};

Result<std::unique_ptr<Stage>> CreateStage(const StageContext& context) { return CompileStage::Create(context); }

const PluginDescriptor kDescriptor = {
    .kind = PluginKind::kModifier,
    .name = "compile",
    .version = "0.1.0",
    .description = "Turns marked (hot) sequences into compiled units defined once and replayed by one run_unit",
    .hosts = kEveryHost,
    .options = kOptions,
    .option_count = std::size(kOptions),
    .create_stage = &CreateStage,
    .create_backend = nullptr,
};

}  // namespace
}  // namespace gt::compile

GT_PLUGIN(gt::compile::kDescriptor)
