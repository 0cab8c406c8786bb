// gt::nn: layers, losses and optimizers over gt tensors, with PyTorch's
// semantics and defaults. Everything here is built from ordinary gt ops, so
// it runs remotely and is recorded for autograd like user code.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "gt/gt.h"

namespace gt::nn {

// y = x @ weight^T + bias; weight is (out, in). Initialised as PyTorch does:
// uniform(-1/sqrt(in), 1/sqrt(in)) for both weight and bias.
class Linear {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::vector<Tensor> parameters() const;

  Tensor weight;
  Tensor bias;  // undefined without bias
};

// x * Phi(x), Phi the standard normal CDF: the exact (erf) GELU, PyTorch's default.
Tensor gelu(const Tensor& x);
// weight's rows at `indices` (int32/int64, any shape): shape indices.shape + [dim].
// The gradient adds into the rows used.
Tensor embedding(const Tensor& indices, const Tensor& weight);
// Normalized over the last `dims` dimensions (mean 0, biased variance 1,
// eps added to it), then scaled by `weight` and shifted by `bias` when given.
Tensor layer_norm(const Tensor& x, size_t dims, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);
// Training: each element zeroed with probability p, the rest scaled by
// 1/(1-p), the mask drawn from `seed` (0: the workers' generators). Else x.
Tensor dropout(const Tensor& x, double p, bool training, uint64_t seed = 0);

// Convolution and pooling over [N, C, H, W] (or one sample [C, H, W]), with
// torch.nn.functional's semantics; pairs are (height, width). conv2d's
// weight is [C_out, C_in / groups, kH, kW], its bias [C_out] or undefined.
using Pair = std::array<int64_t, 2>;
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Pair stride = {1, 1},
              Pair padding = {0, 0}, Pair dilation = {1, 1}, int64_t groups = 1);
// `stride` {0, 0}: the kernel size (PyTorch's default).
Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0}, Pair dilation = {1, 1},
                  bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0}, bool ceil_mode = false,
                  bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, Pair output_size);

// Mean of (pred - target)^2.
Tensor mse_loss(const Tensor& pred, const Tensor& target);
// Mean of -(t log p + (1 - t) log(1 - p)); log clamped at -100 as in PyTorch.
Tensor binary_cross_entropy(const Tensor& probabilities, const Tensor& target);
// Mean over the batch of -log_softmax(logits)[i, target[i]]; `targets` holds
// class indices (int32/int64), `logits` is (batch, classes). Rows whose
// target is ignore_index are left out of the sum and the count (PyTorch's).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

// Both optimizers update parameters in place (no new remote tensor per step)
// and skip parameters whose grad is undefined.
class SGD {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0, double weight_decay = 0);
  void step();
  void zero_grad();  // sets every grad to undefined (PyTorch's set_to_none)

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> velocity_;
  double lr_, momentum_, weight_decay_;
};

class Adam {
 public:
  Adam(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
       double weight_decay = 0);
  void step();
  void zero_grad();

 protected:
  // decoupled: weight decay shrinks the parameters (p *= 1 - lr * wd)
  // instead of joining the gradient (AdamW).
  Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps, double weight_decay,
       bool decoupled);

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> m_, v_;
  double lr_, beta1_, beta2_, eps_, weight_decay_;
  bool decoupled_ = false;
  int64_t steps_ = 0;
};

// One Adam / AdamW update of `param` and its moment estimates in place, as
// one instruction (PyTorch's single-tensor AdamW: m = b1 m + (1 - b1) g,
// v = b2 v + (1 - b2) g^2, p -= lr / c1 * m / (sqrt(v) / sqrt(c2) + eps),
// weight decay decoupled or added to the gradient). Adam::step uses it.
// REQUIRES: the four tensors share one floating dtype and shape (else the
// worker's error at the next sync point), grad mode off or param not
// requiring grad; exp_avg and exp_avg_sq laid out like param (made from it).
void adam_step_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                double beta2, double eps, double weight_decay, double bias_correction1, double bias_correction2,
                bool decoupled);

// Adam with decoupled weight decay, as PyTorch's AdamW (default 0.01).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
        double weight_decay = 1e-2)
      : Adam(std::move(params), lr, beta1, beta2, eps, weight_decay, true) {}
};

// Sums the parameters' pending gradients over data-parallel workers in one
// collective (DDP's bucketing), so that reading them one by one afterwards
// does not settle each alone. Not a sync point; undefined grads skipped. The
// optimizers call it before an update (Python's gt.optim too).
void settle_gradients(const std::vector<Tensor>& params);

// Scales the parameters' gradients in place so that their joint L2 norm is
// at most max_norm (by max_norm / (norm + 1e-6), as PyTorch); returns the
// norm before clipping (a 0-d tensor: no sync point). Undefined grads skipped.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace gt::nn
