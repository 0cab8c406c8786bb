// The conformance cases of dtypes other than float32 (promotion, integer and
// bool scalars), rand / arange, pow and comparisons, and abs / clone / min /
// softmax / log_softmax.
// Included by conformance_test.cc inside its anonymous namespace, after the
// helpers (Normal, Ints, Case, AllDims, ...) these cases use; Cases() calls it.
#pragma once

// Adds the cases through `add` (conformance_test.cc's Cases()).
template <typename Add>
void AddDTypeCases(Add& add) {
  using V = std::vector<gt::Tensor>;
  using A = std::vector<at::Tensor>;
  // The inputs the basic cases use too (conformance_basic_cases.h): the same seeds.
  const A x = {Normal({3, 4}, 20)};
  const A pos = {Positive({3, 4}, 21)};
  const A cube = {Normal({2, 3, 4}, 60)};

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
}
