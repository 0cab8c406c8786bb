// The basic conformance cases: creation, binary ops (tensor with tensor and
// with a scalar on each side), matmul, unary ops, reductions and movement.
// Included by conformance_test.cc inside its anonymous namespace, after the
// helpers (Normal, Ints, Case, AllDims, ...) these cases use; Cases() calls it.
#pragma once

// Adds the cases through `add` (conformance_test.cc's Cases()).
template <typename Add>
void AddBasicCases(Add& add) {
  using V = std::vector<gt::Tensor>;
  using A = std::vector<at::Tensor>;
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
}
