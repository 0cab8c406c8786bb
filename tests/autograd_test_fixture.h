// What the autograd_test files share: deterministic float64 inputs, a
// gt-dispatcher with a gt-worker process behind it (AutogradTest), and the
// gradient check: L = sum(f(inputs) * W) with a fixed random W, gt's
// backward() against central finite differences of the same L, each
// perturbed L evaluated by gt itself in float64 (GradCase, RunCases).
#pragma once

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

namespace autograd_test {

using gt::DType;
using gt::testing::Fetch;
using gt::testing::Send;

constexpr double kEps = 1e-6;        // central-difference step
constexpr double kTolerance = 1e-6;  // relative and absolute, float64

// ---- deterministic float64 inputs ------------------------------------------------

inline at::Generator Gen(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

inline at::Tensor Normal(at::IntArrayRef shape, uint64_t seed) {
  return at::randn(shape, Gen(seed), at::TensorOptions().dtype(at::kDouble));
}

// In [0.5, 2): safe for log, sqrt, divisors and fractional powers.
inline at::Tensor Positive(at::IntArrayRef shape, uint64_t seed) {
  return at::rand(shape, Gen(seed), at::TensorOptions().dtype(at::kDouble)) * 1.5 + 0.5;
}

// Pairwise distinct by at least 0.25 and at least 0.05 away from zero, so
// that max/min/relu/abs are differentiable well beyond kEps around them.
inline at::Tensor Distinct(at::IntArrayRef shape, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  at::Tensor perm = at::randperm(n, Gen(seed), at::TensorOptions().dtype(at::kDouble));
  return ((perm - static_cast<double>(n / 2)) * 0.25 + 0.05).reshape(shape);
}

inline at::Tensor Scalar(double v) { return at::scalar_tensor(v, at::kDouble); }

// ---- the cluster -------------------------------------------------------------------

class AutogradTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gt::testing::ConnectedCluster::Start(); }

  static void TearDownTestSuite() { gt::testing::ConnectedCluster::Stop(); }

  void SetUp() override {
    ASSERT_TRUE(gt::testing::ConnectedCluster::ready()) << gt::testing::ConnectedCluster::NotReady();
    ASSERT_TRUE(gt::is_grad_enabled()) << "a previous test left grad mode off";
  }

  void TearDown() override {
    EXPECT_NO_THROW(gt::sync()) << "a remote op failed";
    EXPECT_TRUE(gt::testing::ConnectedCluster::cluster().AllAlive()) << "a host process died";
  }

  // The worker's gt_worker_live_tensors after every queued op (incl. frees)
  // ran. The gauge is set when the worker ends a batch, so read it until two
  // reads agree.
  static double LiveTensors() {
    gt::sync();
    std::optional<double> last;
    for (int i = 0; i < 100; ++i) {
      std::string body = gt::testing::HttpGet(gt::testing::ConnectedCluster::cluster().worker_metrics_ports()[0], "/metrics");
      std::optional<double> v = gt::testing::MetricValue(body, "gt_worker_live_tensors");
      if (v && last && *v == *last) return *v;
      last = v;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "gt_worker_live_tensors did not settle (last: " << last.value_or(-1) << ")";
    return last.value_or(-1);
  }

};

// ---- gradient checks -------------------------------------------------------------

using Fn = std::function<gt::Tensor(const std::vector<gt::Tensor>&)>;

struct GradCase {
  std::string name;
  std::vector<at::Tensor> inputs;   // float64
  Fn f;
  std::vector<bool> requires_grad;  // per input; empty: every input
};

inline bool Requires(const GradCase& c, size_t i) { return c.requires_grad.empty() || c.requires_grad[i]; }

// d L / d inputs[i] by central differences, L = sum(f(inputs) * w), each L
// evaluated remotely; one fetch for all of them.
inline at::Tensor NumericGradient(const GradCase& c, size_t i, const gt::Tensor& w) {
  gt::NoGradGuard no_grad;
  std::vector<gt::Tensor> fixed;
  for (const at::Tensor& in : c.inputs) fixed.push_back(Send(in));
  at::Tensor base = c.inputs[i].contiguous();
  const int64_t n = base.numel();
  if (n == 0) return at::zeros_like(base);
  std::vector<gt::Tensor> losses;
  for (int64_t j = 0; j < n; ++j) {
    for (double sign : {1.0, -1.0}) {
      at::Tensor perturbed = base.clone();
      perturbed.data_ptr<double>()[j] += sign * kEps;
      std::vector<gt::Tensor> args = fixed;
      args[i] = Send(perturbed);
      losses.push_back((c.f(args) * w).sum().reshape({1}));
    }
  }
  at::Tensor l = Fetch(gt::cat(losses));
  at::Tensor plus = l.slice(0, 0, 2 * n, 2), minus = l.slice(0, 1, 2 * n, 2);
  return ((plus - minus) / (2 * kEps)).reshape(base.sizes());
}

inline void ExpectGradientsMatch(const GradCase& c) {
  std::vector<gt::Tensor> leaves;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    gt::Tensor t = Send(c.inputs[i]);
    if (Requires(c, i)) t.requires_grad_();
    leaves.push_back(t);
  }
  gt::Tensor out = c.f(leaves);
  ASSERT_TRUE(out.requires_grad()) << "the result was not recorded";
  EXPECT_FALSE(out.is_leaf());
  ASSERT_EQ(out.dtype(), DType::kFloat64);
  gt::Tensor w;
  {
    gt::NoGradGuard no_grad;
    w = Send(Normal(out.shape(), 4242));
  }
  (out * w).sum().backward();

  for (size_t i = 0; i < leaves.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i) + " " + gt::ShapeToString(leaves[i].shape()));
    gt::Tensor g = leaves[i].grad();
    if (!Requires(c, i)) {
      EXPECT_FALSE(g.defined()) << "an input that does not require grad got one";
      continue;
    }
    ASSERT_TRUE(g.defined()) << "no gradient reached this input";
    EXPECT_FALSE(g.requires_grad());
    ASSERT_EQ(g.shape(), leaves[i].shape());
    ASSERT_EQ(g.dtype(), DType::kFloat64);
    at::Tensor analytic = Fetch(g);
    at::Tensor numeric = NumericGradient(c, i, w);
    double worst = analytic.numel() ? (analytic - numeric).abs().max().item<double>() : 0.0;
    EXPECT_TRUE(at::allclose(analytic, numeric, kTolerance, kTolerance))
        << "max |analytic - numeric| = " << worst << "\nanalytic (gt backward):\n"
        << analytic << "\nnumeric (central differences):\n"
        << numeric;
  }
}

inline void RunCases(const std::vector<GradCase>& cases) {
  for (const GradCase& c : cases) {
    SCOPED_TRACE("case " + c.name);
    try {
      ExpectGradientsMatch(c);
    } catch (const gt::Error& e) {
      ADD_FAILURE() << "gt::Error (" << gt::CodeName(e.code()) << "): " << e.what();
    }
  }
}

using V = std::vector<gt::Tensor>;

}  // namespace autograd_test
