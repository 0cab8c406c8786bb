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

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

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

// How weight decay applies: to p itself (AdamW), added to the gradient
// (Adam), or not at all (Adam with weight_decay 0).
enum class Decay { kNone, kDecoupled, kCoupled };

// PyTorch's single-tensor AdamW (torch/optim/adamw.py) element by element,
// each line the ATen kernel it replaces (mul_, add_ with alpha, addcmul_,
// sqrt, div, add_, addcdiv_), rounded as that kernel rounds: add_ with
// alpha and addcmul_ are one fused multiply-add each where ATen's kernels
// use FMA (kFma, AtenFusesMultiplyAdd), two roundings where they do not.
template <typename T, Decay kDecay, bool kFma>
[[gnu::always_inline]] inline void AdamBody(T* __restrict p, const T* __restrict g, T* __restrict m,
                                            T* __restrict v, int64_t n, const AdamCoefficients& c) {
  const T decay = static_cast<T>(1 - c.lr * c.weight_decay), weight_decay = static_cast<T>(c.weight_decay);
  const T beta1 = static_cast<T>(c.beta1), one_minus_beta1 = static_cast<T>(1 - c.beta1);
  const T beta2 = static_cast<T>(c.beta2), one_minus_beta2 = static_cast<T>(1 - c.beta2);
  const T sqrt_correction2 = static_cast<T>(std::sqrt(c.correction2)), eps = static_cast<T>(c.eps);
  const T step = static_cast<T>(-c.lr / c.correction1);
  for (int64_t i = 0; i < n; ++i) {
    T grad = g[i];
    if constexpr (kDecay == Decay::kDecoupled) p[i] = p[i] * decay;
    if constexpr (kDecay == Decay::kCoupled) grad = kFma ? std::fma(p[i], weight_decay, grad) : grad + p[i] * weight_decay;
    const T m_decayed = m[i] * beta1, v_decayed = v[i] * beta2;
    if constexpr (kFma) {
      m[i] = std::fma(grad, one_minus_beta1, m_decayed);
      v[i] = std::fma(one_minus_beta2 * grad, grad, v_decayed);
    } else {
      m[i] = m_decayed + one_minus_beta1 * grad;
      v[i] = v_decayed + one_minus_beta2 * grad * grad;
    }
    const T denom = std::sqrt(v[i]) / sqrt_correction2 + eps;
    p[i] = p[i] + step * m[i] / denom;
  }
}

template <typename T, Decay kDecay>
void AdamElements(T* p, const T* g, T* m, T* v, int64_t n, const AdamCoefficients& c) {
  AdamBody<T, kDecay, false>(p, g, m, v, n, c);
}

// Called only where ATen's own kernels fuse, which on x86-64 they do only
// on a CPU with AVX2 and FMA: std::fma is then one instruction, and
// vectorizes. (Other targets' baseline has the instruction or emulates it.)
#if defined(__x86_64__)
#define GT_FMA_TARGET __attribute__((target("avx2,fma")))
#else
#define GT_FMA_TARGET
#endif
template <typename T, Decay kDecay>
GT_FMA_TARGET void AdamElementsFma(T* p, const T* g, T* m, T* v, int64_t n,
                                                         const AdamCoefficients& c) {
  AdamBody<T, kDecay, true>(p, g, m, v, n, c);
}

// Whether ATen's add_(other, alpha) rounds a * alpha + b once (its AVX2 and
// AVX-512 kernels are built with FMA) or twice (its default kernels), asked
// of ATen itself once: (1 + 2^-13)^2 - 1 is 2^-12 + 2^-26 with one rounding,
// 2^-12 with two. 64 elements reach its vectorized loop.
bool AtenFusesMultiplyAdd() {
  static const bool fuses = [] {
    const double near_one = 1 + std::ldexp(1.0, -13);
    at::Tensor sum = at::full({64}, -1.0f);
    sum.add_(at::full({64}, static_cast<float>(near_one)), near_one);
    return sum[0].item<float>() != std::ldexp(1.0f, -12);
  }();
  return fuses;
}

template <typename T>
using AdamLoop = void (*)(T*, const T*, T*, T*, int64_t, const AdamCoefficients&);

template <typename T, Decay kDecay>
AdamLoop<T> AdamLoopFor() {
  return AtenFusesMultiplyAdd() ? &AdamElementsFma<T, kDecay> : &AdamElements<T, kDecay>;
}

template <typename T>
void AdamRange(at::Tensor& p, const at::Tensor& g, at::Tensor& m, at::Tensor& v, const AdamCoefficients& c) {
  // As PyTorch 1.13: AdamW multiplies p by 1 - lr * weight_decay whatever
  // weight_decay is (NaN for an infinite lr), Adam adds nothing to g when
  // weight_decay is 0.
  const AdamLoop<T> run = c.decoupled            ? AdamLoopFor<T, Decay::kDecoupled>()
                          : c.weight_decay == 0 ? AdamLoopFor<T, Decay::kNone>()
                                                : AdamLoopFor<T, Decay::kCoupled>();
  T* const p_data = p.data_ptr<T>();
  const T* const g_data = g.data_ptr<T>();
  T* const m_data = m.data_ptr<T>();
  T* const v_data = v.data_ptr<T>();
  at::parallel_for(0, p.numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
    run(p_data + begin, g_data + begin, m_data + begin, v_data + begin, end - begin, c);
  });
}

// One 16-byte vector of T (four floats, two doubles): ops on it are
// elementwise, in the SSE registers every x86-64 has. (A wider GCC vector is
// split into halves that go through memory on each iteration.)
template <typename T>
struct VectorType;
template <>
struct VectorType<float> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct VectorType<double> {
  typedef double type __attribute__((vector_size(16)));
};
template <typename T>
using Vector = typename VectorType<T>::type;
template <typename T>
constexpr int kVectorLanes = sizeof(Vector<T>) / sizeof(T);
static_assert(kVectorLanes<float> == 4 && kVectorLanes<double> == 2);

template <typename T>
Vector<T> LoadVector(const T* p) {
  Vector<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The sum of n terms over 2 * kVectorLanes lanes (two accumulators, for two
// chains of additions in flight), each lane in order, then the lanes
// pairwise: a fixed rounding. lanes(i) gives terms i to i + kVectorLanes - 1,
// term(i) term i alone (the tail).
template <typename T, typename LaneTerms, typename Term>
T LaneSum(int64_t n, LaneTerms lanes, Term term) {
  constexpr int kLanes = kVectorLanes<T>;
  Vector<T> even = {}, odd = {};
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    even += lanes(i);
    odd += lanes(i + kLanes);
  }
  // Pairwise across the lanes: a short chain of dependent additions.
  const Vector<T> both = even + odd;
  T sum;
  if constexpr (kLanes == 4) {
    sum = (both[0] + both[1]) + (both[2] + both[3]);
  } else {
    sum = both[0] + both[1];
  }
  for (; i < n; ++i) sum += term(i);
  return sum;
}

template <typename T>
struct RowMoments {
  T mean, rstd;
};

// A row's moments in double, one element at a time: for the rare float row
// whose squared deviations overflow float.
template <typename T>
RowMoments<T> MomentsInDouble(const T* x, int64_t n, double eps) {
  double sum = 0, squares = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) squares += (x[i] - mean) * (x[i] - mean);
  return {static_cast<T>(mean), static_cast<T>(1 / std::sqrt(squares / static_cast<double>(n) + eps))};
}

// A row's mean and 1 / sqrt(biased variance + eps). The mean is shifted by
// the row's first element: a constant row's mean is that constant exactly
// and its variance 0, as ATen's Welford moments give (with eps 0 its output
// is then NaN, as PyTorch's), and an offset row loses less to rounding.
template <typename T>
RowMoments<T> MomentsOf(const T* x, int64_t n, double eps) {
  const T shift = x[0];
  const T mean = shift + LaneSum<T>(
                             n, [x, shift](int64_t i) { return LoadVector(x + i) - shift; },
                             [x, shift](int64_t i) { return x[i] - shift; }) /
                             static_cast<T>(n);
  const T var = LaneSum<T>(
                    n,
                    [x, mean](int64_t i) {
                      const Vector<T> d = LoadVector(x + i) - mean;
                      return d * d;
                    },
                    [x, mean](int64_t i) { return (x[i] - mean) * (x[i] - mean); }) /
                static_cast<T>(n);
  if (std::isinf(var) && std::is_same_v<T, float>) return MomentsInDouble(x, n, eps);
  return {mean, T(1) / std::sqrt(var + static_cast<T>(eps))};
}

template <typename T>
void NormalizeRows(const T* x, T* __restrict y, int64_t rows, int64_t cols, double eps) {
  at::parallel_for(0, rows, std::max<int64_t>(1, at::internal::GRAIN_SIZE / cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* row = x + r * cols;
      const RowMoments<T> m = MomentsOf(row, cols, eps);
      T* out = y + r * cols;
      for (int64_t i = 0; i < cols; ++i) out[i] = (row[i] - m.mean) * m.rstd;
    }
  });
}

template <typename T>
void NormalizeRowsBackward(const T* g, const T* x, T* __restrict dx, int64_t rows, int64_t cols, double eps) {
  at::parallel_for(0, rows, std::max<int64_t>(1, at::internal::GRAIN_SIZE / cols), [&](int64_t begin, int64_t end) {
    const T n = static_cast<T>(cols);
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * cols;
      const T* gr = g + r * cols;
      const RowMoments<T> m = MomentsOf(xr, cols, eps);
      const T g_mean = LaneSum<T>(cols, [gr](int64_t i) { return LoadVector(gr + i); }, [gr](int64_t i) { return gr[i]; }) / n;
      // mean(g * xhat) = rstd * mean(g * (x - mean)).
      const T gx_mean = m.rstd *
                        LaneSum<T>(
                            cols, [&](int64_t i) { return LoadVector(gr + i) * (LoadVector(xr + i) - m.mean); },
                            [&](int64_t i) { return gr[i] * (xr[i] - m.mean); }) /
                        n;
      T* out = dx + r * cols;
      for (int64_t i = 0; i < cols; ++i) out[i] = m.rstd * (gr[i] - g_mean - (xr[i] - m.mean) * m.rstd * gx_mean);
    }
  });
}

bool RowsOf(const at::Tensor& x, int64_t cols) {
  const at::ScalarType type = x.scalar_type();
  return (type == at::kFloat || type == at::kDouble) && x.is_contiguous() && cols > 0 && x.numel() % cols == 0;
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

at::Tensor LayerNormRows(const at::Tensor& x, int64_t cols, double eps) {
  if (!RowsOf(x, cols)) return at::Tensor();
  at::Tensor y = at::empty_like(x);
  if (x.scalar_type() == at::kFloat) {
    NormalizeRows(x.data_ptr<float>(), y.data_ptr<float>(), x.numel() / cols, cols, eps);
  } else {
    NormalizeRows(x.data_ptr<double>(), y.data_ptr<double>(), x.numel() / cols, cols, eps);
  }
  return y;
}

at::Tensor LayerNormRowsBackward(const at::Tensor& g, const at::Tensor& x, int64_t cols, double eps) {
  if (!RowsOf(x, cols) || !SameFloatLayout(g, x)) return at::Tensor();
  at::Tensor dx = at::empty_like(x);
  const int64_t rows = x.numel() / cols;
  if (x.scalar_type() == at::kFloat) {
    NormalizeRowsBackward(g.data_ptr<float>(), x.data_ptr<float>(), dx.data_ptr<float>(), rows, cols, eps);
  } else {
    NormalizeRowsBackward(g.data_ptr<double>(), x.data_ptr<double>(), dx.data_ptr<double>(), rows, cols, eps);
  }
  return dx;
}

template <typename T>
T SumOfSquares(const at::Tensor& t) {
  const T* x = t.data_ptr<T>();
  return LaneSum<T>(
      t.numel(),
      [x](int64_t i) {
        const Vector<T> v = LoadVector(x + i);
        return v * v;
      },
      [x](int64_t i) { return x[i] * x[i]; });
}

at::Tensor SumOfSquaresAll(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return at::Tensor();
  const at::ScalarType type = tensors[0].scalar_type();
  for (const at::Tensor& t : tensors)
    if (t.scalar_type() != type || (type != at::kFloat && type != at::kDouble) || !t.is_contiguous()) return at::Tensor();
  if (type == at::kFloat) {
    float total = 0;
    for (const at::Tensor& t : tensors) total += SumOfSquares<float>(t);
    return at::scalar_tensor(total, at::kFloat);
  }
  double total = 0;
  for (const at::Tensor& t : tensors) total += SumOfSquares<double>(t);
  return at::scalar_tensor(total, at::kDouble);
}

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
