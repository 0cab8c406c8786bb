// gt::nn's convolution and pooling (nn.h): one instruction each, its
// attributes as gt/ops.def lays them out; the shape rule checks them.
#include "gt/nn.h"
#include "tensor_issue.h"

namespace gt::nn {
namespace {

Tensor IssueWith(Op op, std::vector<int64_t> axes, const std::vector<Tensor>& operands, double scalar = 0) {
  Instruction inst;
  inst.op = op;
  inst.attrs.axes = std::move(axes);
  inst.attrs.scalar = scalar;
  return client_internal::Issue(std::move(inst), operands);
}

Pair OrKernel(Pair stride, Pair kernel) { return stride == Pair{0, 0} ? kernel : stride; }

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Pair stride, Pair padding, Pair dilation,
              int64_t groups) {
  std::vector<int64_t> axes = {stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], groups};
  if (bias.defined()) return IssueWith(Op::kConv2d, std::move(axes), {x, weight, bias});
  return IssueWith(Op::kConv2d, std::move(axes), {x, weight});
}

Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding, Pair dilation, bool ceil_mode) {
  stride = OrKernel(stride, kernel);
  // scalar 1: the autograd records this pooling, so the worker keeps the
  // window positions for its backward instead of finding them again.
  const bool recorded = is_grad_enabled() && x.requires_grad();
  return IssueWith(Op::kMaxPool2d,
                   {kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1],
                    ceil_mode ? 1 : 0},
                   {x}, recorded ? 1 : 0);
}

Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding, bool ceil_mode, bool count_include_pad) {
  stride = OrKernel(stride, kernel);
  return IssueWith(Op::kAvgPool2d,
                   {kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1], ceil_mode ? 1 : 0,
                    count_include_pad ? 1 : 0},
                   {x});
}

Tensor adaptive_avg_pool2d(const Tensor& x, Pair output_size) {
  return IssueWith(Op::kAdaptiveAvgPool2d, {output_size[0], output_size[1]}, {x});
}

}  // namespace gt::nn
