// The op conformance test: every op that produces a tensor runs through the
// real stack (C++ client -> gt-dispatcher process -> gt-worker process with
// the torch backend plugin) and its result is compared with the same op run
// here, in-process, with ATen on the same inputs.
//
// Adding an op means adding a case to Cases(); EveryTensorOpHasACase fails
// until one exists.
#include <ATen/ATen.h>

#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "connected_cluster.h"
#include "gt/distributed.h"
#include "gt/gt.h"
#include "gt/nn.h"
#include "gt/op.h"

namespace {

using gt::DType;
using gt::Op;

// ---- gt <-> ATen -------------------------------------------------------------

at::ScalarType ToAten(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return at::kFloat;
    case DType::kFloat64: return at::kDouble;
    case DType::kInt32: return at::kInt;
    case DType::kInt64: return at::kLong;
    case DType::kBool: return at::kBool;
    case DType::kCount: break;
  }
  ADD_FAILURE() << "no ATen type for dtype " << static_cast<int>(dtype);
  return at::kFloat;
}

std::optional<DType> FromAten(at::ScalarType type) {
  for (size_t i = 0; i < static_cast<size_t>(DType::kCount); ++i)
    if (ToAten(static_cast<DType>(i)) == type) return static_cast<DType>(i);
  return std::nullopt;
}

gt::Shape ShapeOf(const at::Tensor& t) { return gt::Shape(t.sizes().begin(), t.sizes().end()); }

// Sends `t`'s bytes to the cluster (op from_bytes).
gt::Tensor Send(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  std::optional<DType> dtype = FromAten(c.scalar_type());
  if (!dtype) throw gt::Error(gt::Code::kInvalidArgument, "test input has a non-gt dtype");
  return gt::from_data(c.data_ptr(), c.nbytes(), ShapeOf(c), *dtype);
}

// Fetches `t` (op fetch, a sync point) into an ATen tensor.
at::Tensor Fetch(const gt::Tensor& t) {
  at::Tensor out = at::empty(t.shape(), at::TensorOptions().dtype(ToAten(t.dtype())));
  t.copy_to(out.data_ptr(), out.nbytes());
  return out;
}

// ---- deterministic inputs ------------------------------------------------------

at::Generator Gen(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

// Standard normal float32 values.
at::Tensor Normal(at::IntArrayRef shape, uint64_t seed, at::ScalarType type = at::kFloat) {
  return at::randn(shape, Gen(seed), at::TensorOptions().dtype(at::kDouble)).to(type);
}

// Values in [0.1, 2.1): safe for log, sqrt and as a divisor.
at::Tensor Positive(at::IntArrayRef shape, uint64_t seed, at::ScalarType type = at::kFloat) {
  return (at::rand(shape, Gen(seed), at::TensorOptions().dtype(at::kDouble)) * 2 + 0.1).to(type);
}

// Integers in [-11, 11], from a fixed pattern.
at::Tensor Ints(at::IntArrayRef shape, at::ScalarType type, int64_t offset = 0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  at::Tensor flat = at::remainder(at::arange(offset, offset + n, at::kLong) * 7, 23) - 11;
  return flat.reshape(shape).to(type);
}

// Non-zero integers in [1, 9] (divisors).
at::Tensor NonZeroInts(at::IntArrayRef shape, at::ScalarType type) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return (at::remainder(at::arange(n, at::kLong) * 5, 9) + 1).reshape(shape).to(type);
}

at::Tensor Bools(at::IntArrayRef shape) { return at::remainder(Ints(shape, at::kLong), 3) == 0; }

// ---- the case table ------------------------------------------------------------

using Remote = std::function<gt::Tensor(const std::vector<gt::Tensor>&)>;
using Local = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

struct Case {
  std::string name;
  std::vector<Op> ops;              // the ops the case exercises (coverage)
  std::vector<at::Tensor> inputs;   // sent with gt::from_data
  Remote remote;
  Local local;
};

std::vector<int64_t> AllDims(const at::Tensor& t) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < t.dim(); ++d) dims.push_back(d);
  return dims;
}

// The convolution's, the poolings' and var's cases (split out for length).
#include "conformance_conv_cases.h"

std::vector<Case> Cases() {
  using V = std::vector<gt::Tensor>;
  using A = std::vector<at::Tensor>;
  std::vector<Case> cases;
  auto add = [&cases](std::string name, std::vector<Op> ops, A inputs, Remote remote, Local local) {
    cases.push_back({std::move(name), std::move(ops), std::move(inputs), std::move(remote), std::move(local)});
  };
  auto identity_remote = [](const V& v) { return v[0]; };
  auto identity_local = [](const A& a) { return a[0]; };

  // -- creation
  add("from_bytes_float32", {Op::kFromBytes}, {Normal({3, 4}, 1)}, identity_remote, identity_local);
  add("from_bytes_float64", {Op::kFromBytes}, {Normal({2, 5}, 2, at::kDouble)}, identity_remote, identity_local);
  add("from_bytes_int32", {Op::kFromBytes}, {Ints({7}, at::kInt)}, identity_remote, identity_local);
  add("from_bytes_int64", {Op::kFromBytes}, {Ints({2, 2, 3}, at::kLong)}, identity_remote, identity_local);
  add("from_bytes_bool", {Op::kFromBytes}, {Bools({9})}, identity_remote, identity_local);
  add("from_bytes_0d", {Op::kFromBytes}, {at::scalar_tensor(3.5, at::kFloat)}, identity_remote, identity_local);
  add("from_bytes_empty", {Op::kFromBytes}, {at::empty({0, 3}, at::kFloat)}, identity_remote, identity_local);
  add("randn_seeded_float32", {Op::kRandn}, {},
      [](const V&) { return gt::randn({4, 5}, DType::kFloat32, 1234); },
      [](const A&) { return at::randn({4, 5}, Gen(1234), at::TensorOptions().dtype(at::kFloat)); });
  add("randn_seeded_float64", {Op::kRandn}, {},
      [](const V&) { return gt::randn({3, 33}, DType::kFloat64, 99); },
      [](const A&) { return at::randn({3, 33}, Gen(99), at::TensorOptions().dtype(at::kDouble)); });
  add("zeros_float32", {Op::kZeros}, {}, [](const V&) { return gt::zeros({2, 3}); },
      [](const A&) { return at::zeros({2, 3}, at::kFloat); });
  add("zeros_int64", {Op::kZeros}, {}, [](const V&) { return gt::zeros({5}, DType::kInt64); },
      [](const A&) { return at::zeros({5}, at::kLong); });
  add("zeros_empty", {Op::kZeros}, {}, [](const V&) { return gt::zeros({0, 3}); },
      [](const A&) { return at::zeros({0, 3}, at::kFloat); });
  add("ones_float64", {Op::kOnes}, {}, [](const V&) { return gt::ones({2, 3, 1}, DType::kFloat64); },
      [](const A&) { return at::ones({2, 3, 1}, at::kDouble); });
  add("ones_int32", {Op::kOnes}, {}, [](const V&) { return gt::ones({4}, DType::kInt32); },
      [](const A&) { return at::ones({4}, at::kInt); });
  add("ones_0d", {Op::kOnes}, {}, [](const V&) { return gt::ones({}); },
      [](const A&) { return at::ones({}, at::kFloat); });

  // -- binary, tensor with tensor: same shape and broadcast
  struct BinaryOp {
    Op op;
    const char* name;
    std::function<gt::Tensor(const gt::Tensor&, const gt::Tensor&)> remote;
    std::function<at::Tensor(const at::Tensor&, const at::Tensor&)> local;
  };
  const BinaryOp binary[] = {
      {Op::kAdd, "add", [](auto& a, auto& b) { return a + b; }, [](auto& a, auto& b) { return at::add(a, b); }},
      {Op::kSub, "sub", [](auto& a, auto& b) { return a - b; }, [](auto& a, auto& b) { return at::sub(a, b); }},
      {Op::kMul, "mul", [](auto& a, auto& b) { return a * b; }, [](auto& a, auto& b) { return at::mul(a, b); }},
      {Op::kDiv, "div", [](auto& a, auto& b) { return a / b; }, [](auto& a, auto& b) { return at::div(a, b); }},
  };
  for (const BinaryOp& b : binary) {
    auto remote = [f = b.remote](const V& v) { return f(v[0], v[1]); };
    auto local = [f = b.local](const A& a) { return f(a[0], a[1]); };
    add(std::string(b.name) + "_same_shape", {b.op}, {Normal({3, 4}, 10), Positive({3, 4}, 11)}, remote, local);
    add(std::string(b.name) + "_broadcast_row", {b.op}, {Normal({2, 3, 4}, 12), Positive({4}, 13)}, remote, local);
    add(std::string(b.name) + "_broadcast_both", {b.op}, {Normal({3, 1}, 14), Positive({2, 1, 4}, 15)}, remote, local);
    add(std::string(b.name) + "_0d", {b.op}, {Normal({2, 3}, 16), Positive({}, 17)}, remote, local);
  }

  // -- binary, tensor with scalar, the scalar on each side
  const A x = {Normal({3, 4}, 20)};
  const A pos = {Positive({3, 4}, 21)};
  add("add_scalar_right", {Op::kAdd}, x, [](const V& v) { return v[0] + 2.5; },
      [](const A& a) { return at::add(a[0], 2.5); });
  add("add_scalar_left", {Op::kAdd}, x, [](const V& v) { return 2.5 + v[0]; },
      [](const A& a) { return at::add(a[0], 2.5); });
  add("sub_scalar_right", {Op::kSub}, x, [](const V& v) { return v[0] - 1.25; },
      [](const A& a) { return at::sub(a[0], 1.25); });
  add("sub_scalar_left", {Op::kSub}, x, [](const V& v) { return 3 - v[0]; },
      [](const A& a) { return at::rsub(a[0], 3); });
  add("mul_scalar_right", {Op::kMul}, x, [](const V& v) { return v[0] * -2; },
      [](const A& a) { return at::mul(a[0], -2); });
  add("mul_scalar_left", {Op::kMul}, x, [](const V& v) { return 0.5 * v[0]; },
      [](const A& a) { return at::mul(a[0], 0.5); });
  add("div_scalar_right", {Op::kDiv}, x, [](const V& v) { return v[0] / 4; },
      [](const A& a) { return at::div(a[0], 4); });
  add("div_scalar_left", {Op::kDiv}, pos, [](const V& v) { return 2 / v[0]; },
      [](const A& a) { return at::div(at::full_like(a[0], 2), a[0]); });

  // -- matmul
  auto matmul_remote = [](const V& v) { return v[0].matmul(v[1]); };
  auto matmul_local = [](const A& a) { return at::matmul(a[0], a[1]); };
  add("matmul_2d", {Op::kMatmul}, {Normal({3, 4}, 30), Normal({4, 5}, 31)}, matmul_remote, matmul_local);
  add("matmul_batched", {Op::kMatmul}, {Normal({2, 3, 4}, 32), Normal({2, 4, 5}, 33)}, matmul_remote, matmul_local);
  add("matmul_batched_broadcast", {Op::kMatmul}, {Normal({2, 1, 3, 4}, 34), Normal({3, 4, 2}, 35)}, matmul_remote,
      matmul_local);
  add("matmul_vector_matrix", {Op::kMatmul}, {Normal({4}, 36), Normal({4, 5}, 37)}, matmul_remote, matmul_local);
  add("matmul_dot", {Op::kMatmul}, {Normal({6}, 38), Normal({6}, 39)}, matmul_remote, matmul_local);
  add("matmul_float64", {Op::kMatmul}, {Normal({3, 4}, 40, at::kDouble), Normal({4, 2}, 41, at::kDouble)},
      matmul_remote, matmul_local);

  // -- unary
  struct UnaryOp {
    Op op;
    const char* name;
    gt::Tensor (gt::Tensor::*remote)() const;
    at::Tensor (*local)(const at::Tensor&);
    bool needs_positive;
  };
  const UnaryOp unary[] = {
      {Op::kRelu, "relu", &gt::Tensor::relu, [](const at::Tensor& a) { return at::relu(a); }, false},
      {Op::kSigmoid, "sigmoid", &gt::Tensor::sigmoid, [](const at::Tensor& a) { return at::sigmoid(a); }, false},
      {Op::kTanh, "tanh", &gt::Tensor::tanh, [](const at::Tensor& a) { return at::tanh(a); }, false},
      {Op::kExp, "exp", &gt::Tensor::exp, [](const at::Tensor& a) { return at::exp(a); }, false},
      {Op::kLog, "log", &gt::Tensor::log, [](const at::Tensor& a) { return at::log(a); }, true},
      {Op::kSqrt, "sqrt", &gt::Tensor::sqrt, [](const at::Tensor& a) { return at::sqrt(a); }, true},
      {Op::kNeg, "neg", &gt::Tensor::neg, [](const at::Tensor& a) { return at::neg(a); }, false},
  };
  for (const UnaryOp& u : unary) {
    auto remote = [f = u.remote](const V& v) { return (v[0].*f)(); };
    auto local = [f = u.local](const A& a) { return f(a[0]); };
    at::Tensor in = u.needs_positive ? Positive({3, 5}, 50) : Normal({3, 5}, 50) * 3;
    add(std::string(u.name) + "_float32", {u.op}, {in}, remote, local);
    add(std::string(u.name) + "_float64", {u.op}, {in.to(at::kDouble)}, remote, local);
    at::Tensor ints = u.needs_positive ? NonZeroInts({2, 4}, at::kInt) : Ints({2, 4}, at::kInt);
    add(std::string(u.name) + "_int32", {u.op}, {ints}, remote, local);  // relu, neg keep int; others give float32
  }
  add("neg_operator", {Op::kNeg}, x, [](const V& v) { return -v[0]; }, [](const A& a) { return -a[0]; });

  // -- reductions: no axes, one, several, negative; keepdims
  struct ReduceOp {
    Op op;
    const char* name;
    gt::Tensor (gt::Tensor::*remote)(std::vector<int64_t>, bool) const;
    std::function<at::Tensor(const at::Tensor&)> all;  // reduce everything, 0-d result
    std::function<at::Tensor(const at::Tensor&, std::vector<int64_t>, bool)> dims;
  };
  const ReduceOp reduce[] = {
      {Op::kSum, "sum", &gt::Tensor::sum, [](const at::Tensor& a) { return at::sum(a); },
       [](const at::Tensor& a, std::vector<int64_t> d, bool k) { return at::sum(a, d, k); }},
      {Op::kMean, "mean", &gt::Tensor::mean, [](const at::Tensor& a) { return at::mean(a); },
       [](const at::Tensor& a, std::vector<int64_t> d, bool k) { return at::mean(a, d, k); }},
      {Op::kMax, "max", &gt::Tensor::max, [](const at::Tensor& a) { return at::max(a); },
       [](const at::Tensor& a, std::vector<int64_t> d, bool k) { return at::amax(a, d, k); }},
  };
  struct Axes {
    const char* name;
    std::vector<int64_t> axes;
    bool keepdims;
  };
  const Axes axes_cases[] = {
      {"all", {}, false},           {"all_keepdims", {}, true},       {"axis1", {1}, false},
      {"axis0_keepdims", {0}, true}, {"axes02", {0, 2}, false},        {"axis_neg1", {-1}, false},
      {"axes_neg_keepdims", {-1, -3}, true}, {"axes_unordered", {2, 1}, false},
  };
  const A cube = {Normal({2, 3, 4}, 60)};
  for (const ReduceOp& r : reduce) {
    for (const Axes& ax : axes_cases) {
      auto remote = [f = r.remote, axes = ax.axes, k = ax.keepdims](const V& v) { return (v[0].*f)(axes, k); };
      Local local;
      if (ax.axes.empty() && !ax.keepdims) {
        local = [f = r.all](const A& a) { return f(a[0]); };
      } else {
        local = [f = r.dims, axes = ax.axes, k = ax.keepdims](const A& a) {
          return f(a[0], axes.empty() ? AllDims(a[0]) : axes, k);
        };
      }
      add(std::string(r.name) + "_" + ax.name, {r.op}, cube, remote, local);
    }
  }
  add("max_int32_axis1", {Op::kMax}, {Ints({3, 4}, at::kInt)}, [](const V& v) { return v[0].max({1}); },
      [](const A& a) { return at::amax(a[0], at::IntArrayRef{1}); });
  add("sum_0d_axis_neg1", {Op::kSum}, {at::scalar_tensor(2.5, at::kFloat)},
      [](const V& v) { return v[0].sum({-1}); }, [](const A& a) { return at::sum(a[0], at::IntArrayRef{-1}); });
  add("max_0d_keepdims", {Op::kMax}, {at::scalar_tensor(-4, at::kLong)},
      [](const V& v) { return v[0].max({0}, true); }, [](const A& a) { return at::amax(a[0], at::IntArrayRef{0}, true); });
  add("mean_float64_axis0", {Op::kMean}, {Normal({3, 4}, 61, at::kDouble)},
      [](const V& v) { return v[0].mean({0}); }, [](const A& a) { return at::mean(a[0], at::IntArrayRef{0}); });
  // Positions: int64, first occurrence on ties (the int32 input has ties).
  for (Op op : {Op::kArgMax, Op::kArgMin}) {
    const bool is_max = op == Op::kArgMax;
    auto remote = [is_max](std::optional<int64_t> dim, bool k) {
      return [is_max, dim, k](const V& v) { return is_max ? v[0].argmax(dim, k) : v[0].argmin(dim, k); };
    };
    auto local = [is_max](c10::optional<int64_t> dim, bool k) {
      return [is_max, dim, k](const A& a) { return is_max ? at::argmax(a[0], dim, k) : at::argmin(a[0], dim, k); };
    };
    const std::string name(gt::OpName(op));
    add(name + "_all", {op}, cube, remote(std::nullopt, false), local(c10::nullopt, false));
    add(name + "_axis1", {op}, cube, remote(1, false), local(1, false));
    add(name + "_axis_neg1_keepdims", {op}, cube, remote(-1, true), local(-1, true));
    add(name + "_int32_ties_axis0", {op}, {Ints({3, 4}, at::kInt).remainder(2)}, remote(0, false), local(0, false));
  }

  // -- movement
  const A block = {Normal({2, 3, 4}, 70)};
  add("reshape_infer_first", {Op::kReshape}, block, [](const V& v) { return v[0].reshape({-1, 4}); },
      [](const A& a) { return at::reshape(a[0], {-1, 4}); });
  add("reshape_infer_middle", {Op::kReshape}, block, [](const V& v) { return v[0].reshape({4, -1, 3}); },
      [](const A& a) { return at::reshape(a[0], {4, -1, 3}); });
  add("reshape_flat", {Op::kReshape}, block, [](const V& v) { return v[0].reshape({24}); },
      [](const A& a) { return at::reshape(a[0], {24}); });
  add("reshape_int64", {Op::kReshape}, {Ints({6}, at::kLong)}, [](const V& v) { return v[0].reshape({3, 2}); },
      [](const A& a) { return at::reshape(a[0], {3, 2}); });
  add("transpose_dims", {Op::kTranspose}, block, [](const V& v) { return v[0].transpose(0, 2); },
      [](const A& a) { return at::transpose(a[0], 0, 2); });
  add("transpose_negative_dims", {Op::kTranspose}, block, [](const V& v) { return v[0].transpose(-1, 1); },
      [](const A& a) { return at::transpose(a[0], -1, 1); });
  add("transpose_t_2d", {Op::kTranspose}, x, [](const V& v) { return v[0].t(); },
      [](const A& a) { return a[0].t(); });
  add("transpose_t_3d", {Op::kTranspose}, block, [](const V& v) { return v[0].t(); },
      [](const A& a) { return at::transpose(a[0], -2, -1); });
  add("transpose_t_1d", {Op::kTranspose}, {Normal({5}, 71)}, [](const V& v) { return v[0].t(); },
      [](const A& a) { return a[0].t(); });
  add("reshape_of_transpose", {Op::kTranspose, Op::kReshape}, block,
      [](const V& v) { return v[0].transpose(0, 1).reshape({-1}); },
      [](const A& a) { return at::transpose(a[0], 0, 1).reshape({-1}); });

  // -- dtypes other than float32
  add("add_float64_broadcast", {Op::kAdd}, {Normal({2, 3}, 80, at::kDouble), Normal({3}, 81, at::kDouble)},
      [](const V& v) { return v[0] + v[1]; }, [](const A& a) { return at::add(a[0], a[1]); });
  add("add_int32", {Op::kAdd}, {Ints({3, 4}, at::kInt), Ints({4}, at::kInt, 5)},
      [](const V& v) { return v[0] + v[1]; }, [](const A& a) { return at::add(a[0], a[1]); });
  add("add_int64", {Op::kAdd}, {Ints({3, 4}, at::kLong), Ints({3, 1}, at::kLong, 9)},
      [](const V& v) { return v[0] + v[1]; }, [](const A& a) { return at::add(a[0], a[1]); });
  add("add_int32_int64_promotes", {Op::kAdd}, {Ints({4}, at::kInt), Ints({4}, at::kLong, 3)},
      [](const V& v) { return v[0] + v[1]; }, [](const A& a) { return at::add(a[0], a[1]); });
  add("add_float32_int64_promotes", {Op::kAdd}, {Normal({4}, 82), Ints({4}, at::kLong)},
      [](const V& v) { return v[0] + v[1]; }, [](const A& a) { return at::add(a[0], a[1]); });
  add("add_float32_float64_promotes", {Op::kAdd}, {Normal({4}, 83), Normal({4}, 84, at::kDouble)},
      [](const V& v) { return v[0] + v[1]; }, [](const A& a) { return at::add(a[0], a[1]); });
  add("add_int32_scalar_stays_int", {Op::kAdd}, {Ints({5}, at::kInt)}, [](const V& v) { return v[0] + 3; },
      [](const A& a) { return at::add(a[0], 3); });
  add("add_int32_fractional_scalar", {Op::kAdd}, {Ints({5}, at::kInt)}, [](const V& v) { return v[0] + 1.5; },
      [](const A& a) { return at::add(a[0], 1.5); });
  add("add_float64_scalar_left", {Op::kAdd}, {Normal({5}, 85, at::kDouble)}, [](const V& v) { return 0.25 + v[0]; },
      [](const A& a) { return at::add(a[0], 0.25); });
  add("add_bool_scalar", {Op::kAdd}, {Bools({6})}, [](const V& v) { return v[0] + 2; },
      [](const A& a) { return at::add(a[0], 2); });
  // Scalars that are not Python ints for an integer tensor: -0.0 and one
  // beyond int64 make the result float32, as in PyTorch.
  add("mul_int32_negative_zero_scalar", {Op::kMul}, {Ints({3}, at::kInt)}, [](const V& v) { return v[0] * -0.0; },
      [](const A& a) { return at::mul(a[0], -0.0); });
  add("add_int64_huge_scalar", {Op::kAdd}, {Ints({3}, at::kLong)}, [](const V& v) { return v[0] + 1e20; },
      [](const A& a) { return at::add(a[0], 1e20); });
  add("sub_int64_scalar_left", {Op::kSub}, {Ints({5}, at::kLong)}, [](const V& v) { return 10 - v[0]; },
      [](const A& a) { return at::rsub(a[0], 10); });
  add("mul_int32", {Op::kMul}, {Ints({4}, at::kInt), Ints({4}, at::kInt, 2)},
      [](const V& v) { return v[0] * v[1]; }, [](const A& a) { return at::mul(a[0], a[1]); });
  add("div_int32_true_division", {Op::kDiv}, {Ints({2, 4}, at::kInt), NonZeroInts({4}, at::kInt)},
      [](const V& v) { return v[0] / v[1]; }, [](const A& a) { return at::div(a[0], a[1]); });
  add("div_int64_scalar_right", {Op::kDiv}, {Ints({5}, at::kLong)}, [](const V& v) { return v[0] / 4; },
      [](const A& a) { return at::div(a[0], 4); });
  add("sum_float64", {Op::kSum}, {Normal({3, 4}, 86, at::kDouble)}, [](const V& v) { return v[0].sum({1}); },
      [](const A& a) { return at::sum(a[0], at::IntArrayRef{1}); });
  add("sum_int32_gives_int64", {Op::kSum}, {Ints({3, 4}, at::kInt)}, [](const V& v) { return v[0].sum(); },
      [](const A& a) { return at::sum(a[0]); });
  add("sum_int32_axis_keepdims", {Op::kSum}, {Ints({3, 4}, at::kInt)},
      [](const V& v) { return v[0].sum({-1}, true); }, [](const A& a) { return at::sum(a[0], at::IntArrayRef{-1}, true); });
  add("sum_int64", {Op::kSum}, {Ints({2, 3, 4}, at::kLong)}, [](const V& v) { return v[0].sum({0, 2}); },
      [](const A& a) { return at::sum(a[0], at::IntArrayRef{0, 2}); });
  add("sum_bool_gives_int64", {Op::kSum}, {Bools({10})}, [](const V& v) { return v[0].sum(); },
      [](const A& a) { return at::sum(a[0]); });

  // -- creation: rand, arange
  add("rand_seeded", {Op::kRand}, {}, [](const V&) { return gt::rand({3, 4}, DType::kFloat32, 77); },
      [](const A&) { return at::rand({3, 4}, Gen(77), at::TensorOptions().dtype(at::kFloat)); });
  add("arange_float", {Op::kArange}, {}, [](const V&) { return gt::arange(0, 2.5, 0.5); },
      [](const A&) { return at::arange(0, 2.5, 0.5, at::kFloat); });
  add("arange_int64_descending", {Op::kArange}, {}, [](const V&) { return gt::arange(10, 0, -3, DType::kInt64); },
      [](const A&) { return at::arange(10, 0, -3, at::kLong); });

  // -- pow and comparisons (a bool mask, as PyTorch's)
  add("pow_scalar", {Op::kPow}, pos, [](const V& v) { return v[0].pow(2.5); },
      [](const A& a) { return at::pow(a[0], 2.5); });
  add("pow_tensor", {Op::kPow}, {Positive({3, 4}, 100), Normal({4}, 101)}, [](const V& v) { return v[0].pow(v[1]); },
      [](const A& a) { return at::pow(a[0], a[1]); });
  struct CompareOp {
    Op op;
    const char* name;
    gt::Tensor (gt::Tensor::*remote)(const gt::Tensor&) const;
    gt::Tensor (gt::Tensor::*remote_scalar)(double) const;
    at::Tensor (*local)(const at::Tensor&, const at::Tensor&);
  };
  const CompareOp compare[] = {
      {Op::kGt, "gt", &gt::Tensor::gt, &gt::Tensor::gt, [](const at::Tensor& a, const at::Tensor& b) { return at::gt(a, b); }},
      {Op::kLt, "lt", &gt::Tensor::lt, &gt::Tensor::lt, [](const at::Tensor& a, const at::Tensor& b) { return at::lt(a, b); }},
      {Op::kGe, "ge", &gt::Tensor::ge, &gt::Tensor::ge, [](const at::Tensor& a, const at::Tensor& b) { return at::ge(a, b); }},
      {Op::kLe, "le", &gt::Tensor::le, &gt::Tensor::le, [](const at::Tensor& a, const at::Tensor& b) { return at::le(a, b); }},
      {Op::kEq, "eq", &gt::Tensor::eq, &gt::Tensor::eq, [](const at::Tensor& a, const at::Tensor& b) { return at::eq(a, b); }},
  };
  const A small_ints = {Ints({3, 4}, at::kFloat), Ints({4}, at::kFloat, 2)};
  for (const CompareOp& c : compare) {
    add(std::string(c.name) + "_broadcast", {c.op}, small_ints,
        [f = c.remote](const V& v) { return (v[0].*f)(v[1]); },
        [f = c.local](const A& a) { return f(a[0], a[1]); });
    add(std::string(c.name) + "_scalar", {c.op}, {Ints({5}, at::kDouble)},
        [f = c.remote_scalar](const V& v) { return (v[0].*f)(1.0); },
        [f = c.local](const A& a) { return f(a[0], at::scalar_tensor(1.0, at::kDouble)); });
  }

  // -- abs, clone, min, softmax, log_softmax
  add("abs_float32", {Op::kAbs}, x, [](const V& v) { return v[0].abs(); }, [](const A& a) { return at::abs(a[0]); });
  add("abs_int64", {Op::kAbs}, {Ints({6}, at::kLong)}, [](const V& v) { return v[0].abs(); },
      [](const A& a) { return at::abs(a[0]); });
  add("clone", {Op::kClone}, x, [](const V& v) { return v[0].clone(); }, [](const A& a) { return a[0].clone(); });
  add("min_axis1_keepdims", {Op::kMin}, cube, [](const V& v) { return v[0].min({1}, true); },
      [](const A& a) { return at::amin(a[0], at::IntArrayRef{1}, true); });
  add("min_all", {Op::kMin}, cube, [](const V& v) { return v[0].min(); }, [](const A& a) { return at::min(a[0]); });
  add("softmax_last", {Op::kSoftmax}, cube, [](const V& v) { return v[0].softmax(-1); },
      [](const A& a) { return at::softmax(a[0], -1); });
  add("softmax_dim0_float64", {Op::kSoftmax}, {Normal({3, 4}, 102, at::kDouble)},
      [](const V& v) { return v[0].softmax(0); }, [](const A& a) { return at::softmax(a[0], 0); });
  add("log_softmax_dim1", {Op::kLogSoftmax}, cube, [](const V& v) { return v[0].log_softmax(1); },
      [](const A& a) { return at::log_softmax(a[0], 1); });

  // -- fused composites: gelu, layer_norm, and their backwards (issued by
  // backward(): the gradient of x for the gradient g, against ATen's own)
  add("gelu_float32", {Op::kGelu}, x, [](const V& v) { return gt::nn::gelu(v[0]); },
      [](const A& a) { return at::gelu(a[0]); });
  add("gelu_float64", {Op::kGelu}, {Normal({3, 5}, 110, at::kDouble)}, [](const V& v) { return gt::nn::gelu(v[0]); },
      [](const A& a) { return at::gelu(a[0]); });
  add("gelu_int64", {Op::kGelu}, {Ints({6}, at::kLong)}, [](const V& v) { return gt::nn::gelu(v[0]); },
      [](const A& a) { return at::gelu(a[0].to(at::kFloat)); });
  auto grad_of = [](std::function<gt::Tensor(const gt::Tensor&)> f) {
    return [f](const V& v) {
      gt::Tensor x = v[0].clone().requires_grad_();
      f(x).backward(v[1]);
      return x.grad();
    };
  };
  add("gelu_backward", {Op::kGeluBackward}, {Normal({4, 6}, 111), Normal({4, 6}, 112)},
      grad_of([](const gt::Tensor& x) { return gt::nn::gelu(x); }),
      [](const A& a) { return at::gelu_backward(a[1], a[0]); });
  add("relu_backward", {Op::kReluBackward}, {Normal({4, 6}, 129), Normal({4, 6}, 130)},
      grad_of([](const gt::Tensor& x) { return x.relu(); }),
      [](const A& a) { return a[1] * (a[0] > 0); });
  add("layer_norm_last", {Op::kLayerNorm}, cube, [](const V& v) { return gt::nn::layer_norm(v[0], 1); },
      [](const A& a) { return at::layer_norm(a[0], {a[0].size(-1)}); });
  add("layer_norm_last_two_float64_eps", {Op::kLayerNorm}, {Normal({2, 3, 4}, 113, at::kDouble)},
      [](const V& v) { return gt::nn::layer_norm(v[0], 2, gt::Tensor(), gt::Tensor(), 0.1); },
      [](const A& a) { return at::layer_norm(a[0], {3, 4}, {}, {}, 0.1); });
  add("layer_norm_int32", {Op::kLayerNorm}, {Ints({3, 4}, at::kInt)}, [](const V& v) { return gt::nn::layer_norm(v[0], 1); },
      [](const A& a) { return at::layer_norm(a[0].to(at::kFloat), {4}); });
  add("layer_norm_backward", {Op::kLayerNormBackward}, {Normal({3, 2, 5}, 114), Normal({3, 2, 5}, 115)},
      grad_of([](const gt::Tensor& x) { return gt::nn::layer_norm(x, 2, gt::Tensor(), gt::Tensor(), 1e-3); }),
      [](const A& a) {
        at::Tensor x = a[0].clone().requires_grad_();
        at::layer_norm(x, {2, 5}, {}, {}, 1e-3).backward(a[1]);
        return x.grad();
      });

  // The worker's one-pass rows (fused_kernels.h): 67 columns are eight
  // vector steps and a tail, 600 rows more than one parallel grain; a
  // transposed view is not contiguous and takes ATen's kernel.
  add("layer_norm_rows_67_wide", {Op::kLayerNorm}, {Normal({600, 67}, 131)},
      [](const V& v) { return gt::nn::layer_norm(v[0], 1); }, [](const A& a) { return at::layer_norm(a[0], {67}); });
  add("layer_norm_transposed_view", {Op::kLayerNorm}, {Normal({5, 7}, 132)},
      [](const V& v) { return gt::nn::layer_norm(v[0].transpose(0, 1), 1); },
      [](const A& a) { return at::layer_norm(a[0].transpose(0, 1), {5}); });
  // A constant row: its mean is exactly the constant, so eps 0 gives NaN as
  // in PyTorch (not +-1 from a rounded mean). A float32 row whose squared
  // deviations overflow float: its true values, from float64 (ATen's float
  // moments give NaN there).
  add("layer_norm_constant_rows_eps_0", {Op::kLayerNorm}, {at::full({3, 67}, 0.3)},
      [](const V& v) { return gt::nn::layer_norm(v[0], 1, gt::Tensor(), gt::Tensor(), 0.0); },
      [](const A& a) { return at::layer_norm(a[0], {67}, {}, {}, 0.0); });
  add("layer_norm_backward_constant_rows_eps_0", {Op::kLayerNormBackward},
      {at::full({3, 67}, 0.3), Normal({3, 67}, 137)},
      grad_of([](const gt::Tensor& x) { return gt::nn::layer_norm(x, 1, gt::Tensor(), gt::Tensor(), 0.0); }),
      [](const A& a) {
        at::Tensor x = a[0].clone().requires_grad_();
        at::layer_norm(x, {67}, {}, {}, 0.0).backward(a[1]);
        return x.grad();
      });
  add("layer_norm_float32_squares_past_float", {Op::kLayerNorm}, {Normal({2, 64}, 138) * 1e19 + 1e20},
      [](const V& v) { return gt::nn::layer_norm(v[0], 1); },
      [](const A& a) { return at::layer_norm(a[0].to(at::kDouble), {64}).to(at::kFloat); });
  for (at::ScalarType type : {at::kFloat, at::kDouble}) {
    add(std::string("layer_norm_backward_rows_67_") + (type == at::kFloat ? "float32" : "float64"),
        {Op::kLayerNormBackward}, {Normal({600, 67}, 133, type), Normal({600, 67}, 134, type)},
        grad_of([](const gt::Tensor& x) { return gt::nn::layer_norm(x, 1); }), [](const A& a) {
          at::Tensor x = a[0].clone().requires_grad_();
          at::layer_norm(x, {67}).backward(a[1]);
          return x.grad();
        });
  }

  // -- a transformer's building blocks: erf (GELU), where / masked_fill, tril / triu
  add("erf_float32", {Op::kErf}, x, [](const V& v) { return v[0].erf(); }, [](const A& a) { return at::erf(a[0]); });
  add("erf_int64", {Op::kErf}, {Ints({6}, at::kLong)}, [](const V& v) { return v[0].erf(); },
      [](const A& a) { return at::erf(a[0]); });
  const at::Tensor mask = Ints({4, 4}, at::kFloat).remainder(2);  // a 0/1 float mask (where also takes bool ones)
  add("where_broadcast", {Op::kWhere}, {mask, Normal({4, 4}, 103), Normal({4}, 104)},
      [](const V& v) { return gt::where(v[0], v[1], v[2]); },
      [](const A& a) { return at::where(a[0].ne(0), a[1], a[2]); });
  add("where_promotes_int_and_double", {Op::kWhere}, {mask, Ints({4, 4}, at::kLong), Normal({4, 4}, 105, at::kDouble)},
      [](const V& v) { return gt::where(v[0], v[1], v[2]); },
      [](const A& a) { return at::where(a[0].ne(0), a[1].to(at::kDouble), a[2]); });
  add("masked_fill_neg_inf", {Op::kWhere}, {Normal({2, 4, 4}, 106), mask},
      [](const V& v) { return v[0].masked_fill(v[1], -INFINITY); },
      [](const A& a) { return a[0].masked_fill(a[1].ne(0), -INFINITY); });
  add("where_scalar_right_int", {Op::kWhere}, {mask, Ints({4, 4}, at::kInt)},
      [](const V& v) { return gt::where(v[0], v[1], 7.0); },
      [](const A& a) { return at::where(a[0].ne(0), a[1], at::scalar_tensor(7, at::kInt)); });
  add("tril_causal", {Op::kTril}, {Normal({2, 5, 5}, 107)}, [](const V& v) { return v[0].tril(); },
      [](const A& a) { return at::tril(a[0]); });
  add("tril_diag1_int64", {Op::kTril}, {Ints({3, 4}, at::kLong)}, [](const V& v) { return v[0].tril(1); },
      [](const A& a) { return at::tril(a[0], 1); });
  add("triu_diag_neg1", {Op::kTriu}, {Normal({4, 3}, 108)}, [](const V& v) { return v[0].triu(-1); },
      [](const A& a) { return at::triu(a[0], -1); });

  // -- indexing: embedding lookups (repeated rows), gathers of class scores, their backward forms
  const at::Tensor rows = at::tensor({2, 0, 2, 4}, at::kLong);
  add("index_select_rows_repeated", {Op::kIndexSelect}, {Normal({5, 3}, 109), rows},
      [](const V& v) { return v[0].index_select(0, v[1]); }, [](const A& a) { return at::index_select(a[0], 0, a[1]); });
  add("index_select_dim_neg1_int32", {Op::kIndexSelect}, {Normal({2, 5}, 110), rows.to(at::kInt)},
      [](const V& v) { return v[0].index_select(-1, v[1]); }, [](const A& a) { return at::index_select(a[0], -1, a[1]); });
  add("index_add_accumulates", {Op::kIndexAdd}, {Normal({5, 3}, 111), rows, Normal({4, 3}, 112)},
      [](const V& v) { return v[0].index_add(0, v[1], v[2]); },
      [](const A& a) { return at::index_add(a[0], 0, a[1], a[2]); });
  const at::Tensor cols = at::tensor({1, 0, 3, 3, 0, 2}, at::kLong).reshape({3, 2});
  add("gather_dim1", {Op::kGather}, {Normal({3, 4}, 113), cols},
      [](const V& v) { return v[0].gather(1, v[1]); }, [](const A& a) { return at::gather(a[0], 1, a[1]); });
  add("scatter_add_dim1", {Op::kScatterAdd}, {Normal({3, 4}, 114), cols, Normal({3, 2}, 115)},
      [](const V& v) { return v[0].scatter_add(1, v[1], v[2]); },
      [](const A& a) { return at::scatter_add(a[0], 1, a[1], a[2]); });

  // -- cross entropy with class targets, one of them ignored (-100), and its
  // gradient (issued by backward(), for an upstream gradient of 0.7)
  const at::Tensor classes = at::tensor({3, -100, 0, 4, 4, 1}, at::kLong);
  add("cross_entropy_ignore_index", {Op::kCrossEntropy}, {Normal({6, 5}, 131), classes},
      [](const V& v) { return gt::nn::cross_entropy(v[0], v[1]); },
      [](const A& a) { return at::cross_entropy_loss(a[0], a[1]); });
  add("cross_entropy_float64_int32_targets", {Op::kCrossEntropy},
      {Normal({6, 5}, 132, at::kDouble), at::tensor({3, 1, 0, 4, 4, 1}, at::kInt)},
      [](const V& v) { return gt::nn::cross_entropy(v[0], v[1], 4); },
      [](const A& a) { return at::cross_entropy_loss(a[0], a[1].to(at::kLong), {}, at::Reduction::Mean, 4); });
  add("cross_entropy_backward", {Op::kCrossEntropyBackward}, {Normal({6, 5}, 133), classes},
      [](const V& v) {
        gt::Tensor x = v[0].clone().requires_grad_();
        (gt::nn::cross_entropy(x, v[1]) * 0.7).backward();
        return x.grad();
      },
      [](const A& a) {
        at::Tensor x = a[0].clone().requires_grad_();
        (at::cross_entropy_loss(x, a[1]) * 0.7).backward();
        return x.grad();
      });

  // -- more movement: unsqueeze, squeeze, permute, slice, select, cat, split, chunk
  add("unsqueeze_front", {Op::kUnsqueeze}, block, [](const V& v) { return v[0].unsqueeze(0); },
      [](const A& a) { return at::unsqueeze(a[0], 0); });
  add("unsqueeze_negative", {Op::kUnsqueeze}, block, [](const V& v) { return v[0].unsqueeze(-1); },
      [](const A& a) { return at::unsqueeze(a[0], -1); });
  add("squeeze_all", {Op::kSqueeze}, {Normal({1, 3, 1, 2}, 103)}, [](const V& v) { return v[0].squeeze(); },
      [](const A& a) { return at::squeeze(a[0]); });
  add("squeeze_dim", {Op::kSqueeze}, {Normal({1, 3, 1, 2}, 104)}, [](const V& v) { return v[0].squeeze(2); },
      [](const A& a) { return at::squeeze(a[0], 2); });
  add("squeeze_dim_not_one", {Op::kSqueeze}, {Normal({2, 3}, 105)}, [](const V& v) { return v[0].squeeze(0); },
      [](const A& a) { return at::squeeze(a[0], 0); });
  add("permute", {Op::kPermute}, block, [](const V& v) { return v[0].permute({2, 0, 1}); },
      [](const A& a) { return a[0].permute({2, 0, 1}); });
  add("slice_step", {Op::kSlice}, {Normal({10, 3}, 106)}, [](const V& v) { return v[0].slice(0, 1, 9, 3); },
      [](const A& a) { return at::slice(a[0], 0, 1, 9, 3); });
  add("slice_negative_open", {Op::kSlice}, {Normal({4, 7}, 107)},
      [](const V& v) { return v[0].slice(-1, -3, std::nullopt); }, [](const A& a) { return at::slice(a[0], 1, 4, 7); });
  add("slice_clamped_empty", {Op::kSlice}, {Normal({4, 7}, 108)}, [](const V& v) { return v[0].slice(0, 5, 100); },
      [](const A& a) { return at::slice(a[0], 0, 4, 4); });
  add("select", {Op::kSelect}, block, [](const V& v) { return v[0].select(1, -1); },
      [](const A& a) { return at::select(a[0], 1, 2); });
  add("cat_dim1", {Op::kCat}, {Normal({2, 3}, 109), Normal({2, 1}, 110), Normal({2, 2}, 111)},
      [](const V& v) { return gt::cat({v[0], v[1], v[2]}, 1); },
      [](const A& a) { return at::cat({a[0], a[1], a[2]}, 1); });
  add("cat_promotes", {Op::kCat}, {Ints({2}, at::kInt), Normal({3}, 112)},
      [](const V& v) { return gt::cat({v[0], v[1]}); }, [](const A& a) { return at::cat({a[0], a[1]}); });
  add("split_last_piece", {Op::kSlice}, {Normal({7, 2}, 113)}, [](const V& v) { return v[0].split(3)[2]; },
      [](const A& a) { return a[0].split(3)[2]; });
  add("chunk_middle", {Op::kSlice}, {Normal({2, 10}, 114)}, [](const V& v) { return v[0].chunk(3, 1)[1]; },
      [](const A& a) { return a[0].chunk(3, 1)[1]; });

  // -- in place: copy_ (broadcast + cast), fill_, zero_, -=
  add("copy_broadcast", {Op::kClone}, {Normal({3, 4}, 115), Normal({4}, 116)},
      [](const V& v) { gt::Tensor c = v[0].clone(); c.copy_(v[1]); return c; },
      [](const A& a) { return a[1].expand({3, 4}).clone(); });
  add("fill_and_zero", {Op::kClone}, {Normal({2, 2}, 117), Normal({3}, 118)},
      [](const V& v) { gt::Tensor c = v[0].clone(); c.fill_(7); gt::Tensor d = v[1].clone(); d.zero_(); return gt::cat({c.reshape({-1}), d}); },
      [](const A&) { return at::cat({at::full({4}, 7.0), at::zeros({3})}); });
  // mul_ by a tensor of the same dtype is one mul_into; of another, a mul and a copy_
  add("mul_in_place_broadcast", {Op::kClone}, {Normal({3, 4}, 121), Normal({4}, 122)},
      [](const V& v) { gt::Tensor c = v[0].clone(); c.mul_(v[1]); gt::Tensor view = c.select(0, 1); view *= v[1]; return c; },
      [](const A& a) { at::Tensor c = a[0] * a[1]; c.select(0, 1).mul_(a[1]); return c; });
  // Another integer dtype: the product cast back, as ATen's in-place op does
  // (a float factor is refused, as there: tests/python/test_tensor_ops.py).
  add("mul_in_place_int64_by_int32", {Op::kClone, Op::kMul}, {Ints({2, 3}, at::kLong), Ints({3}, at::kInt, 2)},
      [](const V& v) { gt::Tensor c = v[0].clone(); c.mul_(v[1]); return c; },
      [](const A& a) { at::Tensor c = a[0].clone(); c.mul_(a[1]); return c; });
  // clip_grad_norm_'s norm: one sum_of_squares of every gradient (2 p)
  add("clip_grad_norm_sum_of_squares", {Op::kSumOfSquares}, {Normal({3, 4}, 124), Normal({5}, 125)},
      [](const V& v) {
        gt::Tensor p = v[0].clone().requires_grad_(), q = v[1].clone().requires_grad_();
        ((p * p).sum() + (q * q).sum()).backward();
        return gt::nn::clip_grad_norm_({p, q}, 1e9);
      },
      [](const A& a) { return at::cat({a[0].reshape({-1}), a[1]}).mul(2).norm(); });
  // float64, and a gradient long enough for the worker's vector lanes
  add("clip_grad_norm_sum_of_squares_float64", {Op::kSumOfSquares},
      {Normal({40, 33}, 135, at::kDouble), Normal({3}, 136, at::kDouble)},
      [](const V& v) {
        gt::Tensor p = v[0].clone().requires_grad_(), q = v[1].clone().requires_grad_();
        ((p * p).sum() + (q * q).sum()).backward();
        return gt::nn::clip_grad_norm_({p, q}, 1e9);
      },
      [](const A& a) { return at::cat({a[0].reshape({-1}), a[1]}).mul(2).norm(); });
  // add_ / sub_ / += / -= by a tensor of the same dtype is one add_into
  // (alpha scales the addend, broadcast); of another, an add and a copy_
  add("sub_in_place", {Op::kMul}, {Normal({3, 4}, 119), Normal({3, 4}, 120)},
      [](const V& v) { gt::Tensor p = v[0].clone(); p -= v[1] * 0.1; return p; },
      [](const A& a) { return a[0] - a[1] * 0.1; });
  add("add_in_place_alpha_broadcast", {Op::kClone}, {Normal({3, 4}, 126), Normal({4}, 127)},
      [](const V& v) {
        gt::Tensor c = v[0].clone();
        c.add_(v[1], 0.5);
        c += v[1];
        gt::Tensor row = c.select(0, 2);
        row.sub_(v[1], 2.0);
        return c;
      },
      [](const A& a) {
        at::Tensor c = a[0].clone();
        c.add_(a[1], 0.5).add_(a[1]);
        c.select(0, 2).sub_(a[1], 2.0);
        return c;
      });
  add("add_in_place_int64_by_int32", {Op::kClone, Op::kAdd}, {Ints({2, 3}, at::kLong), Ints({3}, at::kInt, 5)},
      [](const V& v) { gt::Tensor c = v[0].clone(); c += v[1]; return c; },
      [](const A& a) { at::Tensor c = a[0].clone(); c += a[1]; return c; });
  add("add_in_place_float32_by_float64", {Op::kClone, Op::kAdd}, {Normal({2, 3}, 128), Normal({3}, 129).to(at::kDouble)},
      [](const V& v) { gt::Tensor c = v[0].clone(); c += v[1]; return c; },
      [](const A& a) { at::Tensor c = a[0].clone(); c += a[1]; return c; });

  // -- a chain, so that results feed results on the worker
  add("chain_mlp_layer", {Op::kMatmul, Op::kAdd, Op::kRelu, Op::kSum, Op::kMean},
      {Normal({4, 3}, 90), Normal({3, 5}, 91), Normal({5}, 92)},
      [](const V& v) { return (v[0].matmul(v[1]) + v[2]).relu().sum({1}).mean(); },
      [](const A& a) { return at::mean(at::sum(at::relu(at::matmul(a[0], a[1]) + a[2]), at::IntArrayRef{1})); });

  // -- mse_loss, and its gradients of the input and of the target
  add("mse_loss", {Op::kMseLoss}, {Normal({4, 6}, 135), Normal({4, 6}, 136)},
      [](const V& v) { return gt::nn::mse_loss(v[0], v[1]); }, [](const A& a) { return at::mse_loss(a[0], a[1]); });
  add("mse_loss_backward", {Op::kMseLossBackward}, {Normal({4, 6}, 137, at::kDouble), Normal({4, 6}, 138, at::kDouble)},
      [](const V& v) {
        gt::Tensor x = v[0].clone().requires_grad_(), t = v[1].clone().requires_grad_();
        (gt::nn::mse_loss(x, t) * 0.3).backward();
        return gt::cat({x.grad().reshape({-1}), t.grad().reshape({-1})});
      },
      [](const A& a) {
        at::Tensor x = a[0].clone().requires_grad_(), t = a[1].clone().requires_grad_();
        (at::mse_loss(x, t) * 0.3).backward();
        return at::cat({x.grad().reshape({-1}), t.grad().reshape({-1})});
      });

  // -- maximum / minimum: broadcasting, promotion, ties (Ints repeat), and the
  // gradient, which goes to the larger (smaller) operand, half each on a tie
  add("maximum_broadcast", {Op::kMaximum}, {Normal({3, 4}, 139), Normal({4}, 140)},
      [](const V& v) { return gt::maximum(v[0], v[1]); }, [](const A& a) { return at::maximum(a[0], a[1]); });
  add("minimum_method_broadcast", {Op::kMinimum}, {Normal({2, 1, 4}, 141), Normal({3, 1}, 142)},
      [](const V& v) { return v[0].min(v[1]); }, [](const A& a) { return at::minimum(a[0], a[1]); });
  add("maximum_int32_and_float64_promote", {Op::kMaximum}, {Ints({3, 4}, at::kInt), Normal({3, 4}, 143, at::kDouble)},
      [](const V& v) { return v[0].max(v[1]); }, [](const A& a) { return at::maximum(a[0], a[1]); });
  add("minimum_int64", {Op::kMinimum}, {Ints({3, 4}, at::kLong), Ints({4}, at::kLong, 5)},
      [](const V& v) { return v[0].minimum(v[1]); }, [](const A& a) { return at::minimum(a[0], a[1]); });
  for (const bool maximum : {true, false}) {
    const Op op = maximum ? Op::kMaximum : Op::kMinimum;
    add(maximum ? "maximum_grad_ties" : "minimum_grad_ties", {op},
        {Ints({3, 4}, at::kDouble), Ints({4}, at::kDouble, 4)},  // row 1 ties
        [maximum](const V& v) {
          gt::Tensor x = v[0].clone().requires_grad_(), y = v[1].clone().requires_grad_();
          ((maximum ? gt::maximum(x, y) : gt::minimum(x, y)) * 3.0).sum().backward();
          return gt::cat({x.grad().reshape({-1}), y.grad().reshape({-1})});
        },
        [maximum](const A& a) {
          at::Tensor x = a[0].clone().requires_grad_(), y = a[1].clone().requires_grad_();
          ((maximum ? at::maximum(x, y) : at::minimum(x, y)) * 3.0).sum().backward();
          return at::cat({x.grad().reshape({-1}), y.grad().reshape({-1})});
        });
  }

  // -- last: a redistribute makes the session one that places tensors, and
  // from then on cross_entropy, mse_loss and sum_of_squares give way to
  // their composites (masks, log_softmax, gather; differences, squares, sums)
  add("redistribute", {Op::kRedistribute}, x,  // a copy (one worker: the layout is whole)
      [](const V& v) {
        return gt::distributed::redistribute(v[0], gt::distributed::DeviceMesh({0}), {gt::distributed::Replicate()});
      },
      [](const A& a) { return a[0].clone(); });
  add("cross_entropy_composite_once_placing", {Op::kLogSoftmax, Op::kGather}, {Normal({6, 5}, 134), classes},
      [](const V& v) { return gt::nn::cross_entropy(v[0], v[1]); },
      [](const A& a) { return at::cross_entropy_loss(a[0], a[1]); });
  add("mse_loss_composite_once_placing", {Op::kSub, Op::kMean}, {Normal({4, 6}, 139), Normal({4, 6}, 140)},
      [](const V& v) { return gt::nn::mse_loss(v[0], v[1]); }, [](const A& a) { return at::mse_loss(a[0], a[1]); });
  AddConvCases(add);
  return cases;
}

// ---- comparison ------------------------------------------------------------------

// Compares the remote result with the local one: the client's inferred shape
// and dtype, then the fetched bytes (exact for integers and bools, allclose
// for floating point). Always fetches, so that a remote failure is reported
// by the case that caused it (a fetch is a sync point); a gt::Error from the
// fetch propagates to the caller.
void ExpectMatches(const gt::Tensor& remote, const at::Tensor& want) {
  std::optional<DType> want_dtype = FromAten(want.scalar_type());
  ASSERT_TRUE(want_dtype.has_value()) << "ATen result type " << want.scalar_type() << " is not a gt dtype";
  EXPECT_EQ(remote.shape(), ShapeOf(want)) << "inferred shape " << gt::ShapeToString(remote.shape()) << ", ATen "
                                           << gt::ShapeToString(ShapeOf(want));
  EXPECT_EQ(remote.dtype(), *want_dtype) << "inferred dtype " << gt::DTypeName(remote.dtype()) << ", ATen "
                                         << gt::DTypeName(*want_dtype);
  at::Tensor got = Fetch(remote);
  if (got.scalar_type() != want.scalar_type() || got.sizes() != want.sizes()) return;  // reported above
  if (at::isFloatingType(want.scalar_type())) {
    EXPECT_TRUE(at::allclose(got, want, /*rtol=*/1e-5, /*atol=*/1e-6, /*equal_nan=*/true))
        << "remote:\n" << got << "\nATen:\n" << want;
  } else {
    EXPECT_TRUE(at::equal(got, want)) << "remote:\n" << got << "\nATen:\n" << want;
  }
}

std::string Describe(const std::vector<Op>& ops) {
  std::string out;
  for (Op op : ops) out += (out.empty() ? "" : ",") + std::string(gt::OpName(op));
  return out;
}

// ---- the fixture: one cluster of real processes for the whole suite ---------------

class ConformanceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gt::testing::ConnectedCluster::Start(); }

  static void TearDownTestSuite() { gt::testing::ConnectedCluster::Stop(); }

  void SetUp() override {
    ASSERT_TRUE(gt::testing::ConnectedCluster::ready()) << gt::testing::ConnectedCluster::NotReady();
  }

  void TearDown() override { EXPECT_TRUE(gt::testing::ConnectedCluster::cluster().AllAlive()) << "a host process died"; }

};


// Adding an op to enum Op without a case here fails this test (STYLE.md 13).
TEST(ConformanceCoverageTest, EveryTensorOpHasACase) {
  std::set<Op> covered;
  for (const Case& c : Cases()) covered.insert(c.ops.begin(), c.ops.end());
  for (size_t i = 0; i < static_cast<size_t>(Op::kCount); ++i) {
    Op op = static_cast<Op>(i);
    if (gt::KindOf(op) == gt::OpKind::kCollective) continue;  // only stages make them: tests/sharding_test.cc
    if (gt::ProducesTensor(op)) EXPECT_TRUE(covered.count(op)) << "op " << gt::OpName(op) << " has no conformance case";
    else EXPECT_FALSE(covered.count(op)) << "control op " << gt::OpName(op) << " listed as a tensor case";
  }
}

TEST_F(ConformanceTest, EveryOpMatchesLibTorch) {
  std::vector<Case> cases = Cases();
  std::set<std::string> names;
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + c.name + " (" + Describe(c.ops) + ")");
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name";
    try {
      std::vector<gt::Tensor> remote_inputs;
      for (const at::Tensor& in : c.inputs) remote_inputs.push_back(Send(in));
      gt::Tensor remote = c.remote(remote_inputs);
      at::Tensor want = c.local(c.inputs);
      ExpectMatches(remote, want);
    } catch (const gt::Error& e) {
      ADD_FAILURE() << "gt::Error (" << gt::CodeName(e.code()) << "): " << e.what();
    } catch (const c10::Error& e) {
      ADD_FAILURE() << "ATen reference failed: " << e.what_without_backtrace();
    }
  }
  EXPECT_GE(cases.size(), 100u);
  RecordProperty("cases", static_cast<int>(cases.size()));
  EXPECT_NO_THROW(gt::sync());  // nothing failed since the last fetch
}

TEST_F(ConformanceTest, RandnSeedsAndStatistics) {
  const gt::Shape shape = {200, 500};
  gt::Tensor a = gt::randn(shape, DType::kFloat32, 7);
  gt::Tensor b = gt::randn(shape, DType::kFloat32, 7);
  gt::Tensor c = gt::randn(shape, DType::kFloat32, 8);
  gt::Tensor unseeded = gt::randn(shape);
  gt::Tensor unseeded_again = gt::randn(shape);
  EXPECT_EQ(a.shape(), shape);
  EXPECT_EQ(a.dtype(), DType::kFloat32);
  EXPECT_EQ(unseeded.shape(), shape);
  EXPECT_EQ(gt::randn({3}, DType::kFloat64, 1).dtype(), DType::kFloat64);

  at::Tensor va = Fetch(a), vb = Fetch(b), vc = Fetch(c), vu = Fetch(unseeded), vu2 = Fetch(unseeded_again);
  EXPECT_TRUE(at::equal(va, vb)) << "same seed, different values";
  EXPECT_FALSE(at::equal(va, vc)) << "seeds 7 and 8 gave the same values";
  EXPECT_FALSE(at::equal(vu, vu2)) << "two unseeded randn calls gave the same values";
  EXPECT_TRUE(at::equal(va, at::randn(shape, Gen(7), at::TensorOptions().dtype(at::kFloat))))
      << "seeded randn differs from ATen's with a generator of the same seed";

  // 100000 standard normal samples: the mean's standard error is ~0.003.
  for (const at::Tensor& v : {va, vc, vu}) {
    EXPECT_NEAR(v.mean().item<double>(), 0.0, 0.02);
    EXPECT_NEAR(v.std().item<double>(), 1.0, 0.02);
  }
  // The same statistic computed remotely.
  EXPECT_NEAR(a.mean().item(), va.mean().item<double>(), 1e-5);
}

// ATen refuses to write a float result into an integer tensor (or a number
// into a bool) in place, and so does gt, at the call, leaving it unchanged.
TEST_F(ConformanceTest, AnInPlaceResultTheTensorCannotHoldThrowsAsInATen) {
  at::Tensor ints = Ints({3}, at::kLong), floats = Normal({3}, 130);
  EXPECT_THROW(ints.clone().add_(floats), c10::Error);
  gt::Tensor n = Send(ints), f = Send(floats);
  for (const auto& op : std::vector<std::function<void()>>{[&] { n += f; }, [&] { n *= f; }, [&] { n += 1.5; },
                                                           [&] { n.add_(f, 2); }})
    EXPECT_THROW(op(), gt::Error);
  EXPECT_EQ(n.to_vector<int64_t>(), std::vector<int64_t>(ints.data_ptr<int64_t>(), ints.data_ptr<int64_t>() + 3));
}

TEST_F(ConformanceTest, ShapeMismatchThrowsAtTheCall) {
  gt::Tensor a = Send(Normal({2, 3}, 100));
  gt::Tensor b = Send(Normal({4}, 101));
  gt::Tensor m = Send(Normal({4, 5}, 102));

  auto expect_error = [](const std::function<void()>& call, std::vector<std::string> parts) {
    try {
      call();
      ADD_FAILURE() << "no gt::Error thrown";
    } catch (const gt::Error& e) {
      EXPECT_EQ(e.code(), gt::Code::kInvalidArgument) << e.what();
      for (const std::string& p : parts)
        EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << e.what() << "' lacks '" << p << "'";
    }
  };
  expect_error([&] { (void)(a + b); }, {"add", "[2, 3]", "[4]"});
  expect_error([&] { (void)(a / b); }, {"div", "[2, 3]", "[4]"});
  expect_error([&] { (void)a.matmul(m); }, {"matmul", "[2, 3]", "[4, 5]"});
  expect_error([&] { (void)a.reshape({4, -1}); }, {"reshape", "[2, 3]", "[4, -1]"});
  expect_error([&] { (void)a.sum({2}); }, {"sum", "axis 2"});
  expect_error([&] { (void)a.transpose(0, 5); }, {"transpose", "[2, 3]"});

  // Nothing was sent for the rejected calls: the session carries on cleanly.
  gt::sync();
  ExpectMatches(a + 1, at::add(Normal({2, 3}, 100), 1));
}

TEST_F(ConformanceTest, RemoteErrorSurfacesAtTheNextSyncPoint) {
  // An index's values are known only on the worker: one out of range fails
  // there, and is reported at the next sync point.
  gt::Tensor a = Send(Normal({4}, 140));
  gt::Tensor index = Send(at::tensor({5}, at::kLong));
  gt::Tensor picked;
  ASSERT_NO_THROW(picked = a.index_select(0, index));
  EXPECT_EQ(picked.dtype(), DType::kFloat32);
  gt::Tensor dependent = picked.sum();  // consumes the failed op's result

  try {
    gt::sync();
    ADD_FAILURE() << "gt::sync() did not report the failed op";
  } catch (const gt::Error& e) {
    std::string what = e.what();
    EXPECT_EQ(e.code(), gt::Code::kInvalidArgument) << what;
    EXPECT_NE(what.find("index_select #"), std::string::npos) << what;
    EXPECT_NE(what.find("failed on worker-0"), std::string::npos) << what;
    EXPECT_NE(what.find("index out of range"), std::string::npos) << what;
    EXPECT_NE(what.find("and 1 more failed op"), std::string::npos) << "the dependent sum also failed: " << what;
  }

  // Errors are reported once; the session keeps working.
  EXPECT_NO_THROW(gt::sync());
  ExpectMatches(a + 1, at::add(Normal({4}, 140), 1));

  // Reading the dependent result names the op that failed first.
  try {
    (void)Fetch(dependent);
    ADD_FAILURE() << "fetching a tensor whose op failed did not throw";
  } catch (const gt::Error& e) {
    std::string what = e.what();
    EXPECT_EQ(e.code(), gt::Code::kFailedPrecondition) << what;
    EXPECT_NE(what.find("fetch #"), std::string::npos) << what;
    EXPECT_NE(what.find("failed"), std::string::npos) << what;
  }
  // Dropping the handles of failed tensors is not itself an error.
  picked = gt::Tensor();
  dependent = gt::Tensor();
  EXPECT_NO_THROW(gt::sync());
}

}  // namespace
