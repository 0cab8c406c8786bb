#include "direct_kernels.h"

#include <ATen/TensorIterator.h>  // at::internal::GRAIN_SIZE

#include <cstdint>

namespace gt::torch_backend {
namespace {

static_assert(kDirectMaxElements == at::internal::GRAIN_SIZE, "ATen's grain size changed");

// One loop per (operation, which side is a scalar): the compiler vectorizes
// each (compiled with -ffp-contract=off: one rounding per element, as ATen).
template <typename T, typename F>
void Loop(const T* a, const T* b, bool a_scalar, bool b_scalar, T* out, int64_t n, F f) {
  if (a_scalar) {
    const T s = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = f(s, b[i]);
  } else if (b_scalar) {
    const T s = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], s);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  }
}

template <typename T>
void Typed(Op op, const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  const T* pa = a.data_ptr<T>();
  const T* pb = b.data_ptr<T>();
  T* po = out.data_ptr<T>();
  const bool sa = a.dim() == 0, sb = b.dim() == 0;
  const int64_t n = out.numel();
  switch (op) {
    case Op::kAdd: return Loop(pa, pb, sa, sb, po, n, [](T x, T y) { return x + y; });
    case Op::kSub: return Loop(pa, pb, sa, sb, po, n, [](T x, T y) { return x - y; });
    case Op::kMul: return Loop(pa, pb, sa, sb, po, n, [](T x, T y) { return x * y; });
    default: return Loop(pa, pb, sa, sb, po, n, [](T x, T y) { return x / y; });  // kDiv
  }
}

}  // namespace

bool DirectBinarySupports(Op op, int64_t numel) {
  const bool arithmetic = op == Op::kAdd || op == Op::kSub || op == Op::kMul || op == Op::kDiv;
  return arithmetic && numel > 0 && numel < kDirectMaxElements;
}

void DirectBinary(Op op, const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  if (out.scalar_type() == at::kDouble) return Typed<double>(op, a, b, out);
  Typed<float>(op, a, b, out);
}

}  // namespace gt::torch_backend
