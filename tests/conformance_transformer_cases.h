// The conformance cases of a transformer's ops: the fused composites (gelu,
// layer_norm and their backwards), erf, where / masked_fill, tril / triu,
// embedding lookups and gathers with their backward forms, and cross entropy
// with class targets.
// Included by conformance_test.cc inside its anonymous namespace, after the
// helpers (Normal, Ints, Case, AllDims, ...) these cases use; Cases() calls it.
#pragma once

// Adds the cases through `add` (conformance_test.cc's Cases()).
template <typename Add>
void AddTransformerCases(Add& add) {
  using V = std::vector<gt::Tensor>;
  using A = std::vector<at::Tensor>;
  // The inputs the basic cases use too (conformance_basic_cases.h): the same seeds.
  const A x = {Normal({3, 4}, 20)};
  const A cube = {Normal({2, 3, 4}, 60)};

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

}
