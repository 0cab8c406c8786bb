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

// A placement crosses into Python as a (kind, dim) pair, its kind the layout
// codec's number (gt/layout.h AxisKind), exported as SHARD, REPLICATE and
// PARTIAL for python/gt/distributed.py.
using Pair = std::pair<int, int64_t>;

std::vector<gd::Placement> MakePlacements(const std::vector<Pair>& placements) {
  std::vector<gd::Placement> out;
  for (const auto& [kind, dim] : placements) {
    const auto k = static_cast<layout::AxisKind>(kind);
    out.push_back(k == layout::AxisKind::kShard ? gd::Shard(dim) : k == layout::AxisKind::kReplicate ? gd::Replicate() : gd::Partial());
  }
  return out;
}

Pair ToPair(const gd::Placement& p) { return {static_cast<int>(p.kind), p.dim}; }

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
  m.attr("SHARD") = static_cast<int>(layout::AxisKind::kShard);
  m.attr("REPLICATE") = static_cast<int>(layout::AxisKind::kReplicate);
  m.attr("PARTIAL") = static_cast<int>(layout::AxisKind::kPartial);
  m.def("check_mesh", [](const std::vector<std::vector<int>>& rows, const std::vector<std::string>& names, bool flat) {
    return MakeMesh(rows, names, flat).ToString();
  }, "Validates a mesh (gt::distributed::DeviceMesh) and returns its description");
  m.def("redistribute", [](const Tensor& t, const std::vector<std::vector<int>>& rows,
                           const std::vector<std::string>& names, bool flat,
                           const std::vector<Pair>& placements) {
    return gd::redistribute(t, MakeMesh(rows, names, flat), MakePlacements(placements));
  }, "gt::distributed::redistribute: placements as (kind SHARD / REPLICATE / PARTIAL, dim)");
  m.def("full_tensor", &gd::full_tensor);
  m.def("signal_config", [](const std::vector<std::vector<int>>& rows, const std::vector<std::string>& names, bool flat,
                            const std::vector<Pair>& placements) {
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
    for (const gd::Placement& p : l.placements) placements.append(py::cast(ToPair(p)));
    return py::make_tuple(l.mesh.workers(), l.mesh.shape(), placements, l.shard_sizes);
  }, "gt::distributed::layout: (workers row-major, mesh shape, [(kind SHARD / REPLICATE / PARTIAL, dim)] "
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
