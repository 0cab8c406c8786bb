// Kernels for the unit planner's fused steps (unit_plan.h) where no single
// ATen call rounds the way the pattern it replaces does.
//
// Thread-safety: plain functions; the caller owns the tensors.
#pragma once

#include <ATen/ATen.h>

namespace gt::torch_backend {

// p -= s * g in one pass, rounded exactly as `t = g * s; p.copy_(p - t)` is
// in p's dtype (two roundings, never a fused multiply-add: ATen's
// `p.sub_(g, alpha)` rounds once and so differs by up to an ulp, which is a
// large relative error where p - t cancels). Does nothing and returns false
// unless p and g are contiguous float32 or float64 tensors of one dtype and
// one shape whose memory is either the same or disjoint.
bool ScaledSubtractInto(at::Tensor& p, const at::Tensor& g, double s);

// g * (x > 0 ? 1 : 0) in one pass and one new tensor, value for value what
// `g * gt(x, 0)` gives (so -0.0 where g < 0 and x <= 0, NaN where g is NaN
// or infinite and x <= 0, 0 where x is NaN): relu's gradient. Returns an
// undefined tensor unless g and x are contiguous float32 or float64 tensors
// of one dtype and one shape.
at::Tensor ReluGradient(const at::Tensor& g, const at::Tensor& x);

}  // namespace gt::torch_backend
