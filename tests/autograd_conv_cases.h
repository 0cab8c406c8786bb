// The gradient cases of the convolution, the poolings and var (each
// checked against central differences): part of autograd_gradient_test.cc, split
// out to keep that file short. Included by it inside its anonymous
// namespace, after GradCase, Normal and V.
#pragma once

std::vector<GradCase> ConvCases() {
  return {
      {"conv2d_stride_padding_groups_bias", {Normal({2, 4, 5, 5}, 160), Normal({4, 2, 3, 2}, 161), Normal({4}, 162)},
       [](const V& v) { return gt::nn::conv2d(v[0], v[1], v[2], {2, 1}, {1, 1}, {1, 2}, 2); }},
      {"conv2d_one_sample_no_bias", {Normal({2, 4, 4}, 163), Normal({3, 2, 2, 2}, 164)},
       [](const V& v) { return gt::nn::conv2d(v[0], v[1]); }},
      // Distinct values, so that no window has a tie (a tie's max is not differentiable).
      {"max_pool2d_padding_ceil", {Normal({2, 2, 5, 6}, 165)},
       [](const V& v) { return gt::nn::max_pool2d(v[0], {2, 3}, {2, 2}, {1, 1}, {1, 1}, true); }},
      {"avg_pool2d_exclude_pad", {Normal({1, 2, 5, 5}, 166)},
       [](const V& v) { return gt::nn::avg_pool2d(v[0], {3, 3}, {2, 2}, {1, 1}, false, false); }},
      {"adaptive_avg_pool2d", {Normal({2, 3, 5, 7}, 167)},
       [](const V& v) { return gt::nn::adaptive_avg_pool2d(v[0], {2, 3}); }},
      {"var_unbiased_dims", {Normal({3, 4, 2}, 168)}, [](const V& v) { return v[0].var({0, 2}, 1, true); }},
      {"var_biased_all", {Normal({3, 4}, 169)}, [](const V& v) { return v[0].var({}, 0); }},
  };
}
