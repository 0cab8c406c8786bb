// Python values -> c10::IValue -> torch.save's zip archive (see serialize.h).
#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <pybind11/numpy.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <optional>
#include <string>
#include <vector>

#include "serialize.h"

namespace py = pybind11;

namespace gt::serialize {
namespace {

at::ScalarType ScalarTypeOf(const py::array& array, const std::string& path) {
  const py::dtype dtype = array.dtype();
  if (dtype.is(py::dtype::of<float>())) return at::kFloat;
  if (dtype.is(py::dtype::of<double>())) return at::kDouble;
  if (dtype.is(py::dtype::of<int32_t>())) return at::kInt;
  if (dtype.is(py::dtype::of<int64_t>())) return at::kLong;
  if (dtype.is(py::dtype::of<bool>())) return at::kBool;
  throw py::type_error("gt.save: " + path + " has NumPy dtype " + std::string(py::str(py::handle(dtype))) +
                       ", which gt tensors do not hold");
}

// A tensor viewing the array's memory (no copy): the caller keeps `obj` alive until written.
at::Tensor TensorOf(py::handle record, const std::string& path) {
  auto array = py::reinterpret_borrow<py::array>(record.attr("array"));
  if (!(array.flags() & py::array::c_style)) {
    throw py::value_error("gt.save: " + path + " is not C-contiguous");
  }
  std::vector<int64_t> sizes(array.shape(), array.shape() + array.ndim());
  at::Tensor tensor = at::from_blob(const_cast<void*>(array.data()), sizes,
                                    at::TensorOptions().dtype(ScalarTypeOf(array, path)));
  if (record.attr("requires_grad").cast<bool>()) tensor.set_requires_grad(true);
  return tensor;
}

c10::IValue ToIValue(py::handle obj, const std::string& path, py::handle tensor_type);

c10::IValue DictOf(py::handle obj, const std::string& path, py::handle tensor_type) {
  auto dict = py::reinterpret_borrow<py::dict>(obj);
  bool all_str = true, all_int = true;
  for (auto item : dict) {
    all_str = all_str && py::isinstance<py::str>(item.first);
    all_int = all_int && py::isinstance<py::int_>(item.first) && !py::isinstance<py::bool_>(item.first);
  }
  if (!all_str && !all_int) {
    throw py::type_error("gt.save: the keys of " + path + " must be all str or all int");
  }
  c10::impl::GenericDict out(all_str ? c10::StringType::get() : c10::TypePtr(c10::IntType::get()),
                             c10::AnyType::get());
  for (auto item : dict) {
    const std::string key = py::str(item.first).cast<std::string>();
    c10::IValue k = all_str ? c10::IValue(key) : c10::IValue(item.first.cast<int64_t>());
    out.insert(std::move(k), ToIValue(item.second, path + "[" + py::repr(item.first).cast<std::string>() + "]",
                                      tensor_type));
  }
  return out;
}

c10::IValue ToIValue(py::handle obj, const std::string& path, py::handle tensor_type) {
  if (obj.is_none()) return c10::IValue();
  if (py::isinstance<py::bool_>(obj)) return c10::IValue(obj.cast<bool>());
  if (py::isinstance<py::int_>(obj)) {
    try {
      return c10::IValue(obj.cast<int64_t>());
    } catch (const py::cast_error&) {
      throw py::value_error("gt.save: " + path + " does not fit in 64 bits");
    }
  }
  if (py::isinstance<py::float_>(obj)) return c10::IValue(obj.cast<double>());
  if (py::isinstance<py::str>(obj)) return c10::IValue(obj.cast<std::string>());
  if (py::isinstance(obj, tensor_type)) return c10::IValue(TensorOf(obj, path));
  if (py::isinstance<py::dict>(obj)) return DictOf(obj, path, tensor_type);
  if (py::isinstance<py::list>(obj)) {
    c10::impl::GenericList out(c10::AnyType::get());
    size_t i = 0;
    for (auto item : obj) out.push_back(ToIValue(item, path + "[" + std::to_string(i++) + "]", tensor_type));
    return out;
  }
  if (py::isinstance<py::tuple>(obj)) {
    std::vector<c10::IValue> items;
    size_t i = 0;
    for (auto item : obj) items.push_back(ToIValue(item, path + "[" + std::to_string(i++) + "]", tensor_type));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  throw py::type_error("gt.save: " + path + " is a " + std::string(py::str(obj.get_type().attr("__name__"))) +
                       "; gt.save writes gt tensors, NumPy arrays, numbers, strings, None and dicts, lists "
                       "and tuples of them");
}

}  // namespace

void Write(py::handle obj, py::object write, py::handle tensor_type) {
  const c10::IValue value = ToIValue(obj, "obj", tensor_type);
  std::vector<char> pickle_bytes;
  torch::jit::Pickler pickler(
      [&](const char* bytes, size_t n) { pickle_bytes.insert(pickle_bytes.end(), bytes, bytes + n); });
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  // The first failed write is kept and re-raised after LibTorch has unwound: a Python
  // error must not pass through the writer (its destructor writes again).
  std::optional<py::error_already_set> failed;
  auto sink = [&](const void* data, size_t n) -> size_t {
    if (failed) return 0;
    try {
      write(py::memoryview::from_memory(const_cast<void*>(data), static_cast<py::ssize_t>(n), true));
      return n;
    } catch (py::error_already_set& error) {
      failed.emplace(std::move(error));
      return 0;
    }
  };
  try {
    caffe2::serialize::PyTorchStreamWriter writer(sink);
    torch::jit::writeArchiveAndTensors("data", pickle_bytes.data(), pickle_bytes.size(), pickler.tensorData(),
                                       writer);
    writer.writeEndOfFile();
  } catch (const c10::Error& error) {
    if (!failed) throw std::runtime_error(std::string("gt.save: ") + error.what_without_backtrace());
  }
  if (failed) throw std::move(*failed);
}

}  // namespace gt::serialize
