#include "gt/nn.h"

#include <cmath>

#include "tensor_impl.h"

namespace gt::nn {
namespace {

// uniform(-bound, bound), made remotely.
Tensor Uniform(Shape shape, double bound, uint64_t seed) {
  NoGradGuard no_grad;
  return rand(std::move(shape), DType::kFloat32, seed) * (2 * bound) - bound;
}

uint64_t NextSeed(uint64_t seed, uint64_t salt) { return seed == 0 ? 0 : seed * 2654435761u + salt; }

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, uint64_t seed) {
  if (in_features <= 0 || out_features <= 0)
    throw Error(Code::kInvalidArgument, "Linear: features must be positive, got " + std::to_string(in_features) +
                                            " -> " + std::to_string(out_features));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = Uniform({out_features, in_features}, bound, NextSeed(seed, 1));
  weight.requires_grad_();
  if (with_bias) {
    bias = Uniform({out_features}, bound, NextSeed(seed, 2));
    bias.requires_grad_();
  }
}

Tensor Linear::forward(const Tensor& x) const {
  Tensor y = x.matmul(weight.t());
  return bias.defined() ? y + bias : y;
}

std::vector<Tensor> Linear::parameters() const {
  std::vector<Tensor> p = {weight};
  if (bias.defined()) p.push_back(bias);
  return p;
}

Tensor mse_loss(const Tensor& pred, const Tensor& target) {
  // One op each way (LibTorch's mse_loss kernels) where the tensors are whole
  // and alike; else the composite, which broadcasts and which the sharding
  // stage runs where the elements are.
  if (pred.shape() == target.shape() && pred.dtype() == target.dtype() && IsFloatingPoint(pred.dtype()) &&
      !client_internal::SessionPlaces(pred))
    return client_internal::IssueFused(Op::kMseLoss, {pred, target});
  Tensor diff = pred - target;
  return (diff * diff).mean();
}

Tensor binary_cross_entropy(const Tensor& p, const Tensor& target) {
  // log clamped below at -100, as PyTorch does, so p = 0 or 1 stays finite.
  // max(log x, -100) written so that log 0 = -inf gives -100, not nan.
  Tensor log_p = (p.log() + 100.0).relu() - 100.0;
  Tensor log_q = ((1.0 - p).log() + 100.0).relu() - 100.0;
  return -(target * log_p + (1.0 - target) * log_q).mean();
}

// One op each way (op.h's fused composites) where x * (erf(x / sqrt 2) + 1) / 2
// was four forward and about ten backward.
Tensor gelu(const Tensor& x) { return client_internal::IssueFused(Op::kGelu, {x}); }

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  if (weight.dim() != 2)
    throw Error(Code::kInvalidArgument, "embedding: expects a 2-D weight (num_embeddings, embedding_dim), got " +
                                            ShapeToString(weight.shape()));
  Shape shape = indices.shape();
  shape.push_back(weight.shape()[1]);
  return weight.index_select(0, indices.reshape({-1})).reshape(shape);
}

Tensor layer_norm(const Tensor& x, size_t dims, const Tensor& weight, const Tensor& bias, double eps) {
  const size_t rank = x.shape().size();
  if (dims == 0 || dims > rank)
    throw Error(Code::kInvalidArgument, "layer_norm: cannot normalize over the last " + std::to_string(dims) +
                                            " dimension(s) of a tensor of shape " + ShapeToString(x.shape()));
  // The normalization is one op each way (op.h's fused composites; nine
  // elementwise ops forward and about twenty backward as a composition).
  Tensor y = client_internal::IssueFused(Op::kLayerNorm, {x}, {static_cast<int64_t>(dims)}, eps);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

Tensor dropout(const Tensor& x, double p, bool training, uint64_t seed) {
  if (!(p >= 0 && p <= 1)) throw Error(Code::kInvalidArgument, "dropout: p must be in [0, 1], got " + std::to_string(p));
  if (!training || p == 0) return x;
  if (p == 1) return x * 0.0;
  const Tensor keep = rand(x.shape(), IsFloatingPoint(x.dtype()) ? x.dtype() : DType::kFloat32, seed).ge(p);
  return x * keep * (1.0 / (1.0 - p));
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  if (logits.dim() != 2 || targets.dim() != 1 || targets.shape()[0] != logits.shape()[0])
    throw Error(Code::kInvalidArgument, "cross_entropy: expects logits (batch, classes) and targets (batch), got " +
                                            ShapeToString(logits.shape()) + " and " + ShapeToString(targets.shape()));
  if (IsFloatingPoint(targets.dtype()))
    throw Error(Code::kInvalidArgument, "cross_entropy: targets must hold class indices (int32/int64), got " +
                                            std::string(DTypeName(targets.dtype())));
  // One op each way (LibTorch's log_softmax + nll_loss) where the tensors
  // are whole; a session that places tensors keeps the composite below, whose
  // pieces the sharding stage runs where the rows are.
  if (IsFloatingPoint(logits.dtype()) && (targets.dtype() == DType::kInt64 || targets.dtype() == DType::kInt32) &&
      !client_internal::SessionPlaces(logits))
    return client_internal::IssueFused(Op::kCrossEntropy, {logits, targets}, {}, static_cast<double>(ignore_index));
  // Each row's log-probability of its class, gathered; rows whose target is
  // ignore_index count for nothing (their index made safe for the gather).
  Tensor keep, picked_class;
  {
    NoGradGuard no_grad;
    const Tensor ignored = targets.eq(static_cast<double>(ignore_index));  // bool mask
    keep = ignored.eq(0.0).unsqueeze(1);
    if (logits.dtype() == DType::kFloat64) keep = keep * ones({1}, DType::kFloat64);
    picked_class = where(ignored, 0.0, targets).unsqueeze(1);
  }
  const Tensor picked = logits.log_softmax(1).gather(1, picked_class) * keep;
  return -picked.sum() / keep.sum();
}

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay)
    : params_(std::move(params)), velocity_(params_.size()), lr_(lr), momentum_(momentum), weight_decay_(weight_decay) {
  if (lr < 0) throw Error(Code::kInvalidArgument, "SGD: lr must be >= 0, got " + std::to_string(lr));
}

namespace {

// The parameters' gradients, summed over data-parallel workers in one
// collective before they are read one by one (client_internal::SettleTogether).
void SettleGradients(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (const Tensor& p : params) grads.push_back(p.grad());
  client_internal::SettleTogether(grads);
}

}  // namespace

void settle_gradients(const std::vector<Tensor>& params) { SettleGradients(params); }

void SGD::step() {
  NoGradGuard no_grad;
  SettleGradients(params_);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (weight_decay_ != 0) g = g + p * weight_decay_;
    if (momentum_ != 0) {
      if (!velocity_[i].defined()) {
        velocity_[i] = g.clone();
      } else {
        velocity_[i].copy_(velocity_[i] * momentum_ + g);
      }
      g = velocity_[i];
    }
    p.sub_(g, lr_);  // one add_into, as PyTorch's p.add_(g, alpha=-lr)
  }
}

void SGD::zero_grad() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps, double weight_decay)
    : Adam(std::move(params), lr, beta1, beta2, eps, weight_decay, false) {}

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps, double weight_decay,
           bool decoupled)
    : params_(std::move(params)), m_(params_.size()), v_(params_.size()), lr_(lr), beta1_(beta1), beta2_(beta2),
      eps_(eps), weight_decay_(weight_decay), decoupled_(decoupled) {
  if (lr < 0) throw Error(Code::kInvalidArgument, "Adam: lr must be >= 0, got " + std::to_string(lr));
  if (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1)
    throw Error(Code::kInvalidArgument, "Adam: betas must be in [0, 1)");
}

void Adam::step() {
  NoGradGuard no_grad;
  ++steps_;
  const double correction1 = 1 - std::pow(beta1_, static_cast<double>(steps_));
  const double correction2 = 1 - std::pow(beta2_, static_cast<double>(steps_));
  SettleGradients(params_);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!m_[i].defined()) {  // zeros laid out like the parameter (under signal configs too)
      m_[i] = p.detach().clone().zero_();
      v_[i] = p.detach().clone().zero_();
    }
    adam_step_(p, g, m_[i], v_[i], lr_, beta1_, beta2_, eps_, weight_decay_, correction1, correction2, decoupled_);
  }
}

void Adam::zero_grad() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return zeros({});
  client_internal::SettleTogether(grads);
  const Tensor norm = client_internal::SumOfSquares(grads).sqrt();
  const Tensor coef = (norm + 1e-6).pow(-1.0) * max_norm;
  const Tensor clamped = where(coef.lt(1.0), coef, 1.0);  // no sync: the scale stays on the worker
  for (Tensor& g : grads) g.mul_(clamped);
  return norm;
}

}  // namespace gt::nn
