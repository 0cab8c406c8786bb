// The conformance cases of the convolution, the poolings and var (and
// their backwards): part of conformance_test.cc's case table, split out to
// keep that file short. Included by it inside its anonymous namespace,
// after the helpers (Normal, Case, ...) these cases use.
#pragma once

// Adds the cases through `add` (conformance_test.cc's Cases()).
template <typename Add>
void AddConvCases(Add& add) {
  using V = std::vector<gt::Tensor>;
  using A = std::vector<at::Tensor>;
  using gt::nn::Pair;
  const at::Tensor images = Normal({2, 4, 7, 6}, 201);
  const at::Tensor weight = Normal({6, 2, 3, 2}, 202);  // groups = 2
  const at::Tensor bias = Normal({6}, 203);
  // One input and the output's gradient: a gradient case compares x's (or
  // the weight's) gradient with ATen's autograd on the same values.
  auto conv = [](const V& v, bool with_bias) {
    return gt::nn::conv2d(v[0], v[1], with_bias ? v[2] : gt::Tensor(), {2, 1}, {1, 0}, {1, 2}, 2);
  };
  auto aten_conv = [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return at::conv2d(x, w, b, {2, 1}, {1, 0}, {1, 2}, 2);
  };
  add("conv2d_strided_dilated_groups_bias", std::vector<Op>{Op::kConv2d}, A{images, weight, bias},
      [conv](const V& v) { return conv(v, true); }, [aten_conv](const A& a) { return aten_conv(a[0], a[1], a[2]); });
  add("conv2d_one_sample_no_bias_float64", std::vector<Op>{Op::kConv2d},
      A{Normal({3, 5, 5}, 204, at::kDouble), Normal({4, 3, 3, 3}, 205, at::kDouble)},
      [](const V& v) { return gt::nn::conv2d(v[0], v[1], gt::Tensor(), {1, 1}, {1, 1}); },
      [](const A& a) { return at::conv2d(a[0], a[1], {}, 1, 1); });
  const at::Tensor out_grad = Normal({2, 6, 4, 4}, 206);
  auto conv_grad = [conv](size_t which) {
    return [conv, which](const V& v) {
      gt::Tensor x = v[0].clone().requires_grad_(), w = v[1].clone().requires_grad_();
      gt::Tensor b = v[2].clone().requires_grad_();
      conv(V{x, w, b}, true).backward(v[3]);
      return which == 0 ? x.grad() : which == 1 ? w.grad() : b.grad();
    };
  };
  auto aten_conv_grad = [aten_conv](size_t which) {
    return [aten_conv, which](const A& a) {
      at::Tensor x = a[0].clone().requires_grad_(), w = a[1].clone().requires_grad_(), b = a[2].clone().requires_grad_();
      aten_conv(x, w, b).backward(a[3]);
      return which == 0 ? x.grad() : which == 1 ? w.grad() : b.grad();
    };
  };
  add("conv2d_backward_input", std::vector<Op>{Op::kConv2dBackward}, A{images, weight, bias, out_grad}, conv_grad(0),
      aten_conv_grad(0));
  add("conv2d_backward_weight", std::vector<Op>{Op::kConv2dBackward}, A{images, weight, bias, out_grad}, conv_grad(1),
      aten_conv_grad(1));
  add("conv2d_grad_bias", std::vector<Op>{Op::kSum}, A{images, weight, bias, out_grad}, conv_grad(2), aten_conv_grad(2));

  // Poolings: forward, and x's gradient for a given output gradient.
  const at::Tensor pooled = Normal({2, 3, 7, 8}, 207);
  using Pool = std::function<gt::Tensor(const gt::Tensor&)>;
  using AtenPool = std::function<at::Tensor(const at::Tensor&)>;
  struct PoolCase {
    const char* name;
    Op forward, backward;
    Pool pool;
    AtenPool aten;
    std::vector<int64_t> out;  // the output's shape (for its gradient)
  };
  const std::vector<PoolCase> pools = {
      {"max_pool2d_pad_dilation_ceil", Op::kMaxPool2d, Op::kMaxPool2dBackward,
       [](const gt::Tensor& x) { return gt::nn::max_pool2d(x, {3, 2}, {2, 2}, {1, 1}, {1, 2}, true); },
       [](const at::Tensor& x) { return at::max_pool2d(x, {3, 2}, {2, 2}, {1, 1}, {1, 2}, true); }, {2, 3, 4, 5}},
      {"avg_pool2d_pad_ceil_exclude_pad", Op::kAvgPool2d, Op::kAvgPool2dBackward,
       [](const gt::Tensor& x) { return gt::nn::avg_pool2d(x, {3, 3}, {2, 3}, {1, 1}, true, false); },
       [](const at::Tensor& x) { return at::avg_pool2d(x, {3, 3}, {2, 3}, {1, 1}, true, false); }, {2, 3, 4, 3}},
      {"adaptive_avg_pool2d_uneven", Op::kAdaptiveAvgPool2d, Op::kAdaptiveAvgPool2dBackward,
       [](const gt::Tensor& x) { return gt::nn::adaptive_avg_pool2d(x, {3, 5}); },
       [](const at::Tensor& x) { return at::adaptive_avg_pool2d(x, {3, 5}); }, {2, 3, 3, 5}},
  };
  uint64_t seed = 208;
  for (const PoolCase& p : pools) {
    add(p.name, std::vector<Op>{p.forward}, A{pooled}, [pool = p.pool](const V& v) { return pool(v[0]); },
        [aten = p.aten](const A& a) { return aten(a[0]); });
    add(std::string(p.name) + "_backward", std::vector<Op>{p.backward}, A{pooled, Normal(p.out, seed++)},
        [pool = p.pool](const V& v) {
          gt::Tensor x = v[0].clone().requires_grad_();
          pool(x).backward(v[1]);
          return x.grad();
        },
        [aten = p.aten](const A& a) {
          at::Tensor x = a[0].clone().requires_grad_();
          aten(x).backward(a[1]);
          return x.grad();
        });
  }
  add("max_pool2d_one_sample_float64", std::vector<Op>{Op::kMaxPool2d}, A{Normal({2, 5, 5}, 212, at::kDouble)},
      [](const V& v) { return gt::nn::max_pool2d(v[0], {2, 2}); }, [](const A& a) { return at::max_pool2d(a[0], {2, 2}); });

  // var: over dims with a correction, over everything, and its gradient.
  const at::Tensor spread = Normal({3, 4, 5}, 213, at::kDouble);
  add("var_dims_unbiased_keepdim", std::vector<Op>{Op::kVar}, A{spread},
      [](const V& v) { return v[0].var({0, 2}, 1, true); },
      [](const A& a) { return at::var(a[0], at::IntArrayRef{0, 2}, /*unbiased=*/true, /*keepdim=*/true); });
  add("var_all_biased", std::vector<Op>{Op::kVar}, A{Normal({4, 6}, 214)}, [](const V& v) { return v[0].var({}, 0); },
      [](const A& a) { return at::var(a[0], /*unbiased=*/false); });
  add("var_grad", std::vector<Op>{Op::kVar}, A{spread, Normal({3}, 215, at::kDouble)},
      [](const V& v) {
        gt::Tensor x = v[0].clone().requires_grad_();
        x.var({1, 2}, 1).backward(v[1]);
        return x.grad();
      },
      [](const A& a) {
        at::Tensor x = a[0].clone().requires_grad_();
        at::var(x, at::IntArrayRef{1, 2}, true).backward(a[1]);
        return x.grad();
      });
}
