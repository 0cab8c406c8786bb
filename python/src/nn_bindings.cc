// gt::nn as `_C.Linear`, `_C.mse_loss`, ..., and the pieces of the optimizers
// (`_C.adam_step_`, `_C.settle_gradients`). python/gt/nn wraps the modules and
// losses; python/gt/optim builds PyTorch's optimizers from the pieces.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <vector>

#include "bindings.h"
#include "gt/nn.h"

namespace py = pybind11;

namespace gt::python {

void BindNN(py::module_& m) {
  py::class_<nn::Linear>(m, "Linear")
      .def(py::init<int64_t, int64_t, bool, uint64_t>(), py::arg("in_features"), py::arg("out_features"),
           py::arg("bias"), py::arg("seed"))
      // Copies of the handles (same remote tensors, same autograd state).
      .def_property_readonly("weight", [](const nn::Linear& l) { return l.weight; })
      .def_property_readonly("bias",
                             [](const nn::Linear& l) { return l.bias.defined() ? py::cast(l.bias) : py::none(); })
      .def("forward", &nn::Linear::forward)
      .def("parameters", &nn::Linear::parameters);

  m.def("gelu", &nn::gelu, py::arg("x"));
  m.def("embedding", &nn::embedding, py::arg("indices"), py::arg("weight"));
  m.def(
      "layer_norm",
      [](const Tensor& x, size_t dims, std::optional<Tensor> weight, std::optional<Tensor> bias, double eps) {
        return nn::layer_norm(x, dims, weight.value_or(Tensor()), bias.value_or(Tensor()), eps);
      },
      py::arg("x"), py::arg("dims"), py::arg("weight"), py::arg("bias"), py::arg("eps"));
  m.def("dropout", &nn::dropout, py::arg("x"), py::arg("p"), py::arg("training"), py::arg("seed"));
  m.def("mse_loss", &nn::mse_loss, py::arg("pred"), py::arg("target"));
  m.def("binary_cross_entropy", &nn::binary_cross_entropy, py::arg("probabilities"), py::arg("target"));
  m.def("cross_entropy", &nn::cross_entropy, py::arg("logits"), py::arg("targets"), py::arg("ignore_index") = -100);

  // The pieces gt.optim (Python) builds its optimizers from.
  m.def("settle_gradients", &nn::settle_gradients, py::arg("params"));
  m.def(
      "adam_step_",
      [](Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1, double beta2,
         double eps, double weight_decay, double bias_correction1, double bias_correction2, bool decoupled) {
        nn::adam_step_(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, bias_correction1,
                       bias_correction2, decoupled);
      },
      py::arg("param"), py::arg("grad"), py::arg("exp_avg"), py::arg("exp_avg_sq"), py::arg("lr"), py::arg("beta1"),
      py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"), py::arg("bias_correction1"),
      py::arg("bias_correction2"), py::arg("decoupled"));
  m.def("clip_grad_norm_", &nn::clip_grad_norm_, py::arg("params"), py::arg("max_norm"),
        py::call_guard<py::gil_scoped_release>());
}

}  // namespace gt::python
