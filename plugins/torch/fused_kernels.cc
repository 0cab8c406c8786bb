// Built with -ffp-contract=off (CMakeLists.txt): the compiler must not
// contract `p - g * s` into a fused multiply-add.
#include "fused_kernels.h"

#include <ATen/MemoryOverlap.h>

#include <cstdint>

namespace gt::torch_backend {
namespace {

template <typename T>
void SubtractScaled(T* p, const T* g, T s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T t = g[i] * s;
    p[i] = p[i] - t;
  }
}

}  // namespace

bool ScaledSubtractInto(at::Tensor& p, const at::Tensor& g, double s) {
  const at::ScalarType type = p.scalar_type();
  if (type != g.scalar_type() || (type != at::kFloat && type != at::kDouble)) return false;
  if (!p.sizes().equals(g.sizes()) || !p.is_contiguous() || !g.is_contiguous()) return false;
  const at::MemOverlapStatus overlap = at::get_overlap_status(p, g);
  if (overlap != at::MemOverlapStatus::No && overlap != at::MemOverlapStatus::Full) return false;
  if (type == at::kFloat) {
    SubtractScaled(p.data_ptr<float>(), g.data_ptr<float>(), static_cast<float>(s), p.numel());
  } else {
    SubtractScaled(p.data_ptr<double>(), g.data_ptr<double>(), s, p.numel());
  }
  return true;
}

}  // namespace gt::torch_backend
