// Registration of the instruction_log modifier: its descriptor, option schema
// and factory. The runtime is in instruction_log.{h,cc}; README.md documents
// both for users.
#include "gt/plugin.h"

#include <iterator>

#include "instruction_log.h"

namespace gt::instruction_log {
namespace {

// The one place each option's type, default, unit, doc and range are written.
constexpr OptionSpec kOptions[] = {
    {kOptionPath, OptionType::kString, "", "", "log file (this or $GT_INSTRUCTION_LOG must be set)", 0, 0,
     kPathEnvVar},
    {kOptionAppend, OptionType::kBool, "false", "",
     "append to an existing file instead of truncating it on open", 0, 0},
    {kOptionFlushEvery, OptionType::kInt, "256", "lines",
     "flush after this many lines even mid-batch (batches always flush at their end)", 1, 1e6},
    {kOptionMaxFileBytes, OptionType::kInt, "0", "bytes",
     "rotate to <path>.1 before the file would exceed this; 0 = unlimited", 0, 1e12},
};

Result<std::unique_ptr<Stage>> CreateStage(const StageContext& context) {
  return InstructionLogStage::Create(context);
}

const PluginDescriptor kDescriptor = {
    PluginKind::kModifier,
    "instruction_log",
    "0.1.0",
    "Writes one line per instruction to a file (tape dump) and passes it on unchanged",
    kEveryHost,
    kOptions,
    std::size(kOptions),
    &CreateStage,
    nullptr,
};

}  // namespace
}  // namespace gt::instruction_log

GT_PLUGIN(gt::instruction_log::kDescriptor)
