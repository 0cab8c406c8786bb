// Gradient checks through the real stack (autograd_test_fixture.h): for every
// differentiable op, L = sum(f(inputs) * W) with a fixed random W (so that
// every output element matters, softmax included), gt's backward() against
// central finite differences of the same L, each perturbed L evaluated by gt
// itself in float64; every differentiable op has a case, and max / min ties
// share the gradient evenly. Part of autograd_test.
#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "aten_bridge.h"
#include "connected_cluster.h"
#include "gt/distributed.h"
#include "gt/gt.h"
#include "gt/nn.h"
#include "gt/op.h"
#include "autograd_test_fixture.h"

namespace {
using namespace autograd_test;

std::vector<GradCase> BinaryCases() {
  std::vector<GradCase> cases;
  struct BinaryOp {
    const char* name;
    std::function<gt::Tensor(const gt::Tensor&, const gt::Tensor&)> f;
  };
  const BinaryOp ops[] = {
      {"add", [](const gt::Tensor& a, const gt::Tensor& b) { return a + b; }},
      {"sub", [](const gt::Tensor& a, const gt::Tensor& b) { return a - b; }},
      {"mul", [](const gt::Tensor& a, const gt::Tensor& b) { return a * b; }},
      {"div", [](const gt::Tensor& a, const gt::Tensor& b) { return a / b; }},
      {"maximum", [](const gt::Tensor& a, const gt::Tensor& b) { return gt::maximum(a, b); }},
      {"minimum", [](const gt::Tensor& a, const gt::Tensor& b) { return a.min(b); }},
  };
  struct Shapes {
    const char* name;
    std::vector<int64_t> a, b;
  };
  const Shapes shapes[] = {
      {"same", {2, 3}, {2, 3}},          {"row", {2, 3, 4}, {4}},        {"both", {3, 1}, {2, 1, 4}},
      {"0d_right", {2, 3}, {}},           {"0d_left", {}, {2, 3}},         {"size1_dims", {1, 3}, {2, 1}},
      {"both_0d", {}, {}},                {"leading_1", {1, 2, 3}, {2, 3}},
  };
  for (const BinaryOp& op : ops) {
    for (const Shapes& s : shapes) {
      cases.push_back({std::string(op.name) + "_" + s.name, {Normal(s.a, 1), Positive(s.b, 2)},
                       [f = op.f](const V& v) { return f(v[0], v[1]); }});
    }
    // Only one side requires grad.
    cases.push_back({std::string(op.name) + "_left_only", {Normal({2, 3}, 3), Positive({3}, 4)},
                     [f = op.f](const V& v) { return f(v[0], v[1]); }, {true, false}});
    cases.push_back({std::string(op.name) + "_right_only", {Normal({2, 3}, 5), Positive({3}, 6)},
                     [f = op.f](const V& v) { return f(v[0], v[1]); }, {false, true}});
  }
  // Scalars on both sides.
  const std::vector<at::Tensor> x = {Normal({3, 4}, 7)};
  const std::vector<at::Tensor> pos = {Positive({3, 4}, 8)};
  cases.push_back({"add_scalar_right", x, [](const V& v) { return v[0] + 2.5; }});
  cases.push_back({"add_scalar_left", x, [](const V& v) { return 2.5 + v[0]; }});
  cases.push_back({"sub_scalar_right", x, [](const V& v) { return v[0] - 1.25; }});
  cases.push_back({"sub_scalar_left", x, [](const V& v) { return 3.0 - v[0]; }});
  cases.push_back({"mul_scalar_right", x, [](const V& v) { return v[0] * -2.0; }});
  cases.push_back({"mul_scalar_left", x, [](const V& v) { return 0.5 * v[0]; }});
  cases.push_back({"div_scalar_right", x, [](const V& v) { return v[0] / 4.0; }});
  cases.push_back({"div_scalar_left", pos, [](const V& v) { return 2.0 / v[0]; }});
  cases.push_back({"scalar_0d_input", {Normal({}, 9)}, [](const V& v) { return 3.0 - v[0] * 2.0; }});
  // SumTo's two forms: only leading dims summed (a bias: no reshape after),
  // and leading plus a broadcast size-1 dim (summed keeping dims, reshaped).
  auto add = [](const V& v) { return v[0] + v[1]; };
  cases.push_back({"add_bias_over_batches", {Normal({2, 3, 4}, 152), Normal({4}, 153)}, add});
  cases.push_back({"add_column_over_batches", {Normal({2, 3, 4}, 154), Normal({3, 1}, 155)}, add});

  // pow: scalar exponent, tensor exponent, scalar base (a 0-d tensor, as
  // Python's `2.5 ** x` is issued).
  cases.push_back({"pow_scalar_3", {Normal({2, 3}, 10)}, [](const V& v) { return v[0].pow(3.0); }});
  cases.push_back({"pow_scalar_2_5", {Positive({2, 3}, 11)}, [](const V& v) { return v[0].pow(2.5); }});
  cases.push_back({"pow_scalar_0_5", {Positive({2, 3}, 12)}, [](const V& v) { return v[0].pow(0.5); }});
  cases.push_back({"pow_scalar_negative", {Positive({2, 3}, 13)}, [](const V& v) { return v[0].pow(-1.5); }});
  cases.push_back({"pow_scalar_0", {Normal({4}, 14)}, [](const V& v) { return v[0].pow(0.0) + v[0]; }});
  auto pow = [](const V& v) { return v[0].pow(v[1]); };
  cases.push_back({"pow_tensor_same", {Positive({2, 3}, 15), Normal({2, 3}, 16)}, pow});
  cases.push_back({"pow_tensor_exponent_row", {Positive({2, 3}, 17), Normal({3}, 18)}, pow});
  cases.push_back({"pow_tensor_exponent_0d", {Positive({2, 3}, 19), Normal({}, 20)}, pow});
  cases.push_back({"pow_tensor_base_broadcast", {Positive({3}, 21), Normal({2, 3}, 22)}, pow});
  cases.push_back({"pow_scalar_base", {Scalar(2.5), Normal({2, 3}, 23)}, pow, {false, true}});
  cases.push_back({"pow_0d_base_with_grad", {Scalar(1.7), Normal({2, 3}, 24)}, pow});
  // where / masked_fill: the mask (0/1, as comparisons give) has no gradient.
  auto mask = [](at::IntArrayRef shape, uint64_t seed) { return (Normal(shape, seed) > 0).to(at::kDouble); };
  cases.push_back({"where_tensors_broadcast", {mask({3, 4}, 25), Normal({3, 4}, 26), Normal({4}, 27)},
                   [](const V& v) { return gt::where(v[0], v[1], v[2]); }, {false, true, true}});
  cases.push_back({"where_scalar_left", {mask({3, 4}, 28), Normal({3, 4}, 29)},
                   [](const V& v) { return gt::where(v[0], 0.5, v[1]); }, {false, true}});
  cases.push_back({"where_scalar_right", {mask({3, 4}, 125), Normal({3, 4}, 126)},
                   [](const V& v) { return gt::where(v[0], v[1], -1.5); }, {false, true}});
  cases.push_back({"masked_fill_broadcast_mask", {Normal({2, 3, 4}, 127), mask({3, 4}, 128)},
                   [](const V& v) { return v[0].masked_fill(v[1], -2.0).softmax(-1); }, {true, false}});
  return cases;
}

std::vector<GradCase> MatmulCases() {
  auto mm = [](const V& v) { return v[0].matmul(v[1]); };
  return {
      {"matmul_2d", {Normal({3, 4}, 30), Normal({4, 5}, 31)}, mm},
      {"matmul_batched", {Normal({2, 3, 4}, 32), Normal({2, 4, 5}, 33)}, mm},
      {"matmul_batched_broadcast", {Normal({2, 1, 3, 4}, 34), Normal({3, 4, 2}, 35)}, mm},
      {"matmul_batched_by_2d", {Normal({2, 3, 4}, 36), Normal({4, 2}, 37)}, mm},
      {"matmul_1d_2d", {Normal({4}, 38), Normal({4, 5}, 39)}, mm},
      {"matmul_2d_1d", {Normal({3, 4}, 40), Normal({4}, 41)}, mm},
      {"matmul_1d_1d", {Normal({6}, 42), Normal({6}, 43)}, mm},
      {"matmul_batched_1d", {Normal({2, 3, 4}, 44), Normal({4}, 45)}, mm},
      {"matmul_1d_batched", {Normal({4}, 46), Normal({2, 4, 3}, 47)}, mm},
      {"matmul_weight_only", {Normal({3, 4}, 48), Normal({4, 2}, 49)}, mm, {false, true}},
      // x @ w.t() (a linear layer): w gets G^T x without the transpose's
      // record (TransposedWeight in autograd.cc); these cover its forms.
      {"matmul_transposed_weight", {Normal({3, 4}, 140), Normal({5, 4}, 141)},
       [](const V& v) { return v[0].matmul(v[1].t()); }},
      {"matmul_transposed_weight_only", {Normal({3, 4}, 142), Normal({5, 4}, 143)},
       [](const V& v) { return v[0].matmul(v[1].t()); }, {false, true}},
      {"matmul_batched_by_transposed_weight", {Normal({2, 3, 4}, 144), Normal({5, 4}, 145)},
       [](const V& v) { return v[0].matmul(v[1].transpose(1, 0)); }},
      {"matmul_transposed_weight_read_twice", {Normal({3, 4}, 146), Normal({5, 4}, 147)},
       [](const V& v) {
         gt::Tensor wt = v[1].transpose(-1, 0);
         return v[0].matmul(wt).sum(std::vector<int64_t>{0}) + (wt * wt).sum(std::vector<int64_t>{0});
       }},
      {"matmul_transposed_computed_weight", {Normal({3, 4}, 148), Normal({5, 4}, 149)},
       [](const V& v) { return v[0].matmul((v[1] * v[1]).t()); }},
      {"matmul_identity_transpose", {Normal({3, 4}, 150), Normal({4, 5}, 151)},
       [](const V& v) { return v[0].matmul(v[1].transpose(1, 1)); }},
  };
}

std::vector<GradCase> UnaryCases() {
  return {
      {"relu", {Distinct({3, 5}, 50)}, [](const V& v) { return v[0].relu(); }},
      {"sigmoid", {Normal({3, 5}, 51) * 2}, [](const V& v) { return v[0].sigmoid(); }},
      {"tanh", {Normal({3, 5}, 52)}, [](const V& v) { return v[0].tanh(); }},
      {"exp", {Normal({3, 5}, 53)}, [](const V& v) { return v[0].exp(); }},
      {"exp_0d", {Normal({}, 54)}, [](const V& v) { return v[0].exp(); }},
      {"log", {Positive({3, 5}, 55)}, [](const V& v) { return v[0].log(); }},
      {"sqrt", {Positive({3, 5}, 56)}, [](const V& v) { return v[0].sqrt(); }},
      {"neg", {Normal({3, 5}, 57)}, [](const V& v) { return v[0].neg(); }},
      {"neg_operator", {Normal({3, 5}, 58)}, [](const V& v) { return -v[0]; }},
      {"abs", {Distinct({3, 5}, 59)}, [](const V& v) { return v[0].abs(); }},
      {"clone", {Normal({3, 5}, 60)}, [](const V& v) { return v[0].clone() * v[0]; }},
      {"softmax_dim1", {Normal({3, 4}, 61)}, [](const V& v) { return v[0].softmax(1); }},
      {"softmax_dim_neg1", {Normal({3, 4}, 62)}, [](const V& v) { return v[0].softmax(-1); }},
      {"softmax_dim0", {Normal({3, 4}, 63)}, [](const V& v) { return v[0].softmax(0); }},
      {"softmax_3d_middle", {Normal({2, 3, 4}, 64)}, [](const V& v) { return v[0].softmax(1); }},
      {"log_softmax_dim1", {Normal({3, 4}, 65)}, [](const V& v) { return v[0].log_softmax(1); }},
      {"log_softmax_dim_neg1", {Normal({3, 4}, 66)}, [](const V& v) { return v[0].log_softmax(-1); }},
      {"log_softmax_dim0", {Normal({3, 4}, 67)}, [](const V& v) { return v[0].log_softmax(0); }},
      {"log_softmax_3d_first", {Normal({2, 3, 4}, 68)}, [](const V& v) { return v[0].log_softmax(0); }},
      {"erf", {Normal({3, 5}, 69)}, [](const V& v) { return v[0].erf(); }},
      {"tril", {Normal({2, 4, 4}, 70)}, [](const V& v) { return v[0].tril() * v[0]; }},
      {"triu_diag1", {Normal({3, 4}, 71)}, [](const V& v) { return v[0].triu(1).exp(); }},
      {"gelu", {Normal({3, 5}, 72) * 2}, [](const V& v) { return gt::nn::gelu(v[0]); }},
      // Indexing: the index (int64, sent as is) has no gradient.
      {"index_select_repeated_rows", {Normal({5, 3}, 73), at::tensor({2, 0, 2, 4}, at::kLong)},
       [](const V& v) { return v[0].index_select(0, v[1]).tanh(); }, {true, false}},
      {"index_add", {Normal({5, 3}, 74), at::tensor({1, 1, 3}, at::kLong), Normal({3, 3}, 75)},
       [](const V& v) { return v[0].index_add(0, v[1], v[2]).exp(); }, {true, false, true}},
      {"gather_dim1", {Normal({3, 4}, 76), at::tensor({1, 0, 3, 3, 0, 2}, at::kLong).reshape({3, 2})},
       [](const V& v) { return v[0].gather(1, v[1]).exp(); }, {true, false}},
      {"scatter_add_dim0", {Normal({3, 4}, 77), at::tensor({2, 0, 1, 1}, at::kLong).reshape({1, 4}), Normal({1, 4}, 78)},
       [](const V& v) { return v[0].scatter_add(0, v[1], v[2]).tanh(); }, {true, false, true}},
      {"embedding", {Normal({6, 3}, 79), at::tensor({1, 5, 1, 0}, at::kLong).reshape({2, 2})},
       [](const V& v) { return gt::nn::embedding(v[1], v[0]) * 2.0; }, {true, false}},
      {"layer_norm", {Normal({2, 3, 4}, 80), Normal({4}, 81), Normal({4}, 82)},
       [](const V& v) { return gt::nn::layer_norm(v[0], 1, v[1], v[2]); }},
  };
}

std::vector<GradCase> ReduceCases() {
  std::vector<GradCase> cases;
  struct ReduceOp {
    const char* name;
    gt::Tensor (gt::Tensor::*f)(std::vector<int64_t>, bool) const;
  };
  const ReduceOp ops[] = {
      {"sum", &gt::Tensor::sum}, {"mean", &gt::Tensor::mean}, {"max", &gt::Tensor::max}, {"min", &gt::Tensor::min}};
  struct Axes {
    const char* name;
    std::vector<int64_t> axes;
    bool keepdims;
  };
  const Axes axes[] = {
      {"all", {}, false},          {"all_keepdims", {}, true},   {"axis1", {1}, false},
      {"axis0_keepdims", {0}, true}, {"axes02", {0, 2}, false},   {"axis_neg1", {-1}, false},
      {"axes_neg_keepdims", {-1, -3}, true}, {"axes_unordered", {2, 1}, false}, {"axes_every", {0, 1, 2}, false},
  };
  uint64_t seed = 70;
  for (const ReduceOp& op : ops) {
    for (const Axes& a : axes) {
      cases.push_back({std::string(op.name) + "_" + a.name, {Distinct({2, 3, 4}, seed++)},
                       [f = op.f, ax = a.axes, k = a.keepdims](const V& v) { return (v[0].*f)(ax, k); }});
    }
    cases.push_back({std::string(op.name) + "_0d", {Normal({}, seed++)},
                     [f = op.f](const V& v) { return (v[0].*f)({-1}, false); }});
    cases.push_back({std::string(op.name) + "_0d_keepdims", {Normal({}, seed++)},
                     [f = op.f](const V& v) { return (v[0].*f)({0}, true); }});
    cases.push_back({std::string(op.name) + "_size1_axis", {Distinct({3, 1}, seed++)},
                     [f = op.f](const V& v) { return (v[0].*f)({1}, false); }});
  }
  return cases;
}

std::vector<GradCase> MovementCases() {
  const std::vector<at::Tensor> block = {Normal({2, 3, 4}, 100)};
  const std::vector<at::Tensor> grid = {Normal({4, 6}, 101)};
  auto weighted_cat = [](const std::vector<gt::Tensor>& pieces, int64_t dim) {
    std::vector<gt::Tensor> scaled;
    for (size_t i = 0; i < pieces.size(); ++i) scaled.push_back(pieces[i] * static_cast<double>(i + 1));
    return gt::cat(scaled, dim);
  };
  return {
      {"reshape_infer_first", block, [](const V& v) { return v[0].reshape({-1, 4}); }},
      {"reshape_infer_middle", block, [](const V& v) { return v[0].reshape({4, -1, 3}); }},
      {"reshape_flat", block, [](const V& v) { return v[0].reshape({24}); }},
      {"reshape_0d", {Normal({}, 102)}, [](const V& v) { return v[0].reshape({1, 1}); }},
      {"transpose_0_2", block, [](const V& v) { return v[0].transpose(0, 2); }},
      {"transpose_negative", block, [](const V& v) { return v[0].transpose(-1, 1); }},
      {"t_2d", grid, [](const V& v) { return v[0].t(); }},
      {"t_3d", block, [](const V& v) { return v[0].t(); }},
      {"t_1d", {Normal({5}, 103)}, [](const V& v) { return v[0].t(); }},
      {"permute", block, [](const V& v) { return v[0].permute({2, 0, 1}); }},
      {"permute_negative", block, [](const V& v) { return v[0].permute({-1, 0, -2}); }},
      {"unsqueeze_0", grid, [](const V& v) { return v[0].unsqueeze(0); }},
      {"unsqueeze_neg1", grid, [](const V& v) { return v[0].unsqueeze(-1); }},
      {"unsqueeze_middle", grid, [](const V& v) { return v[0].unsqueeze(1); }},
      {"squeeze_all", {Normal({2, 1, 3, 1}, 104)}, [](const V& v) { return v[0].squeeze(); }},
      {"squeeze_dim", {Normal({2, 1, 3, 1}, 105)}, [](const V& v) { return v[0].squeeze(1); }},
      {"squeeze_neg_dim", {Normal({2, 1, 3, 1}, 106)}, [](const V& v) { return v[0].squeeze(-1); }},
      {"squeeze_not_1", {Normal({2, 1, 3}, 107)}, [](const V& v) { return v[0].squeeze(0); }},
      {"slice", grid, [](const V& v) { return v[0].slice(1, 1, 4); }},
      {"slice_step", grid, [](const V& v) { return v[0].slice(1, std::nullopt, std::nullopt, 2); }},
      {"slice_negative", grid, [](const V& v) { return v[0].slice(0, -3, -1); }},
      {"slice_negative_dim_step3", grid, [](const V& v) { return v[0].slice(-1, 1, std::nullopt, 3); }},
      {"slice_clamped", grid, [](const V& v) { return v[0].slice(0, -100, 100); }},
      {"slice_3d_middle_step", block, [](const V& v) { return v[0].slice(1, 0, 3, 2); }},
      {"slice_empty", grid, [](const V& v) { return v[0].slice(1, 3, 3); }},
      {"select", block, [](const V& v) { return v[0].select(0, 1); }},
      {"select_negative", block, [](const V& v) { return v[0].select(-1, -2); }},
      {"select_middle", block, [](const V& v) { return v[0].select(1, 2); }},
      {"select_twice", block, [](const V& v) { return v[0].select(0, 0) * v[0].select(0, 1); }},
      {"cat_dim0", {Normal({2, 3}, 108), Normal({4, 3}, 109)}, [](const V& v) { return gt::cat({v[0], v[1]}, 0); }},
      {"cat_neg_dim_three", {Normal({2, 1}, 110), Normal({2, 3}, 111), Normal({2, 2}, 112)},
       [](const V& v) { return gt::cat({v[0], v[1], v[2]}, -1); }},
      {"cat_1d", {Normal({3}, 113), Normal({2}, 114)}, [](const V& v) { return gt::cat({v[0], v[1]}); }},
      {"cat_same_tensor_twice", {Normal({2, 3}, 115)}, [](const V& v) { return gt::cat({v[0], v[0].exp()}, 1); }},
      {"split_uneven", {Normal({3, 5}, 116)}, [=](const V& v) { return weighted_cat(v[0].split(2, 1), 1); }},
      {"split_dim0", {Normal({4, 2}, 117)}, [=](const V& v) { return weighted_cat(v[0].split(1, 0), 0); }},
      {"split_one_piece_used", {Normal({5, 2}, 118)}, [](const V& v) { return v[0].split(2, 0)[1]; }},
      {"chunk_uneven", {Normal({5, 2}, 119)}, [=](const V& v) { return weighted_cat(v[0].chunk(2, 0), 0); }},
      {"chunk_neg_dim", {Normal({2, 6}, 120)}, [=](const V& v) { return weighted_cat(v[0].chunk(3, -1), -1); }},
  };
}

std::vector<GradCase> CompositeCases() {
  return {
      {"mlp_layer", {Normal({4, 3}, 130), Normal({3, 5}, 131), Normal({5}, 132)},
       [](const V& v) { return (v[0].matmul(v[1]) + v[2]).tanh().sum({1}).mean(); }},
      {"linear_like", {Normal({4, 3}, 133), Normal({5, 3}, 134), Normal({5}, 135)},
       [](const V& v) { return (v[0].matmul(v[1].t()) + v[2]).sigmoid(); }},
      {"reused_input", {Normal({2, 3}, 136)}, [](const V& v) { return v[0] * v[0] + v[0].exp() * 2.0 - v[0]; }},
      {"diamond", {Normal({3, 2}, 137)},
       [](const V& v) {
         gt::Tensor y = v[0].tanh();
         return y * y.exp() + y.sum({0}, true);
       }},
      {"cross_entropy_like", {Normal({4, 5}, 138)},
       [](const V& v) { return -(v[0].log_softmax(1) * v[0].softmax(1)).sum({1}).mean(); }},
      // gt::nn's losses.
      {"nn_mse_loss", {Normal({4, 3}, 139), Normal({4, 3}, 140)},
       [](const V& v) { return gt::nn::mse_loss(v[0], v[1]); }},
      {"nn_binary_cross_entropy", {Positive({6}, 141) * 0.4, Positive({6}, 142) * 0.5},
       [](const V& v) { return gt::nn::binary_cross_entropy(v[0], v[1]); }},
      // One cross_entropy op: the session has placed nothing yet (PlacingCases run last).
      {"nn_cross_entropy", {Normal({4, 5}, 143)},
       [](const V& v) { return gt::nn::cross_entropy(v[0], Send(at::tensor({0, 4, -100, 2}, at::kLong))); }},
      {"nn_linear", {Normal({4, 3}, 144), Normal({5, 3}, 145), Normal({5}, 146)},
       [](const V& v) {
         gt::nn::Linear layer(3, 5);
         layer.weight = v[1];
         layer.bias = v[2];
         return layer(v[0]);
       }},
  };
}

// The checker itself: its numeric gradient of a known function is the
// known derivative, and a wrong analytic gradient would not pass.
TEST_F(AutogradTest, FiniteDifferencesAreSound) {
  at::Tensor x0 = Normal({2, 3}, 140);
  GradCase cube{"cube", {x0}, [](const V& v) { return v[0] * v[0] * v[0]; }};
  at::Tensor w0 = Normal({2, 3}, 4242);
  gt::Tensor w = Send(w0);
  at::Tensor numeric = NumericGradient(cube, 0, w);
  at::Tensor exact = 3 * x0 * x0 * w0;
  EXPECT_TRUE(at::allclose(numeric, exact, kTolerance, kTolerance)) << numeric << "\n" << exact;
  EXPECT_FALSE(at::allclose(numeric, 2 * x0 * w0, kTolerance, kTolerance));
}

TEST_F(AutogradTest, BinaryOpGradientsMatchFiniteDifferences) { RunCases(BinaryCases()); }
TEST_F(AutogradTest, MatmulGradientsMatchFiniteDifferences) { RunCases(MatmulCases()); }
TEST_F(AutogradTest, UnaryOpGradientsMatchFiniteDifferences) { RunCases(UnaryCases()); }
TEST_F(AutogradTest, ReductionGradientsMatchFiniteDifferences) { RunCases(ReduceCases()); }
TEST_F(AutogradTest, MovementGradientsMatchFiniteDifferences) { RunCases(MovementCases()); }
TEST_F(AutogradTest, CompositeGradientsMatchFiniteDifferences) { RunCases(CompositeCases()); }

// conv2d, the poolings and var (split out for length).
#include "autograd_conv_cases.h"

TEST_F(AutogradTest, ConvPoolAndVarGradientsMatchFiniteDifferences) { RunCases(ConvCases()); }

// A redistribute makes the session one that places tensors, for good: from
// then on cross_entropy and mse_loss are their composites, whose
// pieces the sharding stage can run where the rows are. These cases run last
// (PlacingGradientsMatchFiniteDifferences is the file's last test, and
// EveryDifferentiableOpHasAGradientCase takes them last), so that the cases
// above see the whole-tensor forms.
std::vector<GradCase> PlacingCases() {
  return {
      {"redistribute", {Normal({4, 3}, 64)},  // one worker here: the layout is whole, the gradient passes through
       [](const V& v) {
         namespace gd = gt::distributed;
         return gd::distribute_tensor(v[0], gd::DeviceMesh({0}), {gd::Shard(0)}) * v[0];
       }},
      {"nn_mse_loss_composite", {Normal({4, 3}, 148), Normal({4, 3}, 149)},
       [](const V& v) { return gt::nn::mse_loss(v[0], v[1]); }},
      {"nn_cross_entropy_composite", {Normal({4, 5}, 147)},
       [](const V& v) { return gt::nn::cross_entropy(v[0], Send(at::tensor({3, -100, 1, 1}, at::kLong))); }},
  };
}

// Every op that autograd records (a GradRule in gt/ops.def) appears in some
// case above; adding a differentiable op without a gradient check fails here.
TEST_F(AutogradTest, EveryDifferentiableOpHasAGradientCase) {
  std::set<std::string> recorded;
  for (const auto& group : {BinaryCases(), MatmulCases(), UnaryCases(), ReduceCases(), MovementCases(),
                            CompositeCases(), ConvCases(), PlacingCases()}) {
    for (const GradCase& c : group) {
      std::vector<gt::Tensor> leaves;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        leaves.push_back(Send(c.inputs[i]));
        if (Requires(c, i)) leaves.back().requires_grad_();
      }
      gt::clear_tape();
      gt::Tensor out = c.f(leaves);
      for (const gt::TapeEntry& e : gt::tape()) recorded.insert(e.op);
    }
  }
  for (size_t i = 0; i < static_cast<size_t>(gt::Op::kCount); ++i) {
    const gt::Op op = static_cast<gt::Op>(i);
    if (gt::Differentiable(op)) {  // the op table's GradRule: argmax, masks, fused backwards have none
      EXPECT_TRUE(recorded.count(std::string(gt::OpName(op)))) << "op " << gt::OpName(op) << " has no gradient case";
    }
  }
}

// At a tie the max/min is not differentiable; gt (like PyTorch's amax/amin)
// splits the gradient evenly among the tied elements.
TEST_F(AutogradTest, MaxMinTiesShareTheGradientEvenly) {
  auto x_of = [] { return at::tensor({1.0, 3.0, 3.0, 2.0, 2.0, 2.0}, at::kDouble).reshape({2, 3}); };
  struct Tie {
    const char* name;
    std::function<gt::Tensor(const gt::Tensor&)> f;
    std::function<at::Tensor(const at::Tensor&)> reference;  // the same with PyTorch's autograd
    at::Tensor want;
  };
  const double third = 1.0 / 3.0;
  const Tie ties[] = {
      {"max_axis1", [](const gt::Tensor& x) { return x.max({1}); },
       [](const at::Tensor& x) { return at::amax(x, {1}); },
       at::tensor({0.0, 0.5, 0.5, third, third, third}, at::kDouble)},
      {"max_all", [](const gt::Tensor& x) { return x.max(); }, [](const at::Tensor& x) { return at::amax(x, {0, 1}); },
       at::tensor({0.0, 0.5, 0.5, 0.0, 0.0, 0.0}, at::kDouble)},
      {"max_axis0_keepdims", [](const gt::Tensor& x) { return x.max({0}, true); },
       [](const at::Tensor& x) { return at::amax(x, {0}, true); },
       at::tensor({0.0, 1.0, 1.0, 1.0, 0.0, 0.0}, at::kDouble)},
      {"min_axis_neg1_keepdims", [](const gt::Tensor& x) { return x.min({-1}, true); },
       [](const at::Tensor& x) { return at::amin(x, {-1}, true); },
       at::tensor({1.0, 0.0, 0.0, third, third, third}, at::kDouble)},
      {"min_all", [](const gt::Tensor& x) { return x.min(); }, [](const at::Tensor& x) { return at::amin(x, {0, 1}); },
       at::tensor({1.0, 0.0, 0.0, 0.0, 0.0, 0.0}, at::kDouble)},
  };
  for (const Tie& t : ties) {
    SCOPED_TRACE(t.name);
    gt::Tensor x = Send(x_of()).requires_grad_();
    t.f(x).sum().backward();
    at::Tensor got = Fetch(x.grad());
    EXPECT_TRUE(at::allclose(got, t.want.reshape({2, 3}), 1e-12, 1e-12)) << "gt:\n" << got << "\nwant:\n" << t.want;
    at::Tensor ref = x_of().set_requires_grad(true);
    t.reference(ref).sum().backward();
    EXPECT_TRUE(at::allclose(ref.grad(), t.want.reshape({2, 3}), 1e-12, 1e-12)) << "PyTorch:\n" << ref.grad();
  }
  // A 3-way tie in one column and a 2-way tie in the other, weighted, against
  // the formula written out: w * mask / count.
  at::Tensor y = at::tensor({5.0, 1.0, 5.0, 2.0, 5.0, 2.0}, at::kDouble).reshape({3, 2});
  gt::Tensor gy = Send(y).requires_grad_();
  gt::Tensor w = Send(at::tensor({2.0, -1.0}, at::kDouble));
  (gy.max({0}) * w).sum().backward();
  at::Tensor want = at::tensor({2.0 / 3, 0.0, 2.0 / 3, -0.5, 2.0 / 3, -0.5}, at::kDouble).reshape({3, 2});
  at::Tensor got = Fetch(gy.grad());
  EXPECT_TRUE(at::allclose(got, want, 1e-12, 1e-12)) << "gt:\n" << got << "\nwant:\n" << want;
}

TEST_F(AutogradTest, PlacingGradientsMatchFiniteDifferences) { RunCases(PlacingCases()); }

}  // namespace
