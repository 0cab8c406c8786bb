// Compiled units in the torch backend, driven directly (no hosts): every
// strategy (interpreted, TorchScript graph, legacy fuser) must give what
// eager ATen gives, within 1e-6 relative, on every run including the trials;
// the backend settles on one strategy per unit and counts what it did.
#include <algorithm>
#include <chrono>
#include <thread>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "fused_kernels.h"
#include "torch_backend.h"
#include "unit_graph.h"
#include "unit_plan.h"

namespace gt::torch_backend {
namespace {

class KeepSink final : public ReplySink {
 public:
  void SendData(const Instruction&, DType, const Shape&, BlobPtr bytes) override { last = bytes; }
  BlobPtr last;
};

Instruction Make(Op op, std::vector<TensorId> operands, std::vector<TensorId> results) {
  Instruction inst;
  inst.op = op;
  inst.client = 1;
  inst.operands = std::move(operands);
  inst.results = std::move(results);
  return inst;
}

Instruction WithScalar(Instruction inst, double scalar, ScalarSide side) {
  inst.attrs.scalar = scalar;
  inst.attrs.scalar_side = side;
  return inst;
}

// a = %1, b = %2 (shape {n}); returns the body; every temporary is freed.
std::vector<Instruction> ArithmeticBody() {
  return {
      WithScalar(Make(Op::kMul, {1}, {3}), 1.5, ScalarSide::kRight),   // a*1.5
      Make(Op::kAdd, {3, 2}, {4}),                                      // + b
      Make(Op::kFree, {3}, {}),
      WithScalar(Make(Op::kSub, {4}, {5}), 8, ScalarSide::kLeft),       // 8 - c (no cancellation)
      Make(Op::kMul, {5, 2}, {6}),
      Make(Op::kFree, {4, 5}, {}),
      WithScalar(Make(Op::kDiv, {6}, {7}), 0.75, ScalarSide::kRight),  // x / 0.75
      Make(Op::kNeg, {7}, {8}),
      Make(Op::kFree, {6, 7}, {}),
  };
}

at::Tensor ArithmeticEager(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor c = a * 1.5 + b;
  at::Tensor x = (8 - c) * b;
  return -(x / 0.75);
}

std::vector<Instruction> MixedBody() {
  Instruction sum = Make(Op::kSum, {6}, {7});
  sum.attrs.axes = {1};
  Instruction transpose = Make(Op::kTranspose, {2}, {3});
  transpose.attrs.axes = {0, 1};
  return {
      transpose,                                                       // b^T
      Make(Op::kMatmul, {1, 3}, {4}),                                  // a @ b^T
      Make(Op::kTanh, {4}, {5}),
      WithScalar(Make(Op::kPow, {5}, {6}), 2, ScalarSide::kRight),
      sum,
      Make(Op::kFree, {3, 4, 5, 6}, {}),
  };
}

class UnitStrategyTest : public ::testing::Test {
 protected:
  // Defines `body` under key 7 on a backend with `trials` trial runs, runs it
  // `runs` times on (a, b) and checks each run's outputs against `want`.
  void RunChecked(int64_t trials, const std::vector<Instruction>& body, const at::Tensor& a, const at::Tensor& b,
                  const std::vector<at::Tensor>& want, int runs) {
    backend_ = std::make_unique<TorchBackend>(TorchBackendOptions{1, {}, 256, trials});
    Store(1, a);
    Store(2, b);
    UnitTemplate unit{2, body};
    Result<UnitInterface> interface = AnalyzeUnit(unit);
    ASSERT_TRUE(interface.ok()) << interface.status().message();
    ASSERT_EQ(interface->outputs.size(), want.size());
    Define(unit, 7);
    // At least `runs` runs, then on until the unit settled on a strategy: the
    // fuser compiles on a thread of its own meanwhile (up to seconds).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (int r = 0; r < runs || (!Settled() && std::chrono::steady_clock::now() < deadline); ++r) {
      if (r >= runs) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::vector<TensorId> results;
      for (size_t k = 0; k < want.size(); ++k) results.push_back(100 + k);
      Status s = Run(7, results);
      ASSERT_TRUE(s.ok()) << s.message();
      for (size_t k = 0; k < want.size(); ++k) {
        at::Tensor got = Fetch(results[k], want[k].scalar_type()).reshape(want[k].sizes());
        const bool same = at::isFloatingType(want[k].scalar_type()) ? at::allclose(got, want[k], 1e-6, 1e-30)
                                                                     : at::equal(got, want[k]);
        EXPECT_TRUE(same) << "run " << r << " output " << k;
      }
      ASSERT_TRUE(backend_->Execute(Make(Op::kFree, results, {}), sink_).ok());
    }
  }

  // Defines `unit` under `key`.
  void Define(const UnitTemplate& unit, uint64_t key) {
    Instruction define = Make(Op::kDefineUnit, {}, {});
    define.attrs.seed = key;
    define.payload = EncodeUnit(unit);
    ASSERT_TRUE(backend_->Execute(define, sink_).ok());
  }

  // Runs the unit under `key` on %1 and %2 into `results`.
  Status Run(uint64_t key, std::vector<TensorId> results) {
    Instruction run = Make(Op::kRunUnit, {1, 2}, std::move(results));
    run.attrs.seed = key;
    return backend_->Execute(run, sink_);
  }

  bool Settled() const {
    uint64_t chosen = 0;
    for (uint64_t c : backend_->Units().chosen) chosen += c;
    return chosen > 0;
  }

  void Store(TensorId id, const at::Tensor& t) {
    Instruction inst = Make(Op::kFromBytes, {}, {id});
    inst.attrs.shape = Shape(t.sizes().begin(), t.sizes().end());
    inst.attrs.dtype = DType::kFloat32;
    inst.payload = CopyToBlob(t.data_ptr(), t.nbytes());
    ASSERT_TRUE(backend_->Execute(inst, sink_).ok());
  }

  // The fetched bytes as a 1-D tensor of `type`.
  at::Tensor Fetch(TensorId id, at::ScalarType type = at::kFloat) {
    EXPECT_TRUE(backend_->Execute(Make(Op::kFetch, {id}, {}), sink_).ok());
    const int64_t count = static_cast<int64_t>(sink_.last->size() / c10::elementSize(type));
    at::Tensor out = at::empty({count}, at::TensorOptions().dtype(type));
    std::memcpy(out.data_ptr(), sink_.last->data(), sink_.last->size());
    return out;
  }

  std::unique_ptr<TorchBackend> backend_;
  KeepSink sink_;
};

TEST_F(UnitStrategyTest, ArithmeticChainMatchesEagerOnEveryStrategy) {
  at::Tensor a = at::rand({4096}) + 0.5, b = at::rand({4096}) + 0.5;
  RunChecked(2, ArithmeticBody(), a, b, {ArithmeticEager(a, b)}, 12);
  const UnitStats stats = backend_->Units();
  EXPECT_EQ(stats.defined, 1u);
  EXPECT_GE(stats.runs, 12u);  // more while the fuser compiled on its own thread
  uint64_t chosen = 0;
  for (uint64_t c : stats.chosen) chosen += c;
  EXPECT_EQ(chosen, 1u);
  // Every strategy was tried (three each: one warm-up, two timed).
  EXPECT_GT(stats.instructions_by[static_cast<size_t>(UnitStrategy::kGraph)], 0u);
  EXPECT_GT(stats.instructions_by[static_cast<size_t>(UnitStrategy::kFused)], 0u);
}

// The memory quota (max_client_mib) is checked before a unit runs, from its
// body's shapes; a body (or an eager op) whose shapes gt's rules cannot work
// out is refused unrun rather than let through unbounded.
TEST_F(UnitStrategyTest, TheMemoryQuotaRefusesWhatItCannotBound) {
  TorchBackendOptions options{1, {}, 256, 0};
  options.max_client_bytes = 1 << 20;
  backend_ = std::make_unique<TorchBackend>(options);
  Store(1, at::ones({2}));
  Instruction zeros = Make(Op::kZeros, {}, {2});
  zeros.attrs.shape = {4096, 4096};  // 64 MiB
  Instruction slice = Make(Op::kSlice, {1}, {3});
  slice.attrs.axes = {0, 0, 1000, 1};  // past the end: ATen would clamp, gt's shape rules refuse it
  auto run = [&](uint64_t key) {
    Instruction inst = Make(Op::kRunUnit, {1}, {100, 101});
    inst.attrs.seed = key;
    return backend_->Execute(inst, sink_);
  };
  Define(UnitTemplate{1, {zeros, Make(Op::kNeg, {1}, {3})}}, 8);
  Status bounded = run(8);
  EXPECT_EQ(bounded.code(), Code::kResourceExhausted) << bounded.message();
  Define(UnitTemplate{1, {zeros, slice}}, 9);
  Status unbounded = run(9);
  EXPECT_EQ(unbounded.code(), Code::kInvalidArgument) << unbounded.message();
  EXPECT_NE(unbounded.message().find("body instruction 1"), std::string::npos) << unbounded.message();
  // Eager: cat of a legacy (0,) tensor with a 2-D one (ATen skips the first; gt's rules refuse).
  Store(4, at::zeros({0}));
  Store(5, at::ones({256, 256}));
  Instruction cat = Make(Op::kCat, {4, 5, 5, 5, 5, 5}, {6});
  cat.attrs.axes = {0};
  EXPECT_EQ(backend_->Execute(cat, sink_).code(), Code::kInvalidArgument);
  EXPECT_EQ(backend_->Stats().live_tensors, 3u);  // %1, %4 and %5: nothing else was made
}

// A unit's input count comes from the wire and sizes a worker's tables: it
// may not exceed the operands its body uses (found by the codec fuzzer's
// review: ~820 million declared inputs).
TEST(UnitAnalysisTest, RefusesMoreInputsThanTheBodyUses) {
  Result<UnitInterface> huge = AnalyzeUnit(UnitTemplate{820'000'000, {Make(Op::kNeg, {1}, {820'000'001})}});
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("declares 820000000 inputs"), std::string::npos) << huge.status().message();
  EXPECT_TRUE(AnalyzeUnit(UnitTemplate{1, {Make(Op::kNeg, {1}, {2})}}).ok());
}

TEST_F(UnitStrategyTest, MixedUnitMatchesEager) {
  at::Tensor a = at::rand({8, 16}), b = at::rand({4, 16});
  at::Tensor want = at::sum(at::pow(at::tanh(at::matmul(a, b.transpose(0, 1))), 2), {1});
  RunChecked(2, MixedBody(), a, b, {want}, 10);
  const UnitStats stats = backend_->Units();
  // Not elementwise arithmetic: never fused; a graph exists for it.
  EXPECT_EQ(stats.instructions_by[static_cast<size_t>(UnitStrategy::kFused)], 0u);
  EXPECT_GT(stats.instructions_by[static_cast<size_t>(UnitStrategy::kGraph)], 0u);
}

TEST_F(UnitStrategyTest, ScalarOverTensorKeepsItsDtypeAndIsNotFused) {
  // 0.75 / a is a wrapped-number constant in the graph; float32 must stay float32.
  std::vector<Instruction> body = {WithScalar(Make(Op::kDiv, {1}, {3}), 0.75, ScalarSide::kLeft),
                                   Make(Op::kMul, {3, 2}, {4}), Make(Op::kFree, {3}, {})};
  at::Tensor a = at::rand({256}) + 0.5, b = at::rand({256});
  RunChecked(2, body, a, b, {(0.75 / a) * b}, 8);
  const UnitStats stats = backend_->Units();
  EXPECT_EQ(stats.instructions_by[static_cast<size_t>(UnitStrategy::kFused)], 0u);
  EXPECT_GT(stats.instructions_by[static_cast<size_t>(UnitStrategy::kGraph)], 0u);
}

TEST_F(UnitStrategyTest, ZeroTrialsAlwaysInterprets) {
  at::Tensor a = at::rand({64}) + 0.5, b = at::rand({64}) + 0.5;
  RunChecked(0, ArithmeticBody(), a, b, {ArithmeticEager(a, b)}, 3);
  const UnitStats stats = backend_->Units();
  EXPECT_EQ(stats.chosen[static_cast<size_t>(UnitStrategy::kInterpreted)], 1u);
  EXPECT_EQ(stats.instructions_by[static_cast<size_t>(UnitStrategy::kInterpreted)], 3 * ArithmeticBody().size());
}

TEST_F(UnitStrategyTest, UnitsWithoutGraphFormStayInterpreted) {
  // A comparison has no graph form (its mask dtype depends on the operands).
  std::vector<Instruction> body = {Make(Op::kGt, {1, 2}, {3}), Make(Op::kMul, {3, 1}, {4}), Make(Op::kFree, {3}, {})};
  at::Tensor a = at::rand({32}), b = at::rand({32});
  RunChecked(2, body, a, b, {at::gt(a, b).to(at::kFloat) * a}, 6);
  const UnitStats stats = backend_->Units();
  EXPECT_EQ(stats.chosen[static_cast<size_t>(UnitStrategy::kInterpreted)], 1u);
  EXPECT_EQ(UnitGraph::Build(UnitTemplate{2, body}, *AnalyzeUnit(UnitTemplate{2, body}), UnitStrategy::kGraph)
                .status()
                .code(),
            Code::kUnimplemented);
}

}  // namespace
// A loss-gradient-and-update step as autograd and an optimizer emit it:
// a = %1 (predictions, [4,3]), w = %2 (a parameter, [4,3], updated in place).
std::vector<Instruction> GradientStepBody() {
  Instruction ones_scalar = Make(Op::kOnes, {}, {3});
  Instruction reshape = Make(Op::kReshape, {3}, {4});
  reshape.attrs.shape = {1, 1};
  Instruction ones = Make(Op::kOnes, {}, {5});
  ones.attrs.shape = {4, 3};
  Instruction inner_t = Make(Op::kTranspose, {2}, {11});
  Instruction outer_t = Make(Op::kTranspose, {11}, {12});
  outer_t.attrs.axes = {-1, -2};
  return {
      ones_scalar, reshape, ones,
      Make(Op::kMul, {4, 5}, {6}),                                    // constant: the seed gradient
      WithScalar(Make(Op::kDiv, {6}, {7}), 12, ScalarSide::kRight),  // ... / numel
      Make(Op::kMul, {7, 1}, {8}),                                    // d(a*a) = g*a + g*a
      Make(Op::kMul, {7, 1}, {9}),
      Make(Op::kAdd, {8, 9}, {10}),
      inner_t, outer_t,                                               // (w^T)^T is w
      Make(Op::kAdd, {10, 12}, {13}),                                 // the output
      Make(Op::kNeg, {1}, {14}),                                      // dead: freed unused
      WithScalar(Make(Op::kMul, {13}, {15}), 0.1, ScalarSide::kRight),
      Make(Op::kSub, {2, 15}, {16}),
      Make(Op::kCopyInto, {2, 16}, {}),                               // w -= 0.1 * out
      Make(Op::kFree, {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16}, {}),
  };
}

size_t Kernels(const std::vector<Instruction>& body) {
  return std::count_if(body.begin(), body.end(), [](const Instruction& i) { return i.op != Op::kFree; });
}

TEST(UnitPlanTest, FoldsConstantsSharesRepeatsDropsTransposePairsAndDeadCode) {
  UnitTemplate unit{2, GradientStepBody()};
  Result<UnitInterface> interface = AnalyzeUnit(unit);
  ASSERT_TRUE(interface.ok()) << interface.status().message();
  UnitPlan plan = PlanUnit(unit, *interface);
  // ones, reshape, ones, mul, div: the prologue; kept under their placeholders.
  ASSERT_EQ(plan.prologue.size(), 5u);
  EXPECT_EQ(plan.constants, (std::vector<TensorId>{3, 4, 5, 6, 7}));
  // Left: mul, add (g*a + g*a), add (+ w), and w -= 0.1 * out as one fused
  // kernel (mul, sub, copy_into in the template).
  EXPECT_EQ(Kernels(plan.body), 4u);
  EXPECT_EQ(plan.kernels_saved, Kernels(unit.body) - 4u);
  ASSERT_EQ(plan.fusions.size(), plan.body.size());
  size_t fused = 0;
  for (size_t i = 0; i < plan.body.size(); ++i) {
    if (plan.fusions[i] == Fusion::kNone) continue;
    ++fused;
    EXPECT_EQ(plan.fusions[i], Fusion::kScaledSubtractInto);
    EXPECT_EQ(plan.body[i].op, Op::kCopyInto);
    EXPECT_EQ(plan.body[i].operands, (std::vector<TensorId>{2, 13}));
    EXPECT_EQ(plan.body[i].attrs.scalar, 0.1);
  }
  EXPECT_EQ(fused, 1u);
  // The replayed body is still a valid unit body once constants are inputs:
  // nothing is used after it is freed and the output is never freed.
  std::set<TensorId> freed;
  for (const Instruction& inst : plan.body) {
    for (TensorId id : inst.operands) EXPECT_FALSE(freed.count(id)) << "%" << id << " used after its free";
    if (inst.op == Op::kFree) freed.insert(inst.operands.begin(), inst.operands.end());
  }
  EXPECT_FALSE(freed.count(13));
  for (TensorId c : plan.constants) EXPECT_FALSE(freed.count(c));
}

TEST(UnitPlanTest, LeavesUnitsThatMutateTheirOwnTensorsAsTheyAre) {
  Instruction fill = Make(Op::kFill, {2}, {});
  fill.attrs.scalar = 2;
  std::vector<Instruction> body = {Make(Op::kOnes, {}, {2}), fill, Make(Op::kMul, {2, 1}, {3}), Make(Op::kMul, {2, 1}, {4}),
                                   Make(Op::kFree, {2}, {})};
  body[0].attrs.shape = {4};
  UnitTemplate unit{1, body};
  Result<UnitInterface> interface = AnalyzeUnit(unit);
  ASSERT_TRUE(interface.ok()) << interface.status().message();
  UnitPlan plan = PlanUnit(unit, *interface);
  EXPECT_TRUE(plan.prologue.empty());
  EXPECT_EQ(plan.body.size(), body.size());
  EXPECT_EQ(plan.kernels_saved, 0u);
}

TEST_F(UnitStrategyTest, PlannedStepMatchesEagerAcrossReplays) {
  backend_ = std::make_unique<TorchBackend>(TorchBackendOptions{1, {}, 256, 0});  // interpreter only
  at::Tensor a = at::rand({4, 3}), w = at::rand({4, 3});
  Store(1, a);
  Store(2, w);
  Define(UnitTemplate{2, GradientStepBody()}, 9);
  at::Tensor w_eager = w.clone();
  for (int r = 0; r < 5; ++r) {
    // Eager ATen, op for op as the template says.
    at::Tensor g = at::ones({}).reshape({1, 1}) * at::ones({4, 3}) / 12;
    at::Tensor out = (g * a + g * a) + w_eager.transpose(-2, -1).transpose(-1, -2);
    w_eager.copy_(w_eager - out * 0.1);
    Status s = Run(9, {100});
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(at::allclose(Fetch(100).reshape({4, 3}), out, 1e-6, 1e-30)) << "run " << r;
    EXPECT_TRUE(at::allclose(Fetch(2).reshape({4, 3}), w_eager, 1e-6, 1e-30)) << "run " << r;
    ASSERT_TRUE(backend_->Execute(Make(Op::kFree, {100}, {}), sink_).ok());
  }
}

// relu forward and backward as autograd emits them: x = %1, g = %2 (the
// incoming gradient). The mask gt(x, 0) feeds one mul: fused into relu's
// gradient. A second mask that is also an output stays as it is.
std::vector<Instruction> ReluGradientBody() {
  return {
      Make(Op::kRelu, {1}, {3}),                                      // output
      WithScalar(Make(Op::kGt, {1}, {4}), 0, ScalarSide::kRight),
      Make(Op::kMul, {4, 2}, {5}),                                    // output: mask * g
      WithScalar(Make(Op::kGt, {1}, {6}), 0, ScalarSide::kRight),     // output too: not fused
      Make(Op::kMul, {2, 6}, {7}),                                    // output
      Make(Op::kFree, {4}, {}),
  };
}

TEST(UnitPlanTest, FusesReluGradientOnlyWhereTheMaskHasNoOtherUse) {
  UnitTemplate unit{2, ReluGradientBody()};
  Result<UnitInterface> interface = AnalyzeUnit(unit);
  ASSERT_TRUE(interface.ok()) << interface.status().message();
  UnitPlan plan = PlanUnit(unit, *interface);
  ASSERT_EQ(plan.fusions.size(), plan.body.size());
  std::vector<Op> ops;
  for (size_t i = 0; i < plan.body.size(); ++i) {
    if (plan.body[i].op == Op::kFree) continue;
    ops.push_back(plan.body[i].op);
    if (plan.fusions[i] == Fusion::kReluGradient) {
      EXPECT_EQ(plan.body[i].operands, (std::vector<TensorId>{2, 1}));  // {g, x}
      EXPECT_EQ(plan.body[i].results, (std::vector<TensorId>{5}));
    }
  }
  EXPECT_EQ(ops, (std::vector<Op>{Op::kRelu, Op::kMul, Op::kGt, Op::kMul}));
  EXPECT_EQ(std::count(plan.fusions.begin(), plan.fusions.end(), Fusion::kReluGradient), 1);
}

TEST_F(UnitStrategyTest, FusedReluGradientMatchesEager) {
  at::Tensor x = at::randn({64, 32}), g = at::randn({64, 32});
  at::Tensor mask = x > 0;  // a bool mask, as gt's comparisons give
  RunChecked(0, ReluGradientBody(), x, g, {at::relu(x), mask * g, mask, g * mask}, 3);
}

// Value for value, bit for bit, what g * gt(x, 0) gives: -0.0 where g < 0 and
// x <= 0, NaN where g is infinite or NaN and x <= 0, 0 where x is NaN.
TEST_F(UnitStrategyTest, FusedReluGradientKeepsThePatternsSignsAndNaNs) {
  backend_ = std::make_unique<TorchBackend>(TorchBackendOptions{1, {}, 256, 0});
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  at::Tensor x = at::tensor({-1.f, 0.f, -0.f, 2.f, nan, -3.f, -3.f, 5.f});
  at::Tensor g = at::tensor({-2.f, -1.f, 4.f, -6.f, 7.f, inf, nan, nan});
  Store(1, x);
  Store(2, g);
  UnitTemplate unit{2, {WithScalar(Make(Op::kGt, {1}, {3}), 0, ScalarSide::kRight), Make(Op::kMul, {2, 3}, {4}),
                        Make(Op::kFree, {3}, {})}};
  Define(unit, 13);
  ASSERT_TRUE(Run(13, {100}).ok());
  at::Tensor want = g * (x > 0);
  EXPECT_TRUE(at::equal(Fetch(100).view(at::kInt), want.view(at::kInt))) << Fetch(100) << want;
}

// An update whose gradient broadcasts over the parameter ([3] into [4, 3]):
// the fused kernel's preconditions fail and the pattern runs op by op.
TEST_F(UnitStrategyTest, FusedUpdateFallsBackWhenShapesDiffer) {
  backend_ = std::make_unique<TorchBackend>(TorchBackendOptions{1, {}, 256, 0});
  at::Tensor w = at::rand({4, 3}), g = at::rand({3});
  Store(1, w);
  Store(2, g);
  UnitTemplate unit{2, {WithScalar(Make(Op::kMul, {2}, {3}), 0.5, ScalarSide::kRight), Make(Op::kSub, {1, 3}, {4}),
                        Make(Op::kCopyInto, {1, 4}, {}), Make(Op::kFree, {3, 4}, {})}};
  Result<UnitInterface> interface = AnalyzeUnit(unit);
  ASSERT_TRUE(interface.ok()) << interface.status().message();
  UnitPlan plan = PlanUnit(unit, *interface);
  EXPECT_EQ(std::count(plan.fusions.begin(), plan.fusions.end(), Fusion::kScaledSubtractInto), 1);
  Define(unit, 11);
  at::Tensor w_eager = w.clone();
  for (int r = 0; r < 3; ++r) {
    w_eager.copy_(w_eager - g * 0.5);
    Status s = Run(11, {});
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(at::allclose(Fetch(1).reshape({4, 3}), w_eager, 1e-6, 1e-30)) << "run " << r;
  }
}

// The fused kernels themselves (vectorized), on lengths that are no multiple
// of a vector's width, special values in the first lanes, and an update of a
// tensor by itself: bit for bit the ops they stand for.
TEST(FusedKernelsTest, MatchTheirPatternsBitForBit) {
  auto bits = [](const at::Tensor& t) { return t.view(t.scalar_type() == at::kFloat ? at::kInt : at::kLong); };
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (at::ScalarType type : {at::kFloat, at::kDouble}) {
    for (int64_t n : {1, 7, 1027}) {
      at::Tensor p = at::randn({n}, at::TensorOptions(type)) * 1e3, g = at::randn({n}, at::TensorOptions(type));
      at::Tensor x = at::randn({n}, at::TensorOptions(type));
      const std::vector<double> specials = {inf, -inf, nan, -0.0, 1e-310};
      for (size_t k = 0; k < specials.size() && static_cast<int64_t>(k) < n; ++k) {
        g[k] = specials[k];
        x[k] = specials[specials.size() - 1 - k];
      }
      const double s = 0.01;
      at::Tensor q = p.clone();
      ASSERT_TRUE(ScaledSubtractInto(q, g, s));
      EXPECT_TRUE(at::equal(bits(q), bits(p - g * s))) << "n " << n;
      at::Tensor self = g.clone();
      ASSERT_TRUE(ScaledSubtractInto(self, self, s));
      EXPECT_TRUE(at::equal(bits(self), bits(g - g * s))) << "n " << n;
      at::Tensor product = ReluGradient(g, x);
      ASSERT_TRUE(product.defined());
      EXPECT_TRUE(at::equal(bits(product), bits(g * (x > 0).to(type)))) << "n " << n;
    }
  }
}

}  // namespace gt::torch_backend
