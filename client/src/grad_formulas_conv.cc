// The gradient formulas of the convolution and the poolings (grad_formulas.h):
// each a fused backward op, as LibTorch's autograd calls
// convolution_backward and the pooling backwards.
#include "grad_formulas.h"

namespace gt::client_internal {
namespace {

// `g` in the forward output's dtype (a wider gradient from downstream, as
// PyTorch's autograd lets it come): the backward kernels take one dtype.
Tensor InOutputDType(const Tensor& g, const Node& n) {
  if (g.dtype() == n.output.dtype()) return g;
  Tensor cast = zeros(g.shape(), n.output.dtype());
  cast.copy_(g);
  return cast;
}

// conv2d {x, weight[, bias]}: x's and the weight's gradients one backward op
// each (only those needed), the bias's the gradient summed over all but the
// channel dim.
std::vector<Tensor> ConvGrads(const Node& n, const Tensor& grad) {
  const Tensor g = InOutputDType(grad, n);
  const std::vector<Tensor> operands = {g, n.inputs[0], n.inputs[1]};
  auto needs = [&](size_t i) { return i < n.inputs.size() && n.inputs[i].requires_grad(); };
  std::vector<Tensor> grads(n.inputs.size());
  if (needs(0)) grads[0] = IssueFused(Op::kConv2dBackward, operands, n.attrs.axes, 0);
  if (needs(1)) grads[1] = IssueFused(Op::kConv2dBackward, operands, n.attrs.axes, 1);
  if (needs(2)) grads[2] = g.dim() == 4 ? g.sum({0, 2, 3}, false) : g.sum({1, 2}, false);
  return grads;
}

Op BackwardOf(Op pooling) {
  switch (pooling) {
    case Op::kMaxPool2d: return Op::kMaxPool2dBackward;
    case Op::kAvgPool2d: return Op::kAvgPool2dBackward;
    default: return Op::kAdaptiveAvgPool2dBackward;  // REQUIRES: a pooling
  }
}

}  // namespace

std::vector<Tensor> ConvOrPoolGrads(const Node& n, const Tensor& g) {
  if (n.op == Op::kConv2d) return ConvGrads(n, g);
  return {IssueFused(BackwardOf(n.op), {InOutputDType(g, n), n.inputs[0]}, n.attrs.axes)};
}

}  // namespace gt::client_internal
