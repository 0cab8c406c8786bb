// add, sub, mul and div of small contiguous float32/float64 operands as
// plain loops, for the ops whose results RecycledKernels writes.
//
// ATen computes each element of these with one IEEE operation as well (add
// as a + alpha * b with alpha 1, sub with alpha -1: both exact before the
// one rounding), so the values are ATen's bit for bit. What the loop skips is
// ATen's operator dispatch and TensorIterator set-up, which on a 64x64 add
// cost more than the arithmetic. Only up to ATen's grain size
// (kDirectMaxElements), where ATen runs on one thread too.
//
// Thread-safety: plain functions; the caller owns the tensors.
#pragma once

#include <ATen/ATen.h>

#include "gt/op.h"

namespace gt::torch_backend {

// ATen's grain size (at::internal::GRAIN_SIZE): below it ATen's elementwise
// kernels run on one thread.
inline constexpr int64_t kDirectMaxElements = 32768;

// Whether DirectBinary computes `op` on operands of `numel` elements.
bool DirectBinarySupports(Op op, int64_t numel);

// out = a op b, elementwise. Each of a and b is either a contiguous tensor of
// out's sizes or a 0-d tensor (a scalar on that side).
// REQUIRES: DirectBinarySupports(op, out.numel()); a, b and out are of one
// dtype, float32 or float64; out is contiguous and shares no memory with a
// or b.
void DirectBinary(Op op, const at::Tensor& a, const at::Tensor& b, at::Tensor& out);

}  // namespace gt::torch_backend
