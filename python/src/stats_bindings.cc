// gt::worker_stats() as `_C.worker_stats(timeout_ms)`: plain dicts, so that
// python/gt/debug.py shapes and prints them without a wrapper class.
#include <pybind11/stl.h>

#include "bindings.h"
#include "gt/gt.h"

namespace py = pybind11;

namespace gt::python {
namespace {

py::dict HotSequenceAsDict(const HotSequenceStats& q) {
  py::dict d;
  d["id"] = q.id;
  d["stage"] = q.stage;
  d["length"] = q.length;
  d["repetitions"] = q.repetitions;
  return d;
}

py::dict SampleAsDict(const MetricSample& s) {
  py::dict d;
  d["name"] = s.name;
  d["labels"] = py::cast(s.labels);
  d["value"] = s.value;
  return d;
}

py::dict HostAsDict(const HostStats& h) {
  py::dict d;
  d["instance"] = h.instance;
  d["host"] = h.host;
  d["stages"] = py::cast(h.stages);
  d["instructions"] = h.instructions;
  d["terminal_instructions"] = h.terminal_instructions;
  d["compiled"] = h.compiled;
  d["eager"] = h.eager;
  d["units_run"] = h.units_run;
  d["cache_hits"] = h.cache_hits;
  d["cache_misses"] = h.cache_misses;
  d["hot_sequences_found"] = h.hot_sequences_found;
  py::list hot;
  for (const HotSequenceStats& q : h.hot_sequences) hot.append(HotSequenceAsDict(q));
  d["hot_sequences"] = hot;
  d["unit_cache_hits"] = h.unit_cache_hits;
  d["unit_cache_misses"] = h.unit_cache_misses;
  d["unit_runs"] = h.unit_runs;
  d["compile_seconds"] = h.compile_seconds;
  d["unit_instructions"] = py::cast(h.unit_instructions);
  py::list samples;
  for (const MetricSample& s : h.samples) samples.append(SampleAsDict(s));
  d["samples"] = samples;
  return d;
}

// {"hosts": [dict per host, the dispatcher first], "missing": [worker id]}.
py::dict WorkerStatsAsDict(int timeout_ms) {
  WorkerStats stats;
  {
    py::gil_scoped_release release;  // waits on the network
    stats = worker_stats(timeout_ms);
  }
  py::list hosts;
  for (const HostStats& h : stats.hosts) hosts.append(HostAsDict(h));
  py::dict out;
  out["hosts"] = hosts;
  out["missing"] = py::cast(stats.missing);
  return out;
}

}  // namespace

void BindStats(py::module_& m) {
  m.def("worker_stats", &WorkerStatsAsDict, py::arg("timeout_ms"),
        "Every host's stage figures (gt::worker_stats): {'hosts': [...], 'missing': [...]}");
}

}  // namespace gt::python
