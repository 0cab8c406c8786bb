// The gt._serialize extension (see serialize.h): reading an archive's
// records one at a time, and the bindings.
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <string>

#include "serialize.h"

namespace py = pybind11;

namespace gt::serialize {
namespace {

// An archive held in a Python bytes-like object (read from a file object), read in place.
class BufferAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BufferAdapter(py::buffer buffer) : buffer_(std::move(buffer)), info_(buffer_.request()) {}
  size_t size() const override { return static_cast<size_t>(info_.size * info_.itemsize); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= size()) return 0;
    n = std::min<size_t>(n, size() - pos);
    std::memcpy(buf, static_cast<const char*>(info_.ptr) + pos, n);
    return n;
  }

 private:
  py::buffer buffer_;
  py::buffer_info info_;
};

// A uint8 array owning LibTorch's record memory (no copy).
py::array ArrayOf(at::DataPtr data, size_t size) {
  auto* owned = new at::DataPtr(std::move(data));
  py::capsule owner(owned, [](void* p) { delete static_cast<at::DataPtr*>(p); });
  return py::array(py::dtype::of<uint8_t>(), {static_cast<py::ssize_t>(size)}, {1}, owned->get(), owner);
}

}  // namespace

Archive::Archive(py::object source) {
  try {
    if (py::isinstance<py::str>(source)) {
      reader_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(source.cast<std::string>());
    } else {
      reader_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(
          std::make_shared<BufferAdapter>(py::reinterpret_borrow<py::buffer>(source)));
    }
  } catch (const c10::Error& error) {
    throw py::value_error(error.what_without_backtrace());
  }
}

Archive::~Archive() = default;

std::vector<std::string> Archive::Names() {
  try {
    return reader_->getAllRecords();
  } catch (const c10::Error& error) {
    throw py::value_error(error.what_without_backtrace());
  }
}

py::array Archive::Read(const std::string& name) {
  try {
    auto [data, size] = reader_->getRecord(name);
    return ArrayOf(std::move(data), size);
  } catch (const c10::Error& error) {
    throw py::value_error(error.what_without_backtrace());
  }
}

}  // namespace gt::serialize

PYBIND11_MODULE(_serialize, m) {
  m.doc() = "PyTorch's checkpoint format through LibTorch's serializer (used by gt.save / gt.load)";
  m.def("write", &gt::serialize::Write, py::arg("obj"), py::arg("write"), py::arg("tensor_type"),
        "Writes obj as a PyTorch checkpoint through write(bytes_like) (see python/src/serialize.h).");
  py::class_<gt::serialize::Archive>(m, "Archive",
                                     "A torch.save archive at a path or in a bytes-like object, read by "
                                     "LibTorch's PyTorchStreamReader (ValueError if it is not one).")
      .def(py::init<py::object>(), py::arg("source"))
      .def("names", &gt::serialize::Archive::Names, "Every record's name, without the archive's folder.")
      .def("read", &gt::serialize::Archive::Read, py::arg("name"),
           "A record's bytes: a uint8 array owning LibTorch's buffer (no copy).");
}
