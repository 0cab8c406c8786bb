// Registration of the sharding modifier: descriptor, option schema, factory.
// The runtime is in stage.h and the files sharding.h lists; README.md
// documents it for users.
#include <iterator>

#include "gt/plugin.h"
#include "rendezvous.h"
#include "sharding.h"
#include "sharding_stage.h"

namespace gt::sharding {
namespace {

// The one place each option's type, default, unit, doc and range are written.
constexpr OptionSpec kOptions[] = {
    {kOptionRendezvousHost, OptionType::kString, "", "",
     "address the collective rendezvous store binds and is announced at; workers connect to it. Empty: the host "
     "of the dispatcher's listen endpoint (a wildcard one: the address each worker reached the dispatcher at; "
     "inproc: 127.0.0.1)", 0, 0},
    {kOptionRendezvousPort, OptionType::kInt, "0", "port", "port of the rendezvous store; 0 picks a free one", 0, 65535},
    {kOptionExplain, OptionType::kBool, "false", "",
     "log each op's input placements, output placement and collectives to stderr", 0, 0, "GT_EXPLAIN"},
    {kOptionAutoShard, OptionType::kBool, "false", "",
     "tensors created outside any configured scope are sharded on axis 0 over every live worker when that size "
     "divides evenly, else replicated", 0, 0, "GT_AUTO_SHARD"},
    {kOptionCheckpointRoot, OptionType::kString, "/tmp/gt-checkpoints", "",
     "the directory workers write and read distributed checkpoints under (gt.distributed.checkpoint); a "
     "checkpoint_id outside it is refused. Every worker must reach it (a shared filesystem across machines). "
     "Empty: checkpoints are off", 0, 0, "GT_CHECKPOINT_ROOT"},
};

Result<std::unique_ptr<Stage>> CreateStage(const StageContext& context) {
  return ShardingStage::Create(context, &StartStore);
}

const PluginDescriptor kDescriptor = {
    PluginKind::kModifier,
    "sharding",
    "0.1.0",
    "Places tensors by the clients' signal configs and expands ops into per-worker instructions and collectives",
    HostBit(HostKind::kDispatcher),
    kOptions,
    std::size(kOptions),
    &CreateStage,
    nullptr,
};

}  // namespace
}  // namespace gt::sharding

GT_PLUGIN(gt::sharding::kDescriptor)
