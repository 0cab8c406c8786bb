// gt::checkpoint (client/include/gt/checkpoint.h) for
// python/gt/distributed_checkpoint, which plans which worker writes or reads
// which bytes; these only queue the plans.
#include "bindings.h"
#include "gt/checkpoint.h"

namespace py = pybind11;

namespace gt::python {

void BindCheckpoint(py::module_& m) {
  m.def("checkpoint_write", &gt::checkpoint::write_pieces, py::arg("tensor"), py::arg("plan"),
        "Queues the write of a tensor's pieces by a plan's write lines (gt/checkpoint_plan.h)");
  m.def("checkpoint_read", &gt::checkpoint::read_pieces, py::arg("tensor"), py::arg("plan"),
        "Queues the in-place fill of a tensor's pieces by a plan's read lines");
  m.def("checkpoint_write_metadata", &gt::checkpoint::write_metadata, py::arg("path"), py::arg("text"),
        "Queues the metadata file's write (a temporary name, then a rename)");
  m.def(
      "checkpoint_read_metadata",
      [](const std::string& path) {
        std::string text;
        {
          py::gil_scoped_release release;  // a sync point
          text = gt::checkpoint::read_metadata(path);
        }
        return py::bytes(text);
      },
      py::arg("path"), "The metadata file's bytes, read by this client's worker (a sync point)");
}

}  // namespace gt::python
