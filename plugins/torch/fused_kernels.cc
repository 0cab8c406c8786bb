// Built with -ffp-contract=off (CMakeLists.txt): the compiler must not
// contract `p - g * s` into a fused multiply-add. And with the loop
// vectorizer on (-O2 leaves these loops scalar: they would need a runtime
// alias check): a vector lane rounds exactly as the scalar code does, and
// `ivdep` holds because each element is read and written at its own index
// (p and g are either disjoint or the same tensor).
#include "fused_kernels.h"

#include <ATen/MemoryOverlap.h>

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

bool SameFloatLayout(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType type = a.scalar_type();
  return type == b.scalar_type() && (type == at::kFloat || type == at::kDouble) && a.sizes().equals(b.sizes()) &&
         a.is_contiguous() && b.is_contiguous();
}

}  // namespace

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
