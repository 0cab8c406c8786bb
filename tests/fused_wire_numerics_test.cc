// The fused ops' numerics from a raw-wire client on four worker processes
// with the sharding stage (fused_wire_fixture.h), their operands whole, cut
// by rows or columns, replicated or on a grid: sum_of_squares and mul_into,
// add_into, cross_entropy and mse_loss (forward and backward) against the
// values computed here; after each, another client still works. Part of
// fused_wire_test (which instantiates the placements).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cluster.h"
#include "gt/instruction.h"
#include "gt/op.h"
#include "gt/op_attrs.h"
#include "fused_wire_fixture.h"

namespace gt::testing {
namespace {
using namespace fused_wire_test;

// clip_grad_norm_'s ops: sum_of_squares (many operands, one number) and
// mul_into (a mutation of its first operand), from a client that lies, and
// their values where the operands are whole, cut or copied.
TEST_P(FusedWireTest, SumOfSquaresAndMulInto) {
  auto mutation = [&](Op op, std::vector<TensorId> operands) {
    Instruction inst = MakeInstruction(op, seq_++, {}, std::move(operands));
    inst.signal = Signal();
    return inst;
  };
  ExpectRefused("sum_of_squares 0 operands", {}, Op_(Op::kSumOfSquares, Id(), {}), "at least one operand");
  TensorId a = Id();
  ExpectRefused("sum_of_squares int64", {I64(a, {8, 4})}, Op_(Op::kSumOfSquares, Id(), {a}), "floating-point");
  TensorId b = Id(), c = Id();
  ExpectRefused("sum_of_squares mixed dtypes", {F32(b, {8, 4}), F64(c, {8, 4})}, Op_(Op::kSumOfSquares, Id(), {b, c}),
                "one dtype");
  TensorId axed = Id();
  ExpectRefused("sum_of_squares with axes", {F32(axed, {8, 4})}, Op_(Op::kSumOfSquares, Id(), {axed}, {0}), "no axes");
  TensorId d = Id();
  ExpectRefused("sum_of_squares unknown operand", {F32(d, {8, 4})}, Op_(Op::kSumOfSquares, Id(), {d, 9997}));
  TensorId e = Id();
  ExpectRefused("mul_into 1 operand", {F32(e, {8, 4})}, mutation(Op::kMulInto, {e}), "expected 2 operand");
  TensorId f = Id();
  ExpectRefused("mul_into 3 operands", {F32(f, {8, 4})}, mutation(Op::kMulInto, {f, f, f}), "expected 2 operand");
  TensorId g = Id(), h = Id();
  ExpectRefused("mul_into factor that does not broadcast", {F32(g, {8, 4}), F32(h, {3})}, mutation(Op::kMulInto, {g, h}));
  TensorId i = Id(), j = Id();
  ExpectRefused("mul_into int64 by float32", {I64(i, {8, 4}), F32(j, {4})}, mutation(Op::kMulInto, {i, j}));
  TensorId k = Id();
  ExpectRefused("mul_into unknown factor", {F32(k, {8, 4})}, mutation(Op::kMulInto, {k, 9996}));
  Instruction with_result = mutation(Op::kMulInto, {k, k});
  with_result.results = {Id()};
  ExpectRefused("mul_into with a result", {}, with_result);

  // Values: sin(1 + i) in every tensor (F32).
  auto sines = [](size_t n) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(1.0 + i));
    return v;
  };
  TensorId x = Id(), y = Id(), empty = Id(), total = Id();
  EXPECT_TRUE(Run({F32(x, {8, 4}), F32(y, {1, 4}), F32(empty, {0, 4}), Op_(Op::kSumOfSquares, total, {x, y, empty})}).empty());
  double want = 0;
  for (double v : sines(32)) want += v * v;
  for (double v : sines(4)) want += v * v;
  std::vector<std::string> errors;
  auto got = Fetch(total, &errors);
  EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->first.shape_size(), 0);
  ASSERT_EQ(got->second.size(), 4u);
  float sum = 0;
  std::memcpy(&sum, got->second.data(), 4);
  EXPECT_NEAR(sum, want, 1e-4 * want);

  // One tensor named 4000 times: each worker squares its own piece of it, 4000
  // times over, in one instruction (a gather per operand took minutes and
  // stalled every other client).
  const TensorId repeated = Id();
  EXPECT_TRUE(Run({Op_(Op::kSumOfSquares, repeated, std::vector<TensorId>(4000, x))}).empty());
  got = Fetch(repeated, &errors);
  EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->second.size(), 4u);
  std::memcpy(&sum, got->second.data(), 4);
  double once = 0;
  for (double v : sines(32)) once += v * v;
  EXPECT_NEAR(sum, 4000 * once, 1e-4 * 4000 * once);
  OtherClientWorks();

  EXPECT_TRUE(Run({mutation(Op::kMulInto, {x, y})}).empty());
  got = Fetch(x, &errors);
  EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->second.size(), 32u * 4u);
  std::vector<float> product(32);
  std::memcpy(product.data(), got->second.data(), got->second.size());
  const std::vector<double> xs = sines(32), ys = sines(4);
  for (size_t n = 0; n < 32; ++n) EXPECT_NEAR(product[n], xs[n] * ys[n % 4], 1e-6) << n;
  OtherClientWorks();
}

// add_into (SGD's update, `+=`): destination += alpha * addend in place, from
// a client that lies, and its values where the operands are whole, cut or
// copied.
TEST_P(FusedWireTest, AddInto) {
  auto add_into = [&](std::vector<TensorId> operands, double alpha) {
    Instruction inst = MakeInstruction(Op::kAddInto, seq_++, {}, std::move(operands));
    inst.attrs.scalar = alpha;
    inst.signal = Signal();
    return inst;
  };
  TensorId a = Id();
  ExpectRefused("add_into 1 operand", {F32(a, {8, 4})}, add_into({a}, 1), "expected 2 operand");
  TensorId b = Id();
  ExpectRefused("add_into 3 operands", {F32(b, {8, 4})}, add_into({b, b, b}, 1), "expected 2 operand");
  TensorId c = Id(), d = Id();
  ExpectRefused("add_into addend that does not broadcast", {F32(c, {8, 4}), F32(d, {3})}, add_into({c, d}, 1));
  TensorId e = Id(), f = Id();
  ExpectRefused("add_into int64 plus float32", {I64(e, {8, 4}), F32(f, {4})}, add_into({e, f}, 1));
  TensorId g = Id();
  ExpectRefused("add_into unknown addend", {F32(g, {8, 4})}, add_into({g, 9995}, 1));
  TensorId p = Id(), q = Id();
  ExpectRefused("add_into bool minus bool", {B8(p, {8, 4}), B8(q, {8, 4})}, add_into({p, q}, -1), "bool");
  Instruction with_result = add_into({g, g}, 1);
  with_result.results = {Id()};
  ExpectRefused("add_into with a result", {}, with_result);

  // Values: sin(1 + i) in both tensors (F32); x += -0.5 * y, y broadcast.
  TensorId x = Id(), y = Id();
  EXPECT_TRUE(Run({F32(x, {8, 4}), F32(y, {1, 4}), add_into({x, y}, -0.5)}).empty());
  const std::vector<float> sum = FetchF32(x, 32);
  ASSERT_EQ(sum.size(), 32u);
  for (size_t n = 0; n < 32; ++n) {
    const double xn = static_cast<float>(std::sin(1.0 + n)), yn = static_cast<float>(std::sin(1.0 + n % 4));
    EXPECT_NEAR(sum[n], xn - 0.5 * yn, 1e-6) << n;
  }
  OtherClientWorks();
}

// cross_entropy and its backward from a client that lies, and their values
// (against the formula in double) where the logits are whole, cut or copied:
// the sharding stage assembles them on one worker.
TEST_P(FusedWireTest, CrossEntropy) {
  // Targets whole, outside the signal (a 1-d tensor has no axis 1 to cut).
  auto classes = [&](TensorId id, std::vector<int64_t> values, DType dtype = DType::kInt64) {
    std::vector<int32_t> narrow(values.begin(), values.end());
    Instruction inst = dtype == DType::kInt64
                           ? Bytes(id, dtype, {static_cast<int64_t>(values.size())}, values.data(), values.size() * 8)
                           : Bytes(id, dtype, {static_cast<int64_t>(values.size())}, narrow.data(), narrow.size() * 4);
    inst.signal.clear();
    return inst;
  };
  auto loss = [&](TensorId result, std::vector<TensorId> operands, double ignore_index = -100) {
    return Op_(Op::kCrossEntropy, result, std::move(operands), {}, ignore_index);
  };
  const std::vector<int64_t> targets = {0, 1, 2, 3, -100, 3, 2, 1};
  TensorId a = Id(), b = Id();
  Instruction float_targets = F32(b, {8});
  float_targets.signal.clear();
  ExpectRefused("cross_entropy float targets", {F32(a, {8, 4}), float_targets}, loss(Id(), {a, b}), "int32/int64 class targets");
  TensorId c = Id(), d = Id();
  Instruction flat_logits = F32(c, {8});
  flat_logits.signal.clear();
  ExpectRefused("cross_entropy 1-d logits", {flat_logits, classes(d, targets)}, loss(Id(), {c, d}), "floating-point logits");
  TensorId e = Id(), f = Id();
  ExpectRefused("cross_entropy int logits", {I64(e, {8, 4}), classes(f, targets)}, loss(Id(), {e, f}), "floating-point logits");
  TensorId g = Id(), h = Id();
  ExpectRefused("cross_entropy rows differ", {F32(g, {6, 4}), classes(h, targets)}, loss(Id(), {g, h}), "class targets");
  TensorId i = Id(), j = Id();
  ExpectRefused("cross_entropy fractional ignore_index", {F32(i, {8, 4}), classes(j, targets)}, loss(Id(), {i, j}, 0.5),
                "ignore_index must be an integer");
  TensorId k = Id();
  ExpectRefused("cross_entropy 1 operand", {F32(k, {8, 4})}, loss(Id(), {k}));
  TensorId l = Id(), m = Id(), n = Id();
  Instruction flat_grad = F32(l, {1});
  flat_grad.signal.clear();
  ExpectRefused("cross_entropy_backward 1-d grad", {flat_grad, F32(m, {8, 4}), classes(n, targets)},
                Op_(Op::kCrossEntropyBackward, Id(), {l, m, n}, {}, -100), "0-d gradient");
  TensorId o = Id(), p = Id();
  ExpectRefused("cross_entropy target out of range", {F32(o, {8, 4}), classes(p, {0, 1, 2, 3, 4, 3, 2, 1})},
                loss(Id(), {o, p}), "out of bounds");
  OtherClientWorks();

  // The same from a client with no signal config, whose stream no stage
  // infers: the worker checks ignore_index itself (a fractional one used to
  // ignore row 0, a NaN to be cast, undefined).
  for (double bad : {0.5, std::nan(""), 1e300}) {
    SCOPED_TRACE("ignore_index " + std::to_string(bad));
    RawClient plain(context_, cluster_->endpoint());
    Instruction logits = F32(1, {8, 4}), picked = classes(2, targets);
    logits.signal.clear();
    Instruction fused = MakeInstruction(Op::kCrossEntropy, 3, {3}, {1, 2});
    fused.attrs.scalar = bad;
    logits.seq = 1;
    picked.seq = 2;
    plain.Send({logits, picked, fused});
    auto done = plain.Sync(nullptr, kPromptMs);
    ASSERT_TRUE(done.has_value());
    ASSERT_EQ(done->errors_size(), 1) << done->DebugString();
    EXPECT_NE(done->errors(0).message().find("ignore_index must be an integer"), std::string::npos)
        << done->DebugString();
  }
  OtherClientWorks();

  // Values: logits sin(1 + i) (F32, 8 x 4), row 4 ignored; int32 targets too.
  TensorId x = Id(), t = Id(), t32 = Id(), y = Id(), y32 = Id(), seed = Id(), dx = Id();
  const float two = 2;
  Instruction seed_grad = Bytes(seed, DType::kFloat32, {}, &two, 4);
  seed_grad.signal.clear();
  EXPECT_TRUE(Run({F32(x, {8, 4}), classes(t, targets), classes(t32, targets, DType::kInt32), loss(y, {x, t}),
                   loss(y32, {x, t32}), seed_grad,
                   Op_(Op::kCrossEntropyBackward, dx, {seed, x, t}, {}, -100)})
                  .empty());
  double want = 0;
  std::vector<double> want_grad(32, 0.0);
  for (int r = 0; r < 8; ++r) {
    if (targets[r] == -100) continue;
    double z[4], total = 0;
    for (int col = 0; col < 4; ++col) total += std::exp(z[col] = static_cast<float>(std::sin(1.0 + r * 4 + col)));
    want -= z[targets[r]] - std::log(total);
    for (int col = 0; col < 4; ++col) want_grad[r * 4 + col] = 2 * (std::exp(z[col]) / total - (col == targets[r])) / 7;
  }
  want /= 7;
  for (TensorId id : {y, y32}) {
    const std::vector<float> value = FetchF32(id, 1);
    ASSERT_EQ(value.size(), 1u);
    EXPECT_NEAR(value[0], want, 1e-5);
  }
  const std::vector<float> grad = FetchF32(dx, 32);
  ASSERT_EQ(grad.size(), 32u);
  for (size_t q = 0; q < 32; ++q) EXPECT_NEAR(grad[q], want_grad[q], 1e-6) << q;
  OtherClientWorks();
}

// mse_loss and its backward from a client that lies, and their values where
// the operands are whole, cut or copied (assembled on one worker).
TEST_P(FusedWireTest, MseLoss) {
  TensorId a = Id(), b = Id();
  ExpectRefused("mse_loss shapes", {F32(a, {8, 4}), F32(b, {8, 2})}, Op_(Op::kMseLoss, Id(), {a, b}), "one shape");
  TensorId c = Id(), d = Id();
  ExpectRefused("mse_loss dtypes", {F32(c, {8, 4}), F64(d, {8, 4})}, Op_(Op::kMseLoss, Id(), {c, d}), "floating dtype");
  TensorId e = Id(), f = Id();
  ExpectRefused("mse_loss int", {I64(e, {8, 4}), I64(f, {8, 4})}, Op_(Op::kMseLoss, Id(), {e, f}), "floating dtype");
  TensorId g = Id();
  ExpectRefused("mse_loss 1 operand", {F32(g, {8, 4})}, Op_(Op::kMseLoss, Id(), {g}));
  TensorId h = Id(), i = Id(), j = Id();
  ExpectRefused("mse_loss_backward 2-d grad", {F32(h, {8, 4}), F32(i, {8, 4}), F32(j, {8, 4})},
                Op_(Op::kMseLossBackward, Id(), {h, i, j}), "0-d gradient");
  OtherClientWorks();

  // Values: x = sin(1 + i) and t = x * 0.5 (a mul, placed like x), so
  // (x - t)^2 = (x/2)^2; for a 0-d gradient of 2 the input's is 2 * 2 * (x/2) / 32.
  TensorId x = Id(), t = Id(), loss = Id(), seed = Id(), dx = Id();
  Instruction half = MakeInstruction(Op::kMul, seq_++, {t}, {x});
  half.attrs.scalar = 0.5;
  half.attrs.scalar_side = ScalarSide::kRight;
  half.signal = Signal();
  const float two = 2;
  Instruction seed_grad = Bytes(seed, DType::kFloat32, {}, &two, 4);
  seed_grad.signal.clear();
  EXPECT_TRUE(Run({F32(x, {8, 4}), half, Op_(Op::kMseLoss, loss, {x, t}), seed_grad,
                   Op_(Op::kMseLossBackward, dx, {seed, x, t})})
                  .empty());
  double want = 0;
  for (int q = 0; q < 32; ++q) want += std::pow(static_cast<float>(std::sin(1.0 + q)) / 2, 2) / 32;
  const std::vector<float> value = FetchF32(loss, 1);
  ASSERT_EQ(value.size(), 1u);
  EXPECT_NEAR(value[0], want, 1e-6);
  const std::vector<float> grad = FetchF32(dx, 32);
  ASSERT_EQ(grad.size(), 32u);
  for (int q = 0; q < 32; ++q) EXPECT_NEAR(grad[q], 2.0 * 2 * (static_cast<float>(std::sin(1.0 + q)) / 2) / 32, 1e-6) << q;
  OtherClientWorks();
}

}  // namespace
}  // namespace gt::testing
