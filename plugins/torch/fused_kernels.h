// Kernels for the unit planner's fused steps (unit_plan.h) where no single
// ATen call rounds the way the pattern it replaces does.
//
// Thread-safety: plain functions; the caller owns the tensors.
#pragma once

#include <ATen/ATen.h>

#include <vector>

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

// layer_norm without weight or bias over the last `cols` elements (the
// normalized dims, flattened) of each row of x: (x - mean) / sqrt(var + eps)
// with the biased variance, as at::layer_norm, in one pass per row that
// stays in cache (ATen's kernel costs 24 us for 512 rows of 64 here, an add
// over them 3 us). The statistics accumulate in x's dtype over fixed vector
// lanes, the mean shifted by the row's first element, the variance from the
// deviations: close to ATen's float Welford moments, not bit for bit. A
// constant row's mean is that constant exactly (so eps 0 gives NaN there,
// as in PyTorch); a float32 row whose squared deviations overflow float is
// computed in double, and gets its true normalized values where ATen gives
// NaN. Returns an undefined tensor unless x is a contiguous float32 or
// float64 tensor with cols > 0 dividing its numel.
at::Tensor LayerNormRows(const at::Tensor& x, int64_t cols, double eps);

// The gradient of LayerNormRows(x, cols, eps) for the output gradient g (the
// same shape and dtype), the row statistics recomputed from x: rstd * (g -
// mean(g) - xhat * mean(g * xhat)). Returns an undefined tensor unless g and
// x are contiguous float32 or float64 tensors of one dtype and shape, with
// cols > 0 dividing their numel.
at::Tensor LayerNormRowsBackward(const at::Tensor& g, const at::Tensor& x, int64_t cols, double eps);

// The sum of the squares of every element of every tensor, as a 0-d tensor
// of their dtype: each tensor's sum over vector lanes, added in order (the
// ATen formulation is a reshape, a dot and an add per tensor, ~2 us each
// for a model's 31 gradients). Returns an undefined tensor unless all are
// contiguous float32 or float64 tensors of one dtype.
at::Tensor SumOfSquaresAll(const std::vector<at::Tensor>& tensors);

// The scalars of one Adam/AdamW step, as kernels.cc's AdamStep reads them.
struct AdamCoefficients {
  double lr, beta1, beta2, eps, weight_decay;
  double correction1, correction2;  // 1 - beta^t, both > 0
  bool decoupled;                   // AdamW: decay p itself; Adam: add weight_decay * p to g
};

// One Adam step for every element in one pass: p, m (exp_avg) and v
// (exp_avg_sq) updated in place from g, in the order of operations of
// PyTorch's single-tensor Adam/AdamW, with its scalars rounded to the
// tensors' dtype, and each step rounded as the ATen kernel it replaces
// rounds on this CPU (fused multiply-adds where ATen's vectorized kernels
// use them), so the result is PyTorch's to the bit: the ATen formulation is
// seven kernels and three temporaries. Does nothing and returns false
// unless all four are contiguous float32 or float64 tensors of one dtype
// and shape with no memory in common.
bool AdamUpdate(at::Tensor& p, const at::Tensor& g, at::Tensor& m, at::Tensor& v, const AdamCoefficients& c);

}  // namespace gt::torch_backend
