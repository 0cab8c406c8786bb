// Python values -> c10::IValue -> torch.save's zip archive (see serialize.h).
#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <pybind11/numpy.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "serialize.h"

namespace py = pybind11;

namespace gt::serialize {
namespace {

at::ScalarType ScalarTypeOf(const py::dtype& dtype, const std::string& path) {
  if (dtype.is(py::dtype::of<float>())) return at::kFloat;
  if (dtype.is(py::dtype::of<double>())) return at::kDouble;
  if (dtype.is(py::dtype::of<int32_t>())) return at::kInt;
  if (dtype.is(py::dtype::of<int64_t>())) return at::kLong;
  if (dtype.is(py::dtype::of<bool>())) return at::kBool;
  throw py::type_error("gt.save: " + path + " has NumPy dtype " + std::string(py::str(py::handle(dtype))) +
                       ", which gt tensors do not hold");
}

// The records met while converting: one placeholder tensor per record object, and the record
// behind each placeholder's storage (the Pickler names storages; the data is written after).
struct Conversion {
  py::handle tensor_type;
  std::unordered_map<PyObject*, at::Tensor> tensors;
  std::unordered_map<const void*, py::object> records;
};

// Where every placeholder points: the Pickler reads a tensor's shape, dtype and storage size,
// never its bytes, so no tensor's data is held while the structure is written.
char placeholder_byte;

at::Tensor TensorOf(py::handle record, const std::string& path, Conversion& conversion) {
  if (auto it = conversion.tensors.find(record.ptr()); it != conversion.tensors.end()) return it->second;
  std::vector<int64_t> sizes;
  for (auto n : record.attr("shape")) sizes.push_back(n.cast<int64_t>());
  const auto dtype = py::reinterpret_borrow<py::dtype>(record.attr("dtype"));
  at::Tensor tensor = at::from_blob(&placeholder_byte, sizes, at::TensorOptions().dtype(ScalarTypeOf(dtype, path)));
  if (record.attr("requires_grad").cast<bool>()) tensor.set_requires_grad(true);
  conversion.tensors.emplace(record.ptr(), tensor);
  conversion.records.emplace(tensor.storage().unsafeGetStorageImpl(), py::reinterpret_borrow<py::object>(record));
  return tensor;
}

c10::IValue ToIValue(py::handle obj, const std::string& path, Conversion& conversion);

c10::IValue DictOf(py::handle obj, const std::string& path, Conversion& conversion) {
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
                                      conversion));
  }
  return out;
}

c10::IValue ToIValue(py::handle obj, const std::string& path, Conversion& conversion) {
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
  if (py::isinstance(obj, conversion.tensor_type)) return c10::IValue(TensorOf(obj, path, conversion));
  if (py::isinstance<py::dict>(obj)) return DictOf(obj, path, conversion);
  if (py::isinstance<py::list>(obj)) {
    c10::impl::GenericList out(c10::AnyType::get());
    size_t i = 0;
    for (auto item : obj) out.push_back(ToIValue(item, path + "[" + std::to_string(i++) + "]", conversion));
    return out;
  }
  if (py::isinstance<py::tuple>(obj)) {
    std::vector<c10::IValue> items;
    size_t i = 0;
    for (auto item : obj) items.push_back(ToIValue(item, path + "[" + std::to_string(i++) + "]", conversion));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  throw py::type_error("gt.save: " + path + " is a " + std::string(py::str(obj.get_type().attr("__name__"))) +
                       "; gt.save writes gt tensors, NumPy arrays, numbers, strings, None and dicts, lists "
                       "and tuples of them");
}

// Each tensor's data, fetched when its record is written and dropped after: as
// torch::jit::writeArchiveAndTensors lays them out ("data/<i>" in the Pickler's order, then
// "data.pkl"), but one tensor's bytes at a time.
void WriteTensorRecords(const std::vector<at::Tensor>& tensors, Conversion& conversion,
                        caffe2::serialize::PyTorchStreamWriter& writer) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const py::object& record = conversion.records.at(tensors[i].storage().unsafeGetStorageImpl());
    const py::array array = py::array::ensure(record.attr("fetch")(), py::array::c_style);
    const size_t bytes = tensors[i].storage().nbytes();
    if (!array || static_cast<size_t>(array.nbytes()) != bytes) {
      throw py::value_error("gt.save: a tensor's data does not match its shape and dtype (changed while saving?)");
    }
    writer.writeRecord("data/" + std::to_string(i), array.data(), bytes);
  }
}

}  // namespace

void Write(py::handle obj, py::object write, py::handle tensor_type) {
  Conversion conversion{tensor_type, {}, {}};
  const c10::IValue value = ToIValue(obj, "obj", conversion);
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
    WriteTensorRecords(pickler.tensorData(), conversion, writer);
    writer.writeRecord("data.pkl", pickle_bytes.data(), pickle_bytes.size());
    writer.writeEndOfFile();
  } catch (const c10::Error& error) {
    if (!failed) throw std::runtime_error(std::string("gt.save: ") + error.what_without_backtrace());
  }
  if (failed) throw std::move(*failed);
}

}  // namespace gt::serialize
