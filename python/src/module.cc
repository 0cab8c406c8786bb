// Entry point of the `gt._C` extension.
#include <pybind11/stl.h>

#include <stdexcept>

#include "bindings.h"
#include "gt/settings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "gt C++ client bindings (use the `gt` package, not this module)";
  gt::python::BindTensor(m);
  gt::python::BindNN(m);
  gt::python::BindConfig(m);
  gt::python::BindStats(m);
  gt::python::BindDistributed(m);
  gt::python::BindCheckpoint(m);
  // The Python layer reads its GT_* variables through gt's one list
  // (gt/settings.h): the text of a declared one, None when unset or empty.
  m.def("_setting", [](const std::string& name) {
    if (gt::FindSetting(name) == nullptr) throw std::invalid_argument(name + " is not declared in gt/settings.h");
    return gt::EnvironmentText(name);
  });
}
