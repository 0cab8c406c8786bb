// gt::distributed (client/include/gt/distributed.h) as plain functions over
// plain values: python/gt/distributed.py gives them DTensor's classes
// (DeviceMesh, Shard, Replicate, Partial) and checks nothing itself, so the
// rules live once, in the C++ client.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <optional>

#include "bindings.h"
#include "gt/distributed.h"

namespace py = pybind11;

namespace gt::python {
namespace {

namespace gd = gt::distributed;

// rows: one list of worker indexes (1-D) or several (2-D).
gd::DeviceMesh MakeMesh(const std::vector<std::vector<int>>& rows, const std::vector<std::string>& axis_names, bool flat) {
  if (flat) return gd::DeviceMesh(rows.empty() ? std::vector<int>{} : rows[0], axis_names.empty() ? "workers" : axis_names[0]);
  return gd::DeviceMesh(rows, axis_names);
}

// (kind, dim) pairs: kind 0 Shard, 1 Replicate, 2 Partial.
std::vector<gd::Placement> MakePlacements(const std::vector<std::pair<int, int64_t>>& placements) {
  std::vector<gd::Placement> out;
  for (const auto& [kind, dim] : placements)
    out.push_back(kind == 0 ? gd::Shard(dim) : kind == 1 ? gd::Replicate() : gd::Partial());
  return out;
}

py::dict RecordAsDict(const gd::CollectiveRecord& c) {
  py::dict d;
  d["kind"] = c.kind;
  d["reduce"] = c.reduce;
  d["workers"] = py::cast(c.workers);
  d["bytes"] = c.bytes;
  d["seq"] = c.seq;
  d["made_by"] = c.made_by;
  d["needed_by"] = c.needed_by;
  d["op"] = c.op;
  d["signal"] = c.signal;
  d["backward"] = c.backward;
  d["source"] = c.source;
  return d;
}

}  // namespace

void BindDistributed(py::module_& m) {
  m.def("check_mesh", [](const std::vector<std::vector<int>>& rows, const std::vector<std::string>& names, bool flat) {
    return MakeMesh(rows, names, flat).ToString();
  }, "Validates a mesh (gt::distributed::DeviceMesh) and returns its description");
  m.def("redistribute", [](const Tensor& t, const std::vector<std::vector<int>>& rows,
                           const std::vector<std::string>& names, bool flat,
                           const std::vector<std::pair<int, int64_t>>& placements) {
    return gd::redistribute(t, MakeMesh(rows, names, flat), MakePlacements(placements));
  }, "gt::distributed::redistribute: placements as (kind 0 Shard / 1 Replicate / 2 Partial, dim)");
  m.def("full_tensor", &gd::full_tensor);
  m.def("signal_config", [](const std::vector<std::vector<int>>& rows, const std::vector<std::string>& names, bool flat,
                            const std::vector<std::pair<int, int64_t>>& placements) {
    const SignalConfig c = gd::signal_config(MakeMesh(rows, names, flat), MakePlacements(placements));
    py::object shard = py::none();
    if (c.shard) shard = py::make_tuple(c.shard->axis, py::cast(c.shard->workers));
    py::object mesh = py::none();
    if (c.mesh) mesh = py::make_tuple(c.mesh->rows, c.mesh->columns, py::cast(c.mesh->workers), py::cast(c.mesh->shard_dims));
    return py::make_tuple(shard, c.replicated, c.replicas, mesh);
  }, "gt::distributed::signal_config: (shard None or (axis, workers), replicated, replicas, mesh None or (rows, "
     "columns, workers, [dim or None per mesh axis]))");
  m.def("layout", [](const Tensor& t) {
    std::optional<gd::Layout> layout;
    {
      py::gil_scoped_release release;  // a sync point
      layout = gd::layout(t);
    }
    const gd::Layout& l = *layout;
    py::list placements;
    for (const gd::Placement& p : l.placements)
      placements.append(py::make_tuple(p.is_shard() ? 0 : p.is_partial() ? 2 : 1, p.dim));
    return py::make_tuple(l.mesh.workers(), l.mesh.shape(), placements, l.shard_sizes);
  }, "gt::distributed::layout: (workers row-major, mesh shape, [(kind 0 Shard / 1 Replicate / 2 Partial, dim)] "
     "per mesh axis, shard sizes of a 1-D split)");
  m.def("start_recording", &gd::start_recording);
  m.def("stop_recording", [] {
    std::vector<gd::CollectiveRecord> records;
    {
      py::gil_scoped_release release;
      records = gd::stop_recording();
    }
    py::list out;
    for (const gd::CollectiveRecord& c : records) out.append(RecordAsDict(c));
    return out;
  });
  m.def("set_source_hook", [](std::optional<std::function<std::string()>> hook) {
    gd::set_source_hook(hook ? *hook : std::function<std::string()>());
  });
}

}  // namespace gt::python
