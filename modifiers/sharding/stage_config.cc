// The sharding stage's signal configs (kConfigure, gt/op_attrs.h
// ConfigureSpec): checked once here into a Config (bookkeeping.h).
#include <algorithm>
#include <string>

#include "gt/op_attrs.h"
#include "sharding_stage.h"

namespace gt::sharding {

namespace {

// ConfigureSpec::mesh into `config`: {rows, columns, kind_0, dim_0, kind_1,
// dim_1} over as many distinct workers.
Status ReadMeshConfig(const ConfigureSpec& spec, Config& config) {
  const std::string where = "signal '" + spec.signal + "': mesh: ";
  const std::vector<int64_t>& m = spec.mesh;
  if (m.size() != 6 || m[0] < 1 || m[1] < 1 || m[0] > (1 << 16) || m[1] > (1 << 16) ||
      static_cast<size_t>(m[0] * m[1]) != config.workers.size())
    return InvalidArgument(where + "expected {rows, columns, kind_0, dim_0, kind_1, dim_1} over rows * columns workers");
  if (config.sharded || config.replicated) return InvalidArgument(where + "excludes shard and replicated");
  for (size_t i = 0; i < config.workers.size(); ++i)
    if (std::find(config.workers.begin(), config.workers.begin() + static_cast<std::ptrdiff_t>(i), config.workers[i]) !=
        config.workers.begin() + static_cast<std::ptrdiff_t>(i))
      return InvalidArgument(where + "worker " + std::to_string(config.workers[i]) + " is named twice");
  config.mesh_shape = {m[0], m[1]};
  for (size_t a = 0; a < 2; ++a) {
    const int64_t kind = m[2 + 2 * a], dim = m[3 + 2 * a];
    if (kind == 2) {
      config.mesh_axes.push_back(MeshAxis{});
    } else if (kind == 1 && dim > -(1 << 20) && dim < (1 << 20)) {
      config.mesh_axes.push_back(MeshAxis{MeshAxis::Kind::kShard, dim});
    } else {
      return InvalidArgument(where + "axis " + std::to_string(a) + ": expected kind 1 (Shard, with a dim) or 2 (Replicate)");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ShardingStage::Configure(Client& c, const Instruction& inst) {
  if (inst.signal.empty()) return InvalidArgument("configure: no signal name");
  ConfigureSpec spec = ReadConfigure(inst);
  if (spec.forget) {
    c.configs.erase(spec.signal);
    return Status::Ok();
  }
  Config config;
  config.sharded = spec.shard_axis.has_value();
  if (config.sharded) config.axis = *spec.shard_axis;
  for (int64_t w : spec.workers) {
    if (w < 0 || w > 1 << 20)
      return InvalidArgument("signal '" + spec.signal + "': shard.workers: bad worker index " + std::to_string(w));
    config.workers.push_back(static_cast<int>(w));
  }
  config.replicated = spec.replicated;
  if (!spec.mesh.empty()) {
    if (Status st = ReadMeshConfig(spec, config); !st.ok()) return st;
  }
  config.compile = spec.compile;
  config.backward = std::move(spec.backward);
  c.configs[spec.signal] = std::move(config);
  c.placing = true;  // from now on its tensors get records (older ones stay without)
  return Status::Ok();
}

}  // namespace gt::sharding
