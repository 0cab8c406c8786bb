#include "placement.h"

#include <algorithm>

namespace gt::sharding {

std::string WorkerList(const std::vector<int>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string TensorName(TensorId id) { return "%" + std::to_string(id); }

bool Contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

bool SameLayout(const Placement& a, const Placement& b) {
  if (a.kind != b.kind || a.workers != b.workers) return false;
  if (a.mesh()) return a.mesh_shape == b.mesh_shape && a.mesh_axes == b.mesh_axes;
  return !a.sharded() || (a.axis == b.axis && a.sizes == b.sizes);
}

std::string Placement::ToString() const {
  switch (kind) {
    case Kind::kWhole: return "whole on " + std::to_string(workers.empty() ? -1 : workers[0]);
    case Kind::kReplicated: return "replicated on " + WorkerList(workers);
    case Kind::kPartial: return "partial(sum) on " + WorkerList(workers);
    case Kind::kMesh: {
      std::string out = "mesh [";
      const size_t columns = mesh_shape.size() == 2 ? static_cast<size_t>(mesh_shape[1]) : workers.size();
      for (size_t r = 0; columns && r < workers.size(); r += columns)
        out += (r ? ", " : "") + WorkerList(std::vector<int>(workers.begin() + static_cast<long>(r),
                                                             workers.begin() + static_cast<long>(std::min(r + columns, workers.size()))));
      out += "] [";
      for (size_t a = 0; a < mesh_axes.size(); ++a) {
        const MeshAxis& m = mesh_axes[a];
        out += a ? ", " : "";
        out += m.shard() ? "Shard(" + std::to_string(m.dim) + ")" : m.partial() ? "Partial()" : "Replicate()";
      }
      return out + "]";
    }
    case Kind::kSharded: {
      std::vector<int> sizes_as_int(sizes.begin(), sizes.end());
      return "sharded(axis " + std::to_string(axis) + ") on " + WorkerList(workers) + " sizes " +
             WorkerList(sizes_as_int);
    }
  }
  return "?";
}

std::vector<int64_t> ChunkSizes(int64_t length, size_t parts) {
  std::vector<int64_t> out;
  if (length <= 0 || parts == 0) return out;
  const int64_t chunk = (length + static_cast<int64_t>(parts) - 1) / static_cast<int64_t>(parts);
  for (int64_t start = 0; start < length; start += chunk) out.push_back(std::min(chunk, length - start));
  return out;
}

}  // namespace gt::sharding
