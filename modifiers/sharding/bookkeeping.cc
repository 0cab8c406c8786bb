#include "bookkeeping.h"

#include <cstdint>

namespace gt::sharding {

std::vector<int> Workers::Of(const Config& config) const { return config.workers.empty() ? live_ : config.workers; }

int Workers::DefaultFor(Client& c, int hint) {
  if (c.default_worker >= 0 && Contains(live_, c.default_worker)) return c.default_worker;
  c.default_worker = hint >= 0 && Contains(live_, hint) ? hint : live_[next_default_++ % live_.size()];
  return c.default_worker;
}

Result<std::vector<int>> LiveWorkerList(const std::vector<int64_t>& values, size_t from, const Workers& workers,
                                        const std::string& where) {
  std::vector<int> out;
  for (size_t i = from; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] > INT32_MAX || !workers.IsLive(static_cast<int>(values[i])))
      return InvalidArgument(where + "worker " + std::to_string(values[i]) + " is not a live worker (live: " +
                             WorkerList(workers.live()) + ")");
    if (Contains(out, static_cast<int>(values[i])))
      return InvalidArgument(where + "worker " + std::to_string(values[i]) + " is named twice");
    out.push_back(static_cast<int>(values[i]));
  }
  return out;
}

Status CheckConfig(const std::string& signal, const Config& config, const Workers& workers, const Shape* shape) {
  const std::string where = "signal '" + signal + "': ";
  for (size_t i = 0; i < config.workers.size(); ++i)
    if (!workers.IsLive(config.workers[i]))
      return InvalidArgument(where + "shard.workers[" + std::to_string(i) + "]: worker index " +
                             std::to_string(config.workers[i]) + " is not a live worker (live: " +
                             WorkerList(workers.live()) + ")");
  if (shape && !config.mesh_shape.empty() && !shape->empty()) {
    int64_t cut = -1;
    for (size_t a = 0; a < config.mesh_axes.size(); ++a) {
      if (!config.mesh_axes[a].shard()) continue;
      const int64_t rank = static_cast<int64_t>(shape->size()), dim = config.mesh_axes[a].dim;
      const std::string field = where + "placements[" + std::to_string(a) + "]: Shard(" + std::to_string(dim) + ")";
      if (dim < -rank || dim >= rank)
        return InvalidArgument(field + " is out of range for a tensor of shape " + ShapeToString(*shape));
      const int64_t d = dim < 0 ? dim + rank : dim;
      if (d == cut) return Status::Ok();  // both axes cut it: one split over the flattened mesh
      cut = d;
    }
  }
  if (shape && config.sharded && !shape->empty()) {  // a scalar is placed whole
    const int64_t rank = static_cast<int64_t>(shape->size());
    if (config.axis < -rank || config.axis >= rank)
      return InvalidArgument(where + "shard.axis: " + std::to_string(config.axis) +
                             " is out of range for a tensor of shape " + ShapeToString(*shape));
  }
  return Status::Ok();
}

}  // namespace gt::sharding
