#include "yaml_tree.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "bindings.h"

namespace py = pybind11;

namespace gt::python {
namespace {

// A plain (unquoted) scalar typed by the YAML 1.2 core schema.
py::object TypedScalar(const std::string& s) {
  static const std::regex kNull("~|null|Null|NULL|");
  static const std::regex kTrue("true|True|TRUE");
  static const std::regex kFalse("false|False|FALSE");
  static const std::regex kDecimal("[-+]?[0-9]+");
  static const std::regex kOctal("0o[0-7]+");
  static const std::regex kHex("0x[0-9a-fA-F]+");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  static const std::regex kInf(R"([-+]?\.(inf|Inf|INF))");
  static const std::regex kNan(R"(\.(nan|NaN|NAN))");
  if (std::regex_match(s, kNull)) return py::none();
  if (std::regex_match(s, kTrue)) return py::bool_(true);
  if (std::regex_match(s, kFalse)) return py::bool_(false);
  // Python's int() takes any size and both prefixes.
  if (std::regex_match(s, kDecimal)) return py::reinterpret_steal<py::object>(PyLong_FromString(s.c_str(), nullptr, 10));
  if (std::regex_match(s, kOctal)) return py::reinterpret_steal<py::object>(PyLong_FromString(s.c_str() + 2, nullptr, 8));
  if (std::regex_match(s, kHex)) return py::reinterpret_steal<py::object>(PyLong_FromString(s.c_str() + 2, nullptr, 16));
  if (std::regex_match(s, kFloat)) return py::float_(std::stod(s));
  if (std::regex_match(s, kInf)) return py::float_(s[0] == '-' ? -INFINITY : INFINITY);
  if (std::regex_match(s, kNan)) return py::float_(NAN);
  return py::str(s);
}

std::string KeyText(const py::object& key) { return py::str(key); }

py::object Convert(const YAML::Node& node, const std::string& path, py::dict& lines) {
  lines[py::str(path)] = node.Mark().line + 1;
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return py::none();
    case YAML::NodeType::Scalar:
      // "!" marks a quoted (non-plain) scalar: always a string.
      if (node.Tag() == "!") return py::str(node.Scalar());
      return TypedScalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      py::list out;
      size_t i = 0;
      for (const YAML::Node& item : node) out.append(Convert(item, path + "[" + std::to_string(i++) + "]", lines));
      return out;
    }
    case YAML::NodeType::Map: {
      py::dict out;
      for (const auto& kv : node) {
        py::object key = kv.first.IsScalar() && kv.first.Tag() != "!" ? TypedScalar(kv.first.Scalar())
                                                                        : py::object(py::str(kv.first.as<std::string>("")));
        std::string child = path.empty() ? KeyText(key) : path + "." + KeyText(key);
        out[key] = Convert(kv.second, child, lines);
        lines[py::str(child)] = kv.first.Mark().line + 1;  // a key's line, where the user looks
      }
      return out;
    }
  }
  return py::none();
}

py::tuple Read(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw py::value_error(source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                          ": invalid YAML: " + e.msg);
  }
  py::dict lines;
  py::object document = Convert(root, "", lines);
  return py::make_tuple(document, lines);
}

}  // namespace

py::tuple ReadYamlFile(const std::string& path) {
  errno = 0;
  std::ifstream in(path);
  if (!in) {
    if (errno == 0) errno = ENOENT;
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, path.c_str());
    throw py::error_already_set();
  }
  std::stringstream text;
  text << in.rdbuf();
  return Read(text.str(), path);
}

py::tuple ReadYamlString(const std::string& text, const std::string& source_name) { return Read(text, source_name); }

void BindYaml(py::module_& m) {
  m.def("read_yaml_file", &ReadYamlFile, py::arg("path"),
        "Reads a YAML file into (document, lines): plain dicts/lists/scalars and a {key path: line} table.");
  m.def("read_yaml_string", &ReadYamlString, py::arg("text"), py::arg("source_name") = "<string>",
        "Like read_yaml_file, for YAML text.");
}

}  // namespace gt::python
