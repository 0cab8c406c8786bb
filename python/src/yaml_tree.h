// A YAML document as plain Python objects (PyYAML is not a dependency of gt;
// yaml-cpp already is). Signal configs are not read with it: gt.load_config
// calls the C++ client's reader (config_bindings.cc).
//
// Mappings become dicts (in document order), sequences lists, and scalars
// follow the YAML 1.2 core schema: null (~, null, empty), bool (true/false
// in three casings), int (decimal, 0x, 0o), float (incl. .inf, .nan), and a
// string for everything else or anything quoted. Mapping keys are typed the
// same way.
//
// Alongside the document comes a line table: for every node, its key path
// ("a.b[2].c"; the root is "") mapped to its 1-based line (a mapping entry's
// is its key's line), so callers can
// report problems as FILE:LINE: PATH: message.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace gt::python {

// Returns (document, lines). Throws ValueError naming the source, line and
// column for malformed YAML, and FileNotFoundError for a missing file.
pybind11::tuple ReadYamlFile(const std::string& path);
pybind11::tuple ReadYamlString(const std::string& text, const std::string& source_name);

}  // namespace gt::python
