// Autograd through the real stack: the C++ client's tape, with every forward
// and backward op running on a gt-worker process behind a gt-dispatcher.
//
// The semantics around the tape: accumulation, clearing, grad mode, explicit
// gradients, retain_graph, in-place refusals, and in-place parameter updates
// that keep the worker's tensor count flat. The gradient checks of every
// differentiable op are in autograd_gradient_test.cc, the fixture in
// autograd_test_fixture.h; both make the suite autograd_test.
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

// ---- semantics --------------------------------------------------------------------

// `call` throws gt::Error with `code` and a message containing every part.
void ExpectError(const std::function<void()>& call, gt::Code code, const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "no gt::Error thrown";
  } catch (const gt::Error& e) {
    EXPECT_EQ(e.code(), code) << gt::CodeName(e.code()) << ": " << e.what();
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << e.what() << "' lacks '" << p << "'";
  }
}

void ExpectClose(const gt::Tensor& got, const at::Tensor& want, double tolerance = 1e-12) {
  at::Tensor g = Fetch(got);
  EXPECT_TRUE(at::allclose(g, want, tolerance, tolerance)) << "gt:\n" << g << "\nwant:\n" << want;
}

TEST_F(AutogradTest, GradientsAccumulateAcrossBackwardCalls) {
  at::Tensor x0 = Normal({2, 3}, 200);
  gt::Tensor x = Send(x0).requires_grad_();
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(x.grad().defined());
  (x * x).sum().backward();
  ExpectClose(x.grad(), 2 * x0);
  (x * 3.0).sum().backward();
  ExpectClose(x.grad(), 2 * x0 + 3);
  // The same graph twice (retained) accumulates too.
  gt::Tensor y = (x * x).sum();
  y.backward(gt::Tensor(), /*retain_graph=*/true);
  y.backward();
  ExpectClose(x.grad(), 6 * x0 + 3);
}

TEST_F(AutogradTest, SetGradUndefinedClears) {
  at::Tensor x0 = Normal({4}, 201);
  gt::Tensor x = Send(x0).requires_grad_();
  (x * x).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  x.set_grad(gt::Tensor());
  EXPECT_FALSE(x.grad().defined());
  (x * 5.0).sum().backward();  // starts afresh
  ExpectClose(x.grad(), at::full({4}, 5.0, at::kDouble));
  // A set gradient is accumulated onto.
  x.set_grad(Send(at::ones({4}, at::kDouble)));
  x.sum().backward();
  ExpectClose(x.grad(), at::full({4}, 2.0, at::kDouble));
  ExpectError([&] { x.set_grad(Send(at::ones({3}, at::kDouble))); }, gt::Code::kInvalidArgument, {"[3]", "[4]"});
}

TEST_F(AutogradTest, NoGradGuardRecordsNothing) {
  gt::Tensor x = Send(Normal({2, 3}, 202)).requires_grad_();
  std::vector<gt::TapeEntry> before = gt::tape();
  {
    gt::NoGradGuard no_grad;
    EXPECT_FALSE(gt::is_grad_enabled());
    gt::Tensor y = (x * 2.0 + x.exp()).sum();
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
    {
      gt::NoGradGuard nested;
      EXPECT_FALSE((x + 1.0).requires_grad());
    }
    EXPECT_FALSE(gt::is_grad_enabled()) << "the inner guard must restore the outer one's mode";
    // Grad mode is per thread.
    bool other_thread_enabled = false;
    std::thread([&] { other_thread_enabled = gt::is_grad_enabled(); }).join();
    EXPECT_TRUE(other_thread_enabled);
    ExpectError([&] { y.backward(); }, gt::Code::kFailedPrecondition, {"does not require grad"});
  }
  std::vector<gt::TapeEntry> after = gt::tape();
  ASSERT_EQ(after.size(), before.size()) << "ops under NoGradGuard were recorded";
  if (!before.empty()) {
    EXPECT_EQ(after.back().index, before.back().index);
  }
  EXPECT_TRUE(gt::is_grad_enabled());
  EXPECT_FALSE(x.grad().defined());

  // With grad mode back on, the same op is recorded, with its operands.
  gt::Tensor z = x * 2.0;
  EXPECT_TRUE(z.requires_grad());
  std::vector<gt::TapeEntry> recorded = gt::tape();
  ASSERT_FALSE(recorded.empty());
  EXPECT_EQ(recorded.back().op, "mul");
  EXPECT_EQ(recorded.back().output, z.id());
  EXPECT_EQ(recorded.back().inputs, std::vector<gt::TensorId>{x.id()});

  // set_grad_enabled(false) works like the guard.
  gt::set_grad_enabled(false);
  EXPECT_FALSE((x * 2.0).requires_grad());
  gt::set_grad_enabled(true);
}

TEST_F(AutogradTest, BackwardOnNonScalarNeedsAGradient) {
  at::Tensor x0 = Normal({2, 3}, 203);
  gt::Tensor x = Send(x0).requires_grad_();
  gt::Tensor y = x * x * 3.0;
  ExpectError([&] { y.backward(); }, gt::Code::kInvalidArgument, {"[2, 3]", "gradient"});
  // With an explicit gradient of y's shape.
  at::Tensor g0 = Normal({2, 3}, 204);
  ExpectError([&] { y.backward(Send(at::ones({3, 2}, at::kDouble))); }, gt::Code::kInvalidArgument,
              {"[3, 2]", "[2, 3]"});
  y.backward(Send(g0));
  ExpectClose(x.grad(), 6 * x0 * g0);
  // An explicit gradient for a scalar, and backward() from a leaf.
  gt::Tensor s = Send(Normal({}, 205)).requires_grad_();
  (s * 4.0).backward(Send(Scalar(0.5)));
  ExpectClose(s.grad(), Scalar(2.0));
  s.backward();
  ExpectClose(s.grad(), Scalar(3.0));
}

TEST_F(AutogradTest, SecondBackwardNeedsRetainGraph) {
  at::Tensor x0 = Normal({3}, 206);
  gt::Tensor x = Send(x0).requires_grad_();
  gt::Tensor y = (x.exp() * x).sum();
  y.backward();
  ExpectError([&] { y.backward(); }, gt::Code::kFailedPrecondition, {"retain_graph"});
  at::Tensor once = (x0.exp() * (x0 + 1));
  ExpectClose(x.grad(), once);

  x.set_grad(gt::Tensor());
  gt::Tensor z = (x.exp() * x).sum();
  z.backward(gt::Tensor(), /*retain_graph=*/true);
  z.backward(gt::Tensor(), /*retain_graph=*/true);
  z.backward();
  ExpectClose(x.grad(), 3 * once);
  ExpectError([&] { z.backward(); }, gt::Code::kFailedPrecondition, {"retain_graph"});
}

TEST_F(AutogradTest, InPlaceOnATensorThatRequiresGradThrows) {
  at::Tensor x0 = Normal({2, 2}, 207);
  gt::Tensor x = Send(x0).requires_grad_();
  gt::Tensor other = Send(Normal({2, 2}, 208));
  const std::vector<std::string> parts = {"requires grad", "in place"};
  ExpectError([&] { x.copy_(other); }, gt::Code::kFailedPrecondition, {"copy_", "requires grad"});
  ExpectError([&] { x.fill_(1); }, gt::Code::kFailedPrecondition, {"fill_", "requires grad"});
  ExpectError([&] { x.zero_(); }, gt::Code::kFailedPrecondition, parts);
  ExpectError([&] { x += other; }, gt::Code::kFailedPrecondition, parts);
  ExpectError([&] { x -= 1.0; }, gt::Code::kFailedPrecondition, parts);
  ExpectError([&] { x *= other; }, gt::Code::kFailedPrecondition, parts);
  gt::Tensor y = x * 2.0;  // not a leaf, but recorded
  ExpectError([&] { y.fill_(0); }, gt::Code::kFailedPrecondition, parts);
  ExpectClose(x, x0);  // nothing changed remotely

  {
    gt::NoGradGuard no_grad;
    x += 1.0;
    x *= 2.0;
  }
  ExpectClose(x, (x0 + 1) * 2);
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  // A tensor that does not require grad changes in place with grad mode on.
  other.fill_(3);
  ExpectClose(other, at::full({2, 2}, 3.0, at::kDouble));
  // But not by taking in one that does: its gradient would be lost, where
  // PyTorch records the op.
  const std::vector<std::string> lost = {"would be lost"};
  ExpectError([&] { other += x * 2.0; }, gt::Code::kFailedPrecondition, lost);
  ExpectError([&] { other.sub_(x, 0.5); }, gt::Code::kFailedPrecondition, lost);
  ExpectError([&] { other *= x; }, gt::Code::kFailedPrecondition, lost);
  ExpectError([&] { other.copy_(x); }, gt::Code::kFailedPrecondition, lost);
  ExpectClose(other, at::full({2, 2}, 3.0, at::kDouble));
  {
    gt::NoGradGuard no_grad;
    other += x;
  }
  ExpectClose(other, 3.0 + (x0 + 1) * 2);
}

TEST_F(AutogradTest, LeafAndDetachRules) {
  at::Tensor x0 = Normal({3}, 209);
  gt::Tensor x = Send(x0).requires_grad_();
  gt::Tensor y = x * 2.0;
  EXPECT_FALSE(y.is_leaf());
  ExpectError([&] { y.requires_grad_(); }, gt::Code::kFailedPrecondition, {"leaf"});
  ExpectError([&] { Send(at::arange(3, at::kLong)).requires_grad_(); }, gt::Code::kInvalidArgument, {"int64"});

  gt::Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.id(), y.id()) << "detach() shares the remote data";
  ExpectClose(d, 2 * x0);
  gt::Tensor unused = Send(Normal({3}, 210)).requires_grad_();
  (d * x + x).sum().backward();  // no gradient flows through d
  ExpectClose(x.grad(), 2 * x0 + 1);
  EXPECT_FALSE(unused.grad().defined()) << "a leaf outside the graph got a gradient";
  // Comparisons are not differentiable: never recorded.
  EXPECT_FALSE(x.gt(0.0).requires_grad());
}

// A leaf's gradient has the leaf's dtype, as in PyTorch, even when the op
// promoted (float32 parameter times float64 data).
TEST_F(AutogradTest, GradientHasTheLeafsDtype) {
  at::Tensor x0 = Normal({2, 3}, 217).to(at::kFloat);
  at::Tensor c0 = Normal({2, 3}, 218);
  gt::Tensor x = Send(x0).requires_grad_();
  gt::Tensor y = (x * Send(c0)).sum();
  EXPECT_EQ(y.dtype(), DType::kFloat64);
  y.backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::kFloat32);
  ExpectClose(x.grad().dtype() == DType::kFloat32 ? x.grad() : x.grad() * gt::ones({1}, DType::kFloat32),
              c0.to(at::kFloat), 1e-6);
}

// A float32 product times a float64 tensor: the float64 gradient goes back
// to float32 for the product's backward, as in PyTorch (a matmul refuses
// operands of two dtypes).
TEST_F(AutogradTest, WiderGradientReachesAMatmulInItsDtype) {
  at::Tensor x0 = Normal({3, 4}, 219).to(at::kFloat), w0 = Normal({5, 4}, 220).to(at::kFloat);
  at::Tensor c0 = Normal({3, 5}, 221);
  gt::Tensor x = Send(x0).requires_grad_(), w = Send(w0).requires_grad_();
  (x.matmul(w.t()) * Send(c0)).sum().backward();
  ASSERT_TRUE(x.grad().defined() && w.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::kFloat32);
  EXPECT_EQ(w.grad().dtype(), DType::kFloat32);
  at::Tensor g = c0.to(at::kFloat);
  ExpectClose(x.grad(), at::matmul(g, w0), 1e-5);
  ExpectClose(w.grad(), at::matmul(g.t(), x0), 1e-5);
}

// Two leaves whose gradients are computed by the same expression still get
// separate gradient tensors: changing one in place leaves the other alone.
TEST_F(AutogradTest, LeafGradientsAreDistinctTensors) {
  gt::Tensor a = Send(Normal({3}, 219)).requires_grad_();
  gt::Tensor b = Send(Normal({3}, 220)).requires_grad_();
  gt::Tensor g0 = Send(Normal({3}, 221));
  (a + b).backward(g0);
  ASSERT_TRUE(a.grad().defined() && b.grad().defined());
  EXPECT_FALSE(a.grad().is_same(b.grad()));
  EXPECT_NE(a.grad().id(), b.grad().id()) << "a.grad and b.grad are one remote tensor";
  EXPECT_NE(a.grad().id(), g0.id()) << "a.grad is the caller's gradient tensor";
  a.grad().zero_();
  ExpectClose(b.grad(), Fetch(g0));
}

TEST_F(AutogradTest, SignalScopeIsOnTheTape) {
  gt::Tensor x = Send(Normal({2}, 211)).requires_grad_();
  gt::Tensor y;
  {
    gt::SignalScope scope("layer1");
    y = x.tanh();
  }
  std::vector<gt::TapeEntry> t = gt::tape();
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t.back().op, "tanh");
  EXPECT_EQ(t.back().signal, "layer1");
  EXPECT_EQ(t.back().output, y.id());
}

// SGD by hand under NoGradGuard: the parameter keeps its remote tensor (same
// id), and the worker holds no more tensors after step 3 than after step 2.
TEST_F(AutogradTest, ParameterUpdateUnderNoGradIsInPlace) {
  const int64_t n = 16;
  at::Tensor x0 = Normal({n, 8}, 212), t0 = Normal({n, 1}, 213), w0 = Normal({8, 1}, 214) * 0.1;
  gt::Tensor x = Send(x0), t = Send(t0);
  gt::Tensor w = Send(w0).requires_grad_();
  const gt::TensorId id = w.id();
  const double lr = 0.05;
  std::vector<double> live, losses;
  for (int step = 0; step < 12; ++step) {
    {
      gt::Tensor loss = (x.matmul(w) - t).pow(2.0).mean();
      losses.push_back(loss.item());
      loss.backward();
      gt::NoGradGuard no_grad;
      w -= w.grad() * lr;
    }
    w.set_grad(gt::Tensor());
    EXPECT_EQ(w.id(), id) << "the update made a new tensor";
    EXPECT_TRUE(w.requires_grad());
    EXPECT_TRUE(w.is_leaf());
    live.push_back(LiveTensors());
  }
  for (size_t i = 2; i < live.size(); ++i) EXPECT_EQ(live[i], live[1]) << "live tensors grew at step " << i;
  EXPECT_LT(losses.back(), losses.front());

  // The same descent in ATen: w -= lr * 2/n * x^T (x w - t).
  at::Tensor w_ref = w0.clone();
  for (int step = 0; step < 12; ++step) w_ref = w_ref - lr * 2.0 / n * x0.t().matmul(x0.matmul(w_ref) - t0);
  ExpectClose(w, w_ref, 1e-10);
}

// The optimizers update in place the same way.
TEST_F(AutogradTest, OptimizersUpdateInPlace) {
  gt::Tensor x = Send(Normal({16, 8}, 215).to(at::kFloat)), t = Send(Normal({16, 3}, 216).to(at::kFloat));
  for (int which = 0; which < 3; ++which) {
    SCOPED_TRACE(which == 0 ? "SGD" : which == 1 ? "SGD momentum + weight decay" : "Adam");
    gt::nn::Linear layer(8, 3, /*bias=*/true, /*seed=*/7);
    std::vector<gt::Tensor> params = layer.parameters();
    std::vector<gt::TensorId> ids;
    for (const gt::Tensor& p : params) ids.push_back(p.id());
    std::optional<gt::nn::SGD> sgd;
    std::optional<gt::nn::Adam> adam;
    if (which == 0) sgd.emplace(params, 0.1);
    if (which == 1) sgd.emplace(params, 0.1, 0.9, 1e-3);
    if (which == 2) adam.emplace(params, 1e-2);
    std::vector<double> live;
    for (int step = 0; step < 8; ++step) {
      {
        gt::Tensor loss = gt::nn::mse_loss(layer(x), t);
        loss.backward();
        if (sgd) sgd->step(), sgd->zero_grad();
        if (adam) adam->step(), adam->zero_grad();
      }
      for (size_t i = 0; i < params.size(); ++i) {
        EXPECT_EQ(params[i].id(), ids[i]);
        EXPECT_FALSE(params[i].grad().defined()) << "zero_grad left a gradient";
      }
      live.push_back(LiveTensors());
    }
    for (size_t i = 2; i < live.size(); ++i) EXPECT_EQ(live[i], live[1]) << "live tensors grew at step " << i;
  }
}

// PyTorch's version-counter rule: a gradient that needs values changed in
// place after the forward op read them is refused, not silently wrong.
TEST_F(AutogradTest, ChangingSavedValuesInPlaceIsRefusedAtBackward) {
  at::Tensor x0 = Normal({2, 3}, 300), w0 = Normal({2, 3}, 301);
  gt::Tensor w = Send(w0).requires_grad_();
  gt::Tensor x = Send(x0);  // needs no grad: changing it in place is allowed
  gt::Tensor y = (x * w).sum();
  x.fill_(2.0);
  ExpectError([&] { y.backward(); }, gt::Code::kFailedPrecondition, {"mul", "changed in place", "version 0, now 1"});

  // Through a view: the view shares its base's data, so its change counts.
  gt::Tensor x2 = Send(x0);
  gt::Tensor z = (x2 * w).sum();
  gt::Tensor row = x2.slice(0, 0, 1);
  row.fill_(0.0);
  ExpectError([&] { z.backward(); }, gt::Code::kFailedPrecondition, {"mul", "changed in place"});

  // An op whose gradient reads only its output (exp): changing the input is fine.
  gt::Tensor x3 = Send(x0);
  gt::Tensor e = (x3 * 0.0 + w).exp().sum();
  x3.fill_(5.0);
  EXPECT_NO_THROW(e.backward());
  ExpectClose(w.grad(), at::exp(w0));
}

TEST_F(AutogradTest, ChangesTheGradientDoesNotReadAreAllowed) {
  at::Tensor x0 = Normal({4}, 310), w0 = Normal({4}, 311);
  gt::Tensor w = Send(w0).requires_grad_();
  gt::Tensor x = Send(x0);
  gt::Tensor y = (x + w).sum();  // add reads no values
  x.fill_(7.0);
  y.backward();
  ExpectClose(w.grad(), at::ones({4}, at::kDouble));
  // A parameter updated under no_grad after its step's backward: the next step is recorded anew.
  {
    gt::NoGradGuard no_grad;
    w.copy_(w - w.grad() * 0.1);
  }
  w.set_grad(gt::Tensor());
  (w * w).sum().backward();
  ExpectClose(w.grad(), 2 * (w0 - 0.1));
}

// Last in the file: its redistribute makes the session place tensors (PlacingCases).

}  // namespace
