// gt._serialize: PyTorch's checkpoint format (torch.save's zip archive)
// written and read with LibTorch's own serializer. A separate extension
// module from gt._C, since only it may include LibTorch headers; it knows
// nothing of gt tensors: python/gt/serialization.py hands it NumPy arrays
// (fetched from the workers once) and uploads what it reads.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

namespace caffe2::serialize {
class PyTorchStreamReader;
}

namespace gt::serialize {

// Writes `obj` as a PyTorch checkpoint through `write` (a callable taking a
// bytes-like object, such as a binary file's write). `obj` is None, bool,
// int, float, str, an instance of `tensor_type`, or a dict (keys all str or
// all int) / list / tuple of those; raises TypeError naming the path of
// anything else. A `tensor_type` record has `shape`, `dtype` (a NumPy dtype:
// float32, float64, int32, int64 or bool) and `requires_grad`, read while the
// structure is pickled, and `fetch()`, called once when its data is written,
// returning a C-contiguous array of that shape and dtype, written without a
// copy and released before the next record's is fetched. The same record
// object twice is one storage in the file.
void Write(pybind11::handle obj, pybind11::object write, pybind11::handle tensor_type);

// A torch.save archive (a path, or a bytes-like object holding one, kept
// alive), read by LibTorch's PyTorchStreamReader one record at a time, so a
// loader holds one tensor's bytes at once. Every method raises ValueError
// (with LibTorch's reason) for what is not such an archive, or is damaged.
class Archive {
 public:
  explicit Archive(pybind11::object source);
  ~Archive();
  // Every record's name, without the archive's folder ("data.pkl", "data/0", ...).
  std::vector<std::string> Names();
  // The record's bytes: a uint8 NumPy array owning LibTorch's buffer (no copy).
  pybind11::array Read(const std::string& name);

 private:
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader_;
};

}  // namespace gt::serialize
