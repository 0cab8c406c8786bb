// Registration of the hotpath modifier: option schema, descriptor, factory.
// The runtime is in hotpath.{h,cc}; README.md documents both.
#include <iterator>

#include "gt/plugin.h"
#include "hotpath.h"

namespace gt::hotpath {
namespace {

// The one place each option's type, default, unit, doc and range are written.
constexpr OptionSpec kOptions[] = {
    {kOptionWindow, OptionType::kInt, "4096", "instructions", "history in which repetitions are counted", 1, 1e9,
     kEnvWindow},
    {kOptionThreshold, OptionType::kInt, "2", "occurrences", "occurrences within the window that make a sequence hot",
     1, 1e6, kEnvThreshold},
    {kOptionMinLength, OptionType::kInt, "2", "instructions", "shortest sequence worth marking", 1, 1e6,
     kEnvMinLength},
    {kOptionMaxLength, OptionType::kInt, "1024", "instructions", "longest sequence; longer runs are cut", 1, 1e6,
     kEnvMaxLength},
};

Result<std::unique_ptr<Stage>> CreateStage(const StageContext& context) { return HotpathStage::Create(context); }

const PluginDescriptor kDescriptor = {
    .kind = PluginKind::kModifier,
    .name = "hotpath",
    .version = "0.1.0",
    .description = "Finds repeated instruction sequences and marks each hot occurrence with hot_start/hot_end",
    .hosts = kEveryHost,
    .options = kOptions,
    .option_count = std::size(kOptions),
    .create_stage = &CreateStage,
    .create_backend = nullptr,
};

}  // namespace
}  // namespace gt::hotpath

GT_PLUGIN(gt::hotpath::kDescriptor)
