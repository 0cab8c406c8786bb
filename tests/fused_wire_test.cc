// The fused ops (gelu, gelu_backward, layer_norm, layer_norm_backward,
// sum_of_squares, mul_into) from
// a raw-wire client that lies, on four worker processes with the sharding
// stage, their operands whole, cut by rows, cut by columns or replicated:
// every hostile instruction gets a clear error at the next sync, no host
// dies, the session and another client go on; allowed odd inputs (integers,
// bools, empty tensors, empty pieces, eps = inf) compute with the dtype and
// shape the dispatcher inferred.
// Here the refusals; the numerics of sum_of_squares, mul_into, add_into,
// cross_entropy and mse_loss are in fused_wire_numerics_test.cc, the fixture
// in fused_wire_fixture.h. Both make the suite fused_wire_test.
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

TEST_P(FusedWireTest, WrongArity) {
  TensorId a = Id(), b = Id();
  ExpectRefused("gelu 0 operands", {}, Op_(Op::kGelu, Id(), {}));
  ExpectRefused("gelu 2 operands", {F32(a, {8, 4}), F32(b, {8, 4})}, Op_(Op::kGelu, Id(), {a, b}));
  TensorId d = Id();
  ExpectRefused("gelu_backward 1 operand", {F32(d, {8, 4})}, Op_(Op::kGeluBackward, Id(), {d}));
  TensorId e = Id();
  Instruction scalar_form = Op_(Op::kGeluBackward, Id(), {e});
  scalar_form.attrs.scalar_side = ScalarSide::kRight;
  scalar_form.attrs.scalar = 2;
  ExpectRefused("gelu_backward scalar form", {F32(e, {8, 4})}, scalar_form);
  TensorId f = Id(), g = Id();
  ExpectRefused("gelu_backward 3 operands", {F32(f, {8, 4}), F32(g, {8, 4})}, Op_(Op::kGeluBackward, Id(), {f, g, f}));
  TensorId r = Id();
  ExpectRefused("relu_backward 1 operand", {F32(r, {8, 4})}, Op_(Op::kReluBackward, Id(), {r}));
  TensorId h = Id();
  Instruction lnb = Op_(Op::kLayerNormBackward, Id(), {h}, {1});
  lnb.attrs.scalar_side = ScalarSide::kLeft;
  ExpectRefused("layer_norm_backward 1 operand scalar-left", {F32(h, {8, 4})}, lnb);
  ExpectRefused("layer_norm 0 operands", {}, Op_(Op::kLayerNorm, Id(), {}, {1}));
  ExpectRefused("gelu unknown operand", {}, Op_(Op::kGelu, Id(), {9999}));
  TensorId k = Id();
  ExpectRefused("layer_norm_backward unknown x", {F32(k, {8, 4})}, Op_(Op::kLayerNormBackward, Id(), {k, 9998}, {1}));
  OtherClientWorks();
}

TEST_P(FusedWireTest, BadAxes) {
  const int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  std::vector<std::pair<std::string, std::vector<int64_t>>> cases = {
      {"{}", {}}, {"{0}", {0}}, {"{-1}", {-1}}, {"{rank+1}", {3}}, {"{max}", {kMax}}, {"{min}", {kMin}},
      {"{1,1}", {1, 1}}, {"{min+1}", {kMin + 1}}};
  for (const auto& [name, axes] : cases) {
    TensorId x = Id();
    ExpectRefused("layer_norm axes " + name, {F32(x, {8, 4})}, Op_(Op::kLayerNorm, Id(), {x}, axes));
    TensorId gx = Id(), gg = Id();
    ExpectRefused("layer_norm_backward axes " + name, {F32(gx, {8, 4}), F32(gg, {8, 4})},
                  Op_(Op::kLayerNormBackward, Id(), {gg, gx}, axes));
  }
  OtherClientWorks();
}

TEST_P(FusedWireTest, BadEps) {
  for (double eps : {std::nan(""), -1.0, -std::numeric_limits<double>::infinity(), -0.0 * 0 - 1e-300}) {
    TensorId x = Id();
    ExpectRefused("layer_norm eps " + std::to_string(eps), {F32(x, {8, 4})}, Op_(Op::kLayerNorm, Id(), {x}, {1}, eps));
    TensorId gx = Id(), gg = Id();
    ExpectRefused("layer_norm_backward eps " + std::to_string(eps), {F32(gx, {8, 4}), F32(gg, {8, 4})},
                  Op_(Op::kLayerNormBackward, Id(), {gg, gx}, {1}, eps));
  }
  // eps = +inf is allowed: every value is 0.
  TensorId x = Id(), y = Id();
  EXPECT_TRUE(Run({F32(x, {8, 4}), Op_(Op::kLayerNorm, y, {x}, {1}, INFINITY)}).empty());
  std::vector<std::string> fetch_errors;
  auto got = Fetch(y, &fetch_errors);
  EXPECT_TRUE(fetch_errors.empty()) << ::testing::PrintToString(fetch_errors);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->second.size(), 8u * 4u * 4u);
  std::vector<float> v(got->second.size() / 4);
  std::memcpy(v.data(), got->second.data(), got->second.size());
  for (float f : v) EXPECT_EQ(f, 0.0f);
  OtherClientWorks();
}

TEST_P(FusedWireTest, MismatchedGradAndX) {
  TensorId a = Id(), b = Id();
  ExpectRefused("gelu_backward shapes", {F32(a, {8, 4}), F32(b, {8, 2})}, Op_(Op::kGeluBackward, Id(), {a, b}));
  TensorId c = Id(), d = Id();
  ExpectRefused("gelu_backward broadcast", {F32(c, {8, 4}), F32(d, {1, 4})}, Op_(Op::kGeluBackward, Id(), {d, c}));
  TensorId e = Id(), f = Id();
  ExpectRefused("gelu_backward dtypes", {F32(e, {8, 4}), F64(f, {8, 4})}, Op_(Op::kGeluBackward, Id(), {e, f}));
  TensorId g = Id(), h = Id();
  ExpectRefused("gelu_backward int", {I64(g, {8, 4}), I64(h, {8, 4})}, Op_(Op::kGeluBackward, Id(), {g, h}));
  TensorId r = Id(), s = Id();
  ExpectRefused("relu_backward shapes", {F32(r, {8, 4}), F32(s, {8, 2})}, Op_(Op::kReluBackward, Id(), {r, s}));
  TensorId t = Id(), u = Id();
  ExpectRefused("relu_backward int", {I64(t, {8, 4}), I64(u, {8, 4})}, Op_(Op::kReluBackward, Id(), {t, u}));
  TensorId i = Id(), j = Id();
  ExpectRefused("layer_norm_backward shapes", {F32(i, {8, 4}), F32(j, {4, 8})},
                Op_(Op::kLayerNormBackward, Id(), {i, j}, {1}));
  TensorId k = Id(), l = Id();
  ExpectRefused("layer_norm_backward dtypes", {F64(k, {8, 4}), F32(l, {8, 4})},
                Op_(Op::kLayerNormBackward, Id(), {k, l}, {1}));
  TensorId m = Id(), n = Id();
  ExpectRefused("layer_norm_backward bool", {B8(m, {8, 4}), B8(n, {8, 4})},
                Op_(Op::kLayerNormBackward, Id(), {m, n}, {2}));
  TensorId o = Id();
  ExpectRefused("layer_norm rank-1 axes 2", {F32(o, {8})}, Op_(Op::kLayerNorm, Id(), {o}, {2}));
  OtherClientWorks();
}

// Allowed inputs that must compute (or fail clearly) with the dtype and shape the dispatcher inferred.
TEST_P(FusedWireTest, IntAndEmptyInputs) {
  struct Case {
    std::string name;
    std::vector<Instruction> setup;
    Instruction op;
    DType want_dtype;
    Shape want_shape;
  };
  std::vector<Case> cases;
  auto add = [&](std::string name, Instruction make, Op op, std::vector<int64_t> axes, DType dt, Shape s) {
    TensorId x = make.results[0];
    TensorId y = Id();
    cases.push_back({name, {make}, Op_(op, y, {x}, axes), dt, s});
  };
  add("gelu int64", I64(Id(), {8, 4}), Op::kGelu, {}, DType::kFloat32, {8, 4});
  add("gelu bool", B8(Id(), {8, 4}), Op::kGelu, {}, DType::kFloat32, {8, 4});
  add("layer_norm int64", I64(Id(), {8, 4}), Op::kLayerNorm, {1}, DType::kFloat32, {8, 4});
  add("layer_norm bool", B8(Id(), {8, 4}), Op::kLayerNorm, {2}, DType::kFloat32, {8, 4});
  add("gelu f64", F64(Id(), {8, 4}), Op::kGelu, {}, DType::kFloat64, {8, 4});
  add("layer_norm f64 2 dims", F64(Id(), {8, 4}), Op::kLayerNorm, {2}, DType::kFloat64, {8, 4});
  add("gelu empty", F32(Id(), {0, 4}), Op::kGelu, {}, DType::kFloat32, {0, 4});
  add("layer_norm empty rows", F32(Id(), {0, 4}), Op::kLayerNorm, {1}, DType::kFloat32, {0, 4});
  // Empty pieces: Gloo's all-gather of zero elements divided by zero and killed every worker.
  add("layer_norm empty normalized", F32(Id(), {8, 0}), Op::kLayerNorm, {1}, DType::kFloat32, {8, 0});
  add("layer_norm 2 rows over 4 workers", F32(Id(), {2, 4}), Op::kLayerNorm, {1}, DType::kFloat32, {2, 4});
  add("layer_norm 3d", F32(Id(), {8, 4, 3}), Op::kLayerNorm, {2}, DType::kFloat32, {8, 4, 3});
  for (Case& c : cases) {
    SCOPED_TRACE(c.name + " [" + GetParam() + "]");
    c.setup.push_back(c.op);
    std::vector<std::string> errors = Run(c.setup);
    std::vector<std::string> fetch_errors;
    auto got = Fetch(c.op.results[0], &fetch_errors);
    errors.insert(errors.end(), fetch_errors.begin(), fetch_errors.end());
    EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
    ASSERT_TRUE(got.has_value());
    const wire::Envelope& env = got->first;
    EXPECT_EQ(env.dtype(), static_cast<uint32_t>(c.want_dtype));
    EXPECT_EQ(Shape(env.shape().begin(), env.shape().end()), c.want_shape);
    EXPECT_EQ(got->second.size(), static_cast<size_t>(NumElements(c.want_shape)) * ElementSize(c.want_dtype));
    EXPECT_TRUE(cluster_->AllAlive()) << c.name;
  }
  // The backwards of empty tensors, cut or not.
  for (Shape s : {Shape{0, 4}, Shape{8, 0}}) {
    SCOPED_TRACE("backward of " + ShapeToString(s) + " [" + GetParam() + "]");
    TensorId x = Id(), g = Id(), y = Id(), z = Id();
    EXPECT_TRUE(Run({F32(x, s), F32(g, s), Op_(Op::kLayerNormBackward, y, {g, x}, {1}),
                     Op_(Op::kGeluBackward, z, {g, x})}).empty());
    for (TensorId id : {y, z}) {
      std::vector<std::string> fetch_errors;
      auto got = Fetch(id, &fetch_errors);
      EXPECT_TRUE(fetch_errors.empty()) << ::testing::PrintToString(fetch_errors);
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(Shape(got->first.shape().begin(), got->first.shape().end()), s);
    }
    EXPECT_TRUE(cluster_->AllAlive());
  }
  OtherClientWorks();
}

// A payload that cannot be the tensor it names is refused, and a later use of that tensor names
// the refused op (in a mesh scope the tensor is made whole and then copied: a stand-in must not
// be what the copies carry).
TEST_P(FusedWireTest, PayloadOfTheWrongSizeIsRefusedAndNamedLater) {
  const TensorId x = Id(), y = Id();
  std::vector<float> six(6, 1.0f);
  Instruction bad = Bytes(x, DType::kFloat32, {4, 2}, six.data(), six.size() * 4);  // 8 floats named, 6 sent
  const uint64_t bad_seq = bad.seq;
  std::vector<std::string> errors = Run({bad});
  ASSERT_FALSE(errors.empty()) << "a short payload was accepted [" << GetParam() << "]";
  errors = Run({Op_(Op::kGelu, y, {x})});
  ASSERT_FALSE(errors.empty()) << "a use of the refused tensor ran [" << GetParam() << "]";
  EXPECT_NE(errors[0].find("#" + std::to_string(bad_seq)), std::string::npos) << ::testing::PrintToString(errors);
  OtherClientWorks();
}

INSTANTIATE_TEST_SUITE_P(Placements, FusedWireTest, ::testing::Values("whole", "rows", "cols", "rep", "grid"));

}  // namespace
}  // namespace gt::testing
