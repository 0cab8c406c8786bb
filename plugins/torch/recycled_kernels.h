// The ops whose result the torch backend writes into a tensor its client
// freed (TensorCache) instead of a fresh one, with ATen's *_out kernels.
//
// Only where the out kernel computes exactly what Compute() (kernels.h)
// would, values and layout alike: the result of each is contiguous either
// way, and the same ATen kernel fills it.
//   - add, sub, mul, div, maximum, minimum and the comparisons, on two
//     contiguous operands of one shape and one floating dtype, or on one
//     and a scalar made in its dtype (as kernels::Binary makes it);
//   - exp, log, sqrt, neg, abs, sigmoid, tanh, erf of a contiguous
//     floating operand;
//   - matmul of two 2-D operands of one floating dtype (ATen's matmul is
//     mm there).
// Small add, sub, mul and div are computed by DirectBinary
// (direct_kernels.h), into a fresh tensor when none was kept.
// A cache that keeps nothing (tensor_cache_mib: 0) turns all of it off, the
// direct kernels included: every op is then ATen's own call, as before.
// Everything else, and any instruction whose operands are missing or do not
// fit (whose error Compute() words), is left to Compute().
//
// Thread-safety: the pipeline thread only.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "gt/instruction.h"
#include "kernels.h"
#include "tensor_cache.h"

namespace gt::torch_backend {

class RecycledKernels {
 public:
  // REQUIRES: `cache` outlives this object.
  explicit RecycledKernels(TensorCache& cache) : cache_(cache) {}

  // The result of `inst`, written into a tensor of its client that `cache`
  // kept (or, for the direct kernels, a fresh one); undefined when `inst` is
  // not one of the ops above, its operands do not fit, or nothing of the
  // result's size was kept. May throw c10::Error (as Compute()).
  at::Tensor TryCompute(const Instruction& inst, TensorSource source);

 private:
  at::Tensor Binary(const Instruction& inst, TensorSource source);
  at::Tensor Unary(const Instruction& inst, TensorSource source);
  at::Tensor Matmul(const Instruction& inst, TensorSource source);
  // The 0-d tensor of `value` in `dtype` that kernels::Binary makes for a
  // scalar operand; the last one is kept and given again for the same
  // value, which a loop of `x + 1.0` asks for every time.
  const at::Tensor& ScalarOperand(at::ScalarType dtype, double value);

  TensorCache& cache_;
  at::Tensor scalar_;
  uint64_t scalar_bits_ = 0;  // scalar_'s value, bit for bit (0.0 is not -0.0)
};

}  // namespace gt::torch_backend
