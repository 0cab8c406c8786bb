// Signal configs for gt/config.py: the C++ client's YAML reader
// (gt::parse_config_string, the one reader of signal-config YAML) and
// register_config / clear_configs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bindings.h"
#include "gt/gt.h"

namespace py = pybind11;

namespace gt::python {
namespace {

// A MeshConfig as (rows, columns, workers, [dim or None per mesh axis], axis names); None for none.
py::object MeshToPython(const std::optional<MeshConfig>& mesh) {
  if (!mesh) return py::none();
  return py::make_tuple(mesh->rows, mesh->columns, py::cast(mesh->workers), py::cast(mesh->shard_dims),
                        py::cast(mesh->axis_names));
}

// (signals, problems): signals as (name, shard, replicated, backward,
// compile, replicas, mesh) with shard None or (axis, workers), mesh as
// MeshToPython, in file order.
py::tuple ToPython(const ParsedConfigs& parsed) {
  py::list signals;
  for (const auto& [name, config] : parsed.signals) {
    py::object shard = py::none();
    if (config.shard) shard = py::make_tuple(config.shard->axis, py::cast(config.shard->workers));
    signals.append(py::make_tuple(name, shard, config.replicated, config.backward, config.compile,
                                  py::cast(config.replicas), MeshToPython(config.mesh)));
  }
  return py::make_tuple(signals, py::cast(parsed.problems));
}

py::tuple ParseFile(const std::string& path) {
  errno = 0;
  std::ifstream in(path);
  if (!in) {
    if (errno == 0) errno = ENOENT;
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, path.c_str());  // FileNotFoundError, PermissionError, ...
    throw py::error_already_set();
  }
  std::stringstream text;
  text << in.rdbuf();
  return ToPython(parse_config_string(text.str(), path));
}

}  // namespace

void BindConfig(py::module_& m) {
  m.def("parse_config_file", &ParseFile, py::arg("path"),
        "Reads the signal configs of a YAML file, registering nothing: (signals, problems), signals as "
        "(name, shard: None or (axis, workers), replicated, backward, compile, replicas, mesh: None or (rows, "
        "columns, workers, [dim or None per mesh axis], axis names)), problems as 'FILE:LINE: PATH: what'. "
        "OSError for a file that cannot be read.");
  m.def(
      "parse_config_string",
      [](const std::string& text, const std::string& source_name) {
        return ToPython(parse_config_string(text, source_name));
      },
      py::arg("text"), py::arg("source_name") = "<string>", "parse_config_file for YAML text.");
  m.def(
      "register_config",
      [](const std::string& name, std::optional<int64_t> axis, std::vector<int> workers, bool replicated,
         const std::string& backward, bool compile, std::vector<int> replicas,
         std::optional<std::tuple<int64_t, int64_t, std::vector<int>, std::vector<std::optional<int64_t>>>> mesh) {
        SignalConfig config;
        if (mesh)
          config.mesh = MeshConfig{std::get<0>(*mesh), std::get<1>(*mesh), std::get<2>(*mesh), std::get<3>(*mesh), {}};
        if (axis) config.shard = ShardConfig{*axis, std::move(workers)};
        config.replicated = replicated;
        config.replicas = std::move(replicas);
        config.backward = backward;
        config.compile = compile;
        register_config(name, config);
      },
      py::arg("name"), py::arg("axis"), py::arg("workers"), py::arg("replicated"), py::arg("backward"),
      py::arg("compile"), py::arg("replicas") = std::vector<int>{}, py::arg("mesh") = py::none(),
      "Registers a signal config with the C++ client (sent to the dispatcher); axis None: no shard; mesh: "
      "None or (rows, columns, workers, [dim or None per mesh axis])");
  m.def("clear_configs", &clear_configs, "Forgets every signal config of this client");
}

}  // namespace gt::python
