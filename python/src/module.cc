// Entry point of the `gt._C` extension.
#include "bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "gt C++ client bindings (use the `gt` package, not this module)";
  gt::python::BindTensor(m);
  gt::python::BindNN(m);
  gt::python::BindConfig(m);
  gt::python::BindStats(m);
  gt::python::BindDistributed(m);
}
