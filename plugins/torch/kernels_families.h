// The torch backend's kernels by family, one function per kind of op that
// Compute() (kernels.h) routes to by the op's ShapeRule (gt/ops.def):
// kernels_elementwise.cc, kernels_shape.cc and kernels_conv.cc. Each reads its operands from
// `source`, checks what ATen would not, and makes the result with ATen
// calls; an op outside its family gives Internal. May throw c10::Error.
//
// Thread-safety: plain functions; the caller owns the tensors.
#pragma once

#include "kernels.h"

namespace gt::torch_backend::kernels {

// kernels_elementwise.cc
Result<at::Tensor> Binary(const Instruction& inst, TensorSource source);  // a scalar side wrapped as PyTorch's
Result<at::Tensor> Where(const Instruction& inst, TensorSource source);
Result<at::Tensor> Matmul(const Instruction& inst, TensorSource source);
Result<at::Tensor> Unary(const Instruction& inst, TensorSource source);  // with tril / triu and redistribute
Result<at::Tensor> FusedBackward(const Instruction& inst, TensorSource source);  // {grad, x}
Result<at::Tensor> CrossEntropy(const Instruction& inst, TensorSource source);
Result<at::Tensor> MseLoss(const Instruction& inst, TensorSource source);

// kernels_shape.cc
Result<at::Tensor> Reduce(const Instruction& inst, TensorSource source);  // with argmax / argmin
Result<at::Tensor> SumOfSquares(const Instruction& inst, TensorSource source);
Result<at::Tensor> Movement(const Instruction& inst, TensorSource source);  // one operand
Result<at::Tensor> Cat(const Instruction& inst, TensorSource source);
Result<at::Tensor> Indexing(const Instruction& inst, TensorSource source);

// kernels_conv.cc
Result<at::Tensor> Conv(const Instruction& inst, TensorSource source);  // conv2d and its backward
Result<at::Tensor> Pool(const Instruction& inst, TensorSource source);  // the poolings and their backwards

}  // namespace gt::torch_backend::kernels
