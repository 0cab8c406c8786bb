// Built with -ffp-contract=off (CMakeLists.txt): the compiler must not
// contract `p - g * s` into a fused multiply-add. And with the loop
// vectorizer on (-O2 leaves these loops scalar: they would need a runtime
// alias check): a vector lane rounds exactly as the scalar code does, and
// `ivdep` holds because each element is read and written at its own index
// (p and g are either disjoint or the same tensor). And with -fno-math-errno,
// so that sqrt has no error path and vectorizes: nothing here reads errno.
#include "fused_kernels.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdint>

namespace gt::torch_backend {
namespace {

template <typename T>
void SubtractScaled(T* p, const T* g, T s, int64_t n) {
#pragma GCC ivdep
  for (int64_t i = 0; i < n; ++i) {
    const T t = g[i] * s;
    p[i] = p[i] - t;
  }
}

template <typename T>
void MaskedProduct(const T* g, const T* x, T* __restrict out, int64_t n) {
#pragma GCC ivdep
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] * (x[i] > T(0) ? T(1) : T(0));
}

// PyTorch's single-tensor AdamW (torch/optim/adamw.py) element by element,
// each line the ATen kernel it replaces (mul_, add_ with alpha, addcmul_,
// sqrt, div, add_, addcdiv_).
template <typename T, bool kDecoupled>
void AdamElements(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, int64_t n,
                  const AdamCoefficients& c) {
  const T decay = static_cast<T>(1 - c.lr * c.weight_decay), weight_decay = static_cast<T>(c.weight_decay);
  const T beta1 = static_cast<T>(c.beta1), one_minus_beta1 = static_cast<T>(1 - c.beta1);
  const T beta2 = static_cast<T>(c.beta2), one_minus_beta2 = static_cast<T>(1 - c.beta2);
  const T sqrt_correction2 = static_cast<T>(std::sqrt(c.correction2)), eps = static_cast<T>(c.eps);
  const T step = static_cast<T>(-c.lr / c.correction1);
  for (int64_t i = 0; i < n; ++i) {
    T grad = g[i];
    if constexpr (kDecoupled) {
      p[i] = p[i] * decay;
    } else {
      grad = grad + p[i] * weight_decay;
    }
    m[i] = m[i] * beta1 + one_minus_beta1 * grad;
    v[i] = v[i] * beta2 + one_minus_beta2 * grad * grad;
    const T denom = std::sqrt(v[i]) / sqrt_correction2 + eps;
    p[i] = p[i] + step * m[i] / denom;
  }
}

template <typename T>
void AdamRange(at::Tensor& p, const at::Tensor& g, at::Tensor& m, at::Tensor& v, const AdamCoefficients& c) {
  // weight_decay 0 takes neither branch's extra operation, as PyTorch skips it.
  AdamCoefficients plain = c;
  if (c.weight_decay == 0) plain.decoupled = true;
  auto* const run = plain.decoupled ? &AdamElements<T, true> : &AdamElements<T, false>;
  T* const p_data = p.data_ptr<T>();
  const T* const g_data = g.data_ptr<T>();
  T* const m_data = m.data_ptr<T>();
  T* const v_data = v.data_ptr<T>();
  at::parallel_for(0, p.numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
    run(p_data + begin, g_data + begin, m_data + begin, v_data + begin, end - begin, plain);
  });
}

bool SameFloatLayout(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType type = a.scalar_type();
  return type == b.scalar_type() && (type == at::kFloat || type == at::kDouble) && a.sizes().equals(b.sizes()) &&
         a.is_contiguous() && b.is_contiguous();
}

bool Disjoint(const at::Tensor& a, const at::Tensor& b) {
  return at::get_overlap_status(a, b) == at::MemOverlapStatus::No;
}

}  // namespace

bool AdamUpdate(at::Tensor& p, const at::Tensor& g, at::Tensor& m, at::Tensor& v, const AdamCoefficients& c) {
  if (!SameFloatLayout(p, g) || !SameFloatLayout(p, m) || !SameFloatLayout(p, v)) return false;
  if (!Disjoint(p, g) || !Disjoint(p, m) || !Disjoint(p, v) || !Disjoint(g, m) || !Disjoint(g, v) || !Disjoint(m, v))
    return false;
  if (p.scalar_type() == at::kFloat) {
    AdamRange<float>(p, g, m, v, c);
  } else {
    AdamRange<double>(p, g, m, v, c);
  }
  return true;
}

bool ScaledSubtractInto(at::Tensor& p, const at::Tensor& g, double s) {
  if (!SameFloatLayout(p, g)) return false;
  const at::ScalarType type = p.scalar_type();
  const at::MemOverlapStatus overlap = at::get_overlap_status(p, g);
  if (overlap != at::MemOverlapStatus::No && overlap != at::MemOverlapStatus::Full) return false;
  if (type == at::kFloat) {
    SubtractScaled(p.data_ptr<float>(), g.data_ptr<float>(), static_cast<float>(s), p.numel());
  } else {
    SubtractScaled(p.data_ptr<double>(), g.data_ptr<double>(), s, p.numel());
  }
  return true;
}

at::Tensor ReluGradient(const at::Tensor& g, const at::Tensor& x) {
  if (!SameFloatLayout(g, x)) return at::Tensor();
  at::Tensor out = at::empty_like(g);
  if (g.scalar_type() == at::kFloat) {
    MaskedProduct(g.data_ptr<float>(), x.data_ptr<float>(), out.data_ptr<float>(), g.numel());
  } else {
    MaskedProduct(g.data_ptr<double>(), x.data_ptr<double>(), out.data_ptr<double>(), g.numel());
  }
  return out;
}

}  // namespace gt::torch_backend
