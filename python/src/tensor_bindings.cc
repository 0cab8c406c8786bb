// `_C.Tensor` and the free functions of gt/gt.h.
//
// Conventions: an undefined gt::Tensor crosses into Python as None (grad()
// before any backward); sync points and backward() release the GIL while
// they wait, so other Python threads keep running.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "gt/gt.h"
#include "gt/nn.h"

namespace py = pybind11;

namespace gt::python {
namespace {

// The NumPy dtype holding elements of `dtype` with the same bytes.
py::dtype NumpyDType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return py::dtype("float32");
    case DType::kFloat64: return py::dtype("float64");
    case DType::kInt32: return py::dtype("int32");
    case DType::kInt64: return py::dtype("int64");
    case DType::kBool: return py::dtype("bool");
    case DType::kCount: break;
  }
  throw Error(Code::kInternal, "no NumPy dtype for gt dtype " + std::to_string(static_cast<int>(dtype)));
}

py::object OrNone(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

py::tuple ShapeTuple(const Shape& shape) {
  py::tuple out(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) out[i] = py::int_(shape[i]);
  return out;
}

// numpy(): the fetched bytes become the array's memory (a capsule holding
// them is its base), so nothing is copied here; Tensor::fetch_bytes already
// copied once where the frame was a worker's tensor. A frame not aligned to
// its element size (ZeroMQ promises no alignment) is copied into a new array.
py::array ToNumpy(const Tensor& t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  const py::dtype dtype = NumpyDType(t.dtype());
  BlobPtr bytes;
  {
    py::gil_scoped_release release;
    bytes = t.fetch_bytes();
  }
  void* data = const_cast<std::byte*>(bytes->data());  // the caller's alone (fetch_bytes)
  if (reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(dtype.itemsize()) != 0 || bytes->size() == 0) {
    py::array out(dtype, shape);
    if (bytes->size()) std::memcpy(out.mutable_data(), data, bytes->size());
    return out;
  }
  py::capsule owner(new BlobPtr(std::move(bytes)), [](void* p) { delete static_cast<BlobPtr*>(p); });
  return py::array(dtype, shape, {}, data, owner);
}

// REQUIRES (checked): `array` is C-contiguous with the item size of `dtype`;
// python/gt converts with numpy.ascontiguousarray first. Copies once.
Tensor FromNumpy(const py::array& array, const Shape& shape, DType dtype) {
  if (!(array.flags() & py::array::c_style))
    throw Error(Code::kInvalidArgument, "from_numpy: array must be C-contiguous");
  if (static_cast<size_t>(array.itemsize()) != ElementSize(dtype))
    throw Error(Code::kInvalidArgument, "from_numpy: array items have " + std::to_string(array.itemsize()) +
                                            " bytes, " + std::string(DTypeName(dtype)) + " has " +
                                            std::to_string(ElementSize(dtype)));
  return from_data(array.data(), static_cast<size_t>(array.nbytes()), shape, dtype);
}

py::list TapeAsDicts() {
  py::list out;
  for (const TapeEntry& e : tape()) {
    py::dict d;
    d["index"] = e.index;
    d["op"] = e.op;
    d["output"] = e.output;
    d["inputs"] = py::cast(e.inputs);
    d["signal"] = e.signal;
    d["backward_signal"] = e.backward_signal;
    out.append(std::move(d));
  }
  return out;
}

// Tensor::max / min over axes (beside their elementwise template forms).
using Reduction = Tensor (Tensor::*)(std::vector<int64_t>, bool) const;

}  // namespace

void BindTensor(py::module_& m) {
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      py::object exc = py::handle(error.ptr())(e.what());  // an instance, to carry `code`
      exc.attr("code") = std::string(CodeName(e.code()));
      PyErr_SetObject(error.ptr(), exc.ptr());
    }
  });

  py::enum_<DType>(m, "DType")
      .value("float32", DType::kFloat32)
      .value("float64", DType::kFloat64)
      .value("int32", DType::kInt32)
      .value("int64", DType::kInt64)
      .value("bool", DType::kBool);
  m.def("numpy_dtype", &NumpyDType, "The NumPy dtype with the same element bytes.");

  py::class_<Tensor> t(m, "Tensor");
  t.def_property_readonly("shape", [](const Tensor& self) { return ShapeTuple(self.shape()); })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def("numel", &Tensor::numel)
      .def("dim", &Tensor::dim)
      .def("id", &Tensor::id)
      .def("defined", &Tensor::defined)
      .def("is_same", &Tensor::is_same)
      // Arithmetic; the scalar forms keep a Python scalar a scalar (no tensor).
      // They come first: pybind11 tries overloads in order, and a float
      // offered to a Tensor parameter first costs an attribute lookup by a
      // formatted name (its foreign-module check), ~0.3 us per op.
      .def("add", [](const Tensor& a, double s) { return a + s; })
      .def("add", [](const Tensor& a, const Tensor& b) { return a + b; })
      .def("sub", [](const Tensor& a, double s) { return a - s; })
      .def("sub", [](const Tensor& a, const Tensor& b) { return a - b; })
      .def("mul", [](const Tensor& a, double s) { return a * s; })
      .def("mul", [](const Tensor& a, const Tensor& b) { return a * b; })
      .def("div", [](const Tensor& a, double s) { return a / s; })
      .def("div", [](const Tensor& a, const Tensor& b) { return a / b; })
      // Tensor operands only, one overload each: python/gt calls these when it
      // knows the operand is a tensor, skipping the failed scalar overload.
      .def("add_tensor", [](const Tensor& a, const Tensor& b) { return a + b; })
      .def("sub_tensor", [](const Tensor& a, const Tensor& b) { return a - b; })
      .def("mul_tensor", [](const Tensor& a, const Tensor& b) { return a * b; })
      .def("div_tensor", [](const Tensor& a, const Tensor& b) { return a / b; })
      .def("radd", [](const Tensor& a, double s) { return s + a; })
      .def("rsub", [](const Tensor& a, double s) { return s - a; })
      .def("rmul", [](const Tensor& a, double s) { return s * a; })
      .def("rdiv", [](const Tensor& a, double s) { return s / a; })
      .def("pow", py::overload_cast<double>(&Tensor::pow, py::const_))
      .def("pow", py::overload_cast<const Tensor&>(&Tensor::pow, py::const_))
      .def("matmul", &Tensor::matmul)
      .def("relu", &Tensor::relu)
      .def("sigmoid", &Tensor::sigmoid)
      .def("tanh", &Tensor::tanh)
      .def("exp", &Tensor::exp)
      .def("log", &Tensor::log)
      .def("sqrt", &Tensor::sqrt)
      .def("neg", &Tensor::neg)
      .def("abs", &Tensor::abs)
      .def("erf", &Tensor::erf)
      .def("maximum", &Tensor::maximum)
      .def("minimum", &Tensor::minimum)
      .def("tril", &Tensor::tril)
      .def("triu", &Tensor::triu)
      .def("masked_fill", &Tensor::masked_fill)
      .def("index_select", &Tensor::index_select)
      .def("index_add", &Tensor::index_add)
      .def("gather", &Tensor::gather)
      .def("scatter_add", &Tensor::scatter_add)
      .def("clone", &Tensor::clone)
      .def("gt", py::overload_cast<double>(&Tensor::gt, py::const_))
      .def("gt", py::overload_cast<const Tensor&>(&Tensor::gt, py::const_))
      .def("lt", py::overload_cast<double>(&Tensor::lt, py::const_))
      .def("lt", py::overload_cast<const Tensor&>(&Tensor::lt, py::const_))
      .def("ge", py::overload_cast<double>(&Tensor::ge, py::const_))
      .def("ge", py::overload_cast<const Tensor&>(&Tensor::ge, py::const_))
      .def("le", py::overload_cast<double>(&Tensor::le, py::const_))
      .def("le", py::overload_cast<const Tensor&>(&Tensor::le, py::const_))
      .def("eq", py::overload_cast<double>(&Tensor::eq, py::const_))
      .def("eq", py::overload_cast<const Tensor&>(&Tensor::eq, py::const_))
      // Reductions: empty `axes` reduces over every dimension.
      .def("sum", &Tensor::sum, py::arg("axes"), py::arg("keepdims"))
      .def("mean", &Tensor::mean, py::arg("axes"), py::arg("keepdims"))
      .def("max", static_cast<Reduction>(&Tensor::max), py::arg("axes"), py::arg("keepdims"))
      .def("min", static_cast<Reduction>(&Tensor::min), py::arg("axes"), py::arg("keepdims"))
      .def("var", &Tensor::var, py::arg("axes"), py::arg("correction"), py::arg("keepdims"))
      .def("argmax", &Tensor::argmax, py::arg("dim"), py::arg("keepdims"))
      .def("argmin", &Tensor::argmin, py::arg("dim"), py::arg("keepdims"))
      .def("softmax", &Tensor::softmax)
      .def("log_softmax", &Tensor::log_softmax)
      // Movement.
      .def("reshape", &Tensor::reshape)
      .def("transpose", &Tensor::transpose)
      .def("t", &Tensor::t)
      .def("permute", &Tensor::permute)
      .def("unsqueeze", &Tensor::unsqueeze)
      .def("squeeze", [](const Tensor& self, std::optional<int64_t> dim) { return dim ? self.squeeze(*dim) : self.squeeze(); },
           py::arg("dim") = py::none())
      .def("slice", &Tensor::slice, py::arg("dim"), py::arg("start"), py::arg("stop"), py::arg("step"))
      .def("select", &Tensor::select)
      .def("split", &Tensor::split)
      .def("chunk", &Tensor::chunk)
      // In place (the remote tensor changes; Python returns `self`).
      .def("copy_", [](Tensor& self, const Tensor& src) { self.copy_(src); })
      .def("fill_", [](Tensor& self, double v) { self.fill_(v); })
      .def("assign_result_", [](Tensor& self, const Tensor& result, const std::string& what) {
        self.assign_result_(result, what.c_str());
      })
      .def("iadd", [](Tensor& self, const Tensor& o) { self += o; })
      .def("iadd", [](Tensor& self, double s) { self += s; })
      .def("isub", [](Tensor& self, const Tensor& o) { self -= o; })
      .def("isub", [](Tensor& self, double s) { self -= s; })
      .def("imul", [](Tensor& self, const Tensor& o) { self *= o; })
      .def("imul", [](Tensor& self, double s) { self *= s; })
      .def("add_", [](Tensor& self, const Tensor& o, double alpha) { self.add_(o, alpha); })
      // Sync points.
      .def("numpy", &ToNumpy)
      .def("item", &Tensor::item, py::call_guard<py::gil_scoped_release>())
      // Autograd.
      .def_property_readonly("requires_grad", &Tensor::requires_grad)
      .def("requires_grad_", [](Tensor& self, bool enabled) { self.requires_grad_(enabled); })
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def("grad", [](const Tensor& self) { return OrNone(self.grad()); })
      .def("set_grad", [](Tensor& self, std::optional<Tensor> g) { self.set_grad(g ? *g : Tensor()); })
      .def(
          "backward",
          [](const Tensor& self, std::optional<Tensor> gradient, bool retain_graph) {
            Tensor g = gradient ? *gradient : Tensor();
            py::gil_scoped_release release;
            self.backward(g, retain_graph);
          },
          py::arg("gradient") = py::none(), py::arg("retain_graph") = false)
      .def("detach", &Tensor::detach);

  // Creation.
  m.def("randn", &randn, py::arg("shape"), py::arg("dtype"), py::arg("seed"));
  m.def("rand", &rand, py::arg("shape"), py::arg("dtype"), py::arg("seed"));
  m.def("zeros", &zeros, py::arg("shape"), py::arg("dtype"));
  m.def("check_in_place_cast", [](DType result, DType destination, const std::string& what) {
    check_in_place_cast(result, destination, what.c_str());
  });
  m.def("ones", &ones, py::arg("shape"), py::arg("dtype"));
  m.def("arange", &arange, py::arg("start"), py::arg("end"), py::arg("step"), py::arg("dtype"));
  m.def("cat", &cat, py::arg("tensors"), py::arg("dim"));
  m.def("where", py::overload_cast<const Tensor&, const Tensor&, const Tensor&>(&where));
  m.def("where", py::overload_cast<const Tensor&, double, const Tensor&>(&where));
  m.def("where", py::overload_cast<const Tensor&, const Tensor&, double>(&where));
  m.def("from_numpy", &FromNumpy, py::arg("array"), py::arg("shape"), py::arg("dtype"));

  // Convolution and pooling (gt/nn.h); pairs are (height, width).
  m.def(
      "conv2d",
      [](const Tensor& x, const Tensor& weight, std::optional<Tensor> bias, nn::Pair stride, nn::Pair padding,
         nn::Pair dilation, int64_t groups) {
        return nn::conv2d(x, weight, bias ? *bias : Tensor(), stride, padding, dilation, groups);
      },
      py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("stride"), py::arg("padding"),
        py::arg("dilation"), py::arg("groups"));
  m.def("max_pool2d", &nn::max_pool2d, py::arg("x"), py::arg("kernel"), py::arg("stride"), py::arg("padding"),
        py::arg("dilation"), py::arg("ceil_mode"));
  m.def("avg_pool2d", &nn::avg_pool2d, py::arg("x"), py::arg("kernel"), py::arg("stride"), py::arg("padding"),
        py::arg("ceil_mode"), py::arg("count_include_pad"));
  m.def("adaptive_avg_pool2d", &nn::adaptive_avg_pool2d, py::arg("x"), py::arg("output_size"));

  // Grad mode, signal scopes, the tape.
  m.def("is_grad_enabled", &is_grad_enabled);
  m.def("set_grad_enabled", &set_grad_enabled);
  m.def(
      "signal_enter",
      [](const std::string& name, bool compile, const std::string& backward) {
        signal_enter(name, SignalOptions{compile, backward});
      },
      py::arg("name"), py::arg("compile") = false, py::arg("backward") = "");
  m.def("current_backward_signal", &current_backward_signal);
  m.def("signal_exit", &signal_exit);
  m.def("current_signal", &current_signal);
  m.def("tape", &TapeAsDicts);
  m.def("clear_tape", &clear_tape);

  // The session.
  m.def("connect", &connect);
  m.def("workers", &workers);
  m.def("sync", &sync, py::call_guard<py::gil_scoped_release>());
  m.def("shutdown", &shutdown, py::call_guard<py::gil_scoped_release>());
}

}  // namespace gt::python
