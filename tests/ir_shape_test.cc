// The IR's tables and shape rules, without any process: the op and dtype
// tables, instruction helpers, and the shape inference the client applies on
// every call. Part of ir_test (with ir_codec_test.cc).
#include <chrono>
#include <cmath>
#include <limits>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <zmq.hpp>

#include "ir/codec.h"
#include "gt/dtype.h"
#include "gt/instruction.h"
#include "gt/op.h"
#include "gt/op_attrs.h"
#include "gt/status.h"
#include "ir/shape_inference.h"
#include "net/transport.h"
#include "wire.pb.h"
#include "expect_contains.h"

namespace gt {
namespace {

// ---- op table --------------------------------------------------------------

TEST(OpTableTest, NamesRoundTripForEveryOp) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < static_cast<size_t>(Op::kCount); ++i) {
    Op op = static_cast<Op>(i);
    const OpInfo& info = GetOpInfo(op);
    EXPECT_EQ(info.op, op) << "row " << i;
    EXPECT_FALSE(info.name.empty()) << "row " << i;
    // Lower-case words and digits (PyTorch's conv2d, max_pool2d), a letter first: a
    // valid metrics label value and identifier.
    EXPECT_TRUE(info.name[0] >= 'a' && info.name[0] <= 'z') << info.name;
    for (char c : info.name) EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') << info.name;
    std::optional<Op> parsed = ParseOp(OpName(op));
    ASSERT_TRUE(parsed.has_value()) << info.name;
    EXPECT_EQ(*parsed, op) << info.name;
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate op name " << info.name;
  }
  EXPECT_FALSE(ParseOp("").has_value());
  EXPECT_FALSE(ParseOp("ADD").has_value());
  EXPECT_FALSE(ParseOp("conv3d").has_value());
}

TEST(OpTableTest, KindsAndNames) {
  EXPECT_EQ(OpName(Op::kFromBytes), "from_bytes");
  EXPECT_EQ(OpName(Op::kMatmul), "matmul");
  EXPECT_EQ(OpName(Op::kDropClient), "drop_client");
  EXPECT_EQ(KindOf(Op::kRandn), OpKind::kCreate);
  EXPECT_EQ(KindOf(Op::kDiv), OpKind::kBinary);
  EXPECT_EQ(KindOf(Op::kMatmul), OpKind::kContract);
  EXPECT_EQ(KindOf(Op::kNeg), OpKind::kUnary);
  EXPECT_EQ(KindOf(Op::kMax), OpKind::kReduce);
  EXPECT_EQ(KindOf(Op::kTranspose), OpKind::kMovement);
  const std::set<Op> control = {Op::kFetch,    Op::kFree,   Op::kSync,       Op::kDropClient, Op::kHotStart,
                                 Op::kHotEnd,   Op::kDefineUnit, Op::kRunUnit, Op::kConfigure, Op::kMembership,
                                 Op::kInspect,  Op::kSettle, Op::kCheckpointWrite, Op::kCheckpointRead};
  const std::set<Op> mutate = {Op::kCopyInto, Op::kFill, Op::kAdamStep, Op::kMulInto, Op::kAddInto};
  for (size_t i = 0; i < static_cast<size_t>(Op::kCount); ++i) {
    Op op = static_cast<Op>(i);
    EXPECT_EQ(ProducesTensor(op), !control.count(op) && !mutate.count(op)) << OpName(op);
    EXPECT_EQ(KindOf(op) == OpKind::kControl, control.count(op) == 1) << OpName(op);
    EXPECT_EQ(KindOf(op) == OpKind::kMutate, mutate.count(op) == 1) << OpName(op);
  }
}

// ---- dtypes ----------------------------------------------------------------

TEST(DTypeTest, NamesSizesAndKinds) {
  struct Row {
    DType dtype;
    const char* name;
    size_t size;
    bool floating;
  };
  const Row rows[] = {{DType::kFloat32, "float32", 4, true},
                      {DType::kFloat64, "float64", 8, true},
                      {DType::kInt32, "int32", 4, false},
                      {DType::kInt64, "int64", 8, false},
                      {DType::kBool, "bool", 1, false}};
  static_assert(std::size(rows) == static_cast<size_t>(DType::kCount), "a dtype without a row");
  for (const Row& r : rows) {
    EXPECT_EQ(DTypeName(r.dtype), r.name);
    EXPECT_EQ(ElementSize(r.dtype), r.size) << r.name;
    EXPECT_EQ(IsFloatingPoint(r.dtype), r.floating) << r.name;
    std::optional<DType> parsed = ParseDType(r.name);
    ASSERT_TRUE(parsed.has_value()) << r.name;
    EXPECT_EQ(*parsed, r.dtype);
  }
  EXPECT_FALSE(ParseDType("float16").has_value());
  EXPECT_FALSE(ParseDType("Float32").has_value());
  EXPECT_FALSE(ParseDType("").has_value());
}

TEST(DTypeTest, PromotionFollowsPyTorch) {
  EXPECT_EQ(PromoteTypes(DType::kInt32, DType::kInt32), DType::kInt32);
  EXPECT_EQ(PromoteTypes(DType::kBool, DType::kInt32), DType::kInt32);
  EXPECT_EQ(PromoteTypes(DType::kInt32, DType::kInt64), DType::kInt64);
  EXPECT_EQ(PromoteTypes(DType::kInt64, DType::kFloat32), DType::kFloat32);
  EXPECT_EQ(PromoteTypes(DType::kFloat32, DType::kInt64), DType::kFloat32);
  EXPECT_EQ(PromoteTypes(DType::kFloat32, DType::kFloat64), DType::kFloat64);
  EXPECT_EQ(PromoteTypes(DType::kBool, DType::kBool), DType::kBool);
}

TEST(InstructionTest, ShapeHelpersAndDescribe) {
  EXPECT_EQ(ShapeToString({}), "[]");
  EXPECT_EQ(ShapeToString({2, 3}), "[2, 3]");
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(NumElements({2, 0}), 0);
  Instruction inst;
  inst.op = Op::kAdd;
  inst.seq = 12;
  inst.results = {5};
  inst.operands = {3, 4};
  EXPECT_CONTAINS(inst.Describe(), "add #12");
  EXPECT_CONTAINS(inst.Describe(), "%5");
  EXPECT_CONTAINS(inst.Describe(), "%3,%4");
}

// ---- shape inference ---------------------------------------------------------

// Runs InferResult for `op` with the given attributes on operand metas.
Result<TensorMeta> Infer(Op op, const std::vector<TensorMeta>& operands, Attributes attrs = {}) {
  Instruction inst;
  inst.op = op;
  inst.attrs = std::move(attrs);
  std::vector<const TensorMeta*> in;
  for (const TensorMeta& m : operands) in.push_back(&m);
  return InferResult(inst, in);
}

TensorMeta F32(Shape shape) { return {std::move(shape), DType::kFloat32}; }

Attributes Axes(std::vector<int64_t> axes, bool keepdims) {
  Attributes a;
  a.axes = std::move(axes);
  a.keepdims = keepdims;
  return a;
}

Attributes WithShape(Shape shape) {
  Attributes a;
  a.shape = std::move(shape);
  return a;
}

// cross_entropy's ignore_index: an integer a double holds exactly, or none.
TEST(OpAttrsTest, IgnoreIndexIsAnExactIntegerOrNone) {
  auto index = [](double value, ScalarSide side = ScalarSide::kNone) {
    Instruction inst;
    inst.op = Op::kCrossEntropy;
    inst.attrs.scalar = value;
    inst.attrs.scalar_side = side;
    return IgnoreIndex(inst);
  };
  EXPECT_EQ(index(-100), std::optional<int64_t>(-100));
  EXPECT_EQ(index(0), std::optional<int64_t>(0));
  EXPECT_EQ(index(9007199254740992.0), std::optional<int64_t>(int64_t{1} << 53));
  for (double bad : {0.5, -1e300, 9007199254740994.0, std::nan(""), std::numeric_limits<double>::infinity()})
    EXPECT_FALSE(index(bad).has_value()) << bad;
  EXPECT_FALSE(index(3, ScalarSide::kRight).has_value());
}

TEST(ShapeInferenceTest, Broadcasting) {
  struct Case {
    Shape a, b, want;
  };
  const Case cases[] = {
      {{2, 3}, {2, 3}, {2, 3}},       {{2, 3}, {3}, {2, 3}},          {{2, 1, 3}, {4, 1}, {2, 4, 3}},
      {{}, {3, 4}, {3, 4}},           {{5, 1}, {1, 6}, {5, 6}},       {{1}, {}, {1}},
      {{0, 3}, {1, 3}, {0, 3}},       {{8, 1, 6, 1}, {7, 1, 5}, {8, 7, 6, 5}},
  };
  for (const Case& c : cases) {
    Result<Shape> got = BroadcastShapes(c.a, c.b);
    ASSERT_TRUE(got.ok()) << ShapeToString(c.a) << " with " << ShapeToString(c.b) << ": " << got.status().ToString();
    EXPECT_EQ(*got, c.want) << ShapeToString(c.a) << " with " << ShapeToString(c.b);
    Result<Shape> swapped = BroadcastShapes(c.b, c.a);
    ASSERT_TRUE(swapped.ok());
    EXPECT_EQ(*swapped, c.want);
  }
}

TEST(ShapeInferenceTest, BroadcastFailureNamesBothShapes) {
  Result<Shape> got = BroadcastShapes({2, 3}, {4});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kInvalidArgument);
  EXPECT_CONTAINS(got.status().message(), "[2, 3]");
  EXPECT_CONTAINS(got.status().message(), "[4]");

  Result<TensorMeta> add = Infer(Op::kMul, {F32({5, 2, 3}), F32({5, 3, 2})});
  ASSERT_FALSE(add.ok());
  EXPECT_EQ(add.status().code(), Code::kInvalidArgument);
  EXPECT_CONTAINS(add.status().message(), "mul");
  EXPECT_CONTAINS(add.status().message(), "[5, 2, 3]");
  EXPECT_CONTAINS(add.status().message(), "[5, 3, 2]");
}

TEST(ShapeInferenceTest, BinaryDTypes) {
  TensorMeta i32{{4}, DType::kInt32};
  TensorMeta i64{{4}, DType::kInt64};
  TensorMeta b{{4}, DType::kBool};
  TensorMeta f64{{4}, DType::kFloat64};
  EXPECT_EQ(Infer(Op::kAdd, {i32, i64})->dtype, DType::kInt64);
  EXPECT_EQ(Infer(Op::kAdd, {i32, F32({4})})->dtype, DType::kFloat32);
  EXPECT_EQ(Infer(Op::kMul, {F32({4}), f64})->dtype, DType::kFloat64);
  EXPECT_EQ(Infer(Op::kDiv, {i32, i32})->dtype, DType::kFloat32) << "true division";

  Attributes scalar;
  scalar.scalar_side = ScalarSide::kRight;
  scalar.scalar = 2;
  EXPECT_EQ(Infer(Op::kAdd, {i32}, scalar)->dtype, DType::kInt32);
  EXPECT_EQ(Infer(Op::kAdd, {b}, scalar)->dtype, DType::kInt64);
  EXPECT_EQ(Infer(Op::kDiv, {i64}, scalar)->dtype, DType::kFloat32);
  EXPECT_EQ(Infer(Op::kAdd, {f64}, scalar)->dtype, DType::kFloat64);
  scalar.scalar = 1.5;
  scalar.scalar_side = ScalarSide::kLeft;
  EXPECT_EQ(Infer(Op::kSub, {i32}, scalar)->dtype, DType::kFloat32);
  EXPECT_EQ(Infer(Op::kSub, {i32}, scalar)->shape, Shape({4}));

  scalar.scalar = -0.0;  // a float in PyTorch, as the torch backend reads it
  EXPECT_EQ(Infer(Op::kMul, {i32}, scalar)->dtype, DType::kFloat32);
  scalar.scalar = 1e20;  // beyond int64
  EXPECT_EQ(Infer(Op::kAdd, {i64}, scalar)->dtype, DType::kFloat32);
  scalar.scalar = -9223372036854775808.0;  // exactly -2^63 still reads as a float in the backend
  EXPECT_EQ(Infer(Op::kAdd, {i64}, scalar)->dtype, DType::kFloat32);
  scalar.scalar = 0.0;
  EXPECT_EQ(Infer(Op::kMul, {i32}, scalar)->dtype, DType::kInt32);

  Result<TensorMeta> arity = Infer(Op::kAdd, {i32}, Attributes{});
  ASSERT_FALSE(arity.ok());
  EXPECT_CONTAINS(arity.status().message(), "add");
}

TEST(ShapeInferenceTest, Matmul) {
  struct Case {
    Shape a, b, want;
  };
  const Case cases[] = {
      {{3}, {3}, {}},                       // dot
      {{3}, {3, 4}, {4}},                   // vector-matrix
      {{2, 3}, {3}, {2}},                   // matrix-vector
      {{2, 3}, {3, 4}, {2, 4}},             // 2-D
      {{5, 2, 3}, {5, 3, 4}, {5, 2, 4}},    // batched
      {{5, 2, 3}, {3, 4}, {5, 2, 4}},       // broadcast matrix
      {{3}, {5, 3, 4}, {5, 4}},             // broadcast vector
      {{5, 1, 2, 3}, {4, 3, 6}, {5, 4, 2, 6}},  // broadcast batch dims
  };
  for (const Case& c : cases) {
    Result<TensorMeta> got = Infer(Op::kMatmul, {F32(c.a), F32(c.b)});
    ASSERT_TRUE(got.ok()) << ShapeToString(c.a) << " @ " << ShapeToString(c.b) << ": " << got.status().ToString();
    EXPECT_EQ(got->shape, c.want) << ShapeToString(c.a) << " @ " << ShapeToString(c.b);
    EXPECT_EQ(got->dtype, DType::kFloat32);
  }
}

TEST(ShapeInferenceTest, MatmulErrorsNameBothShapes) {
  Result<TensorMeta> got = Infer(Op::kMatmul, {F32({2, 3}), F32({4, 5})});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kInvalidArgument);
  EXPECT_CONTAINS(got.status().message(), "[2, 3]");
  EXPECT_CONTAINS(got.status().message(), "[4, 5]");

  got = Infer(Op::kMatmul, {F32({3}), F32({4})});
  ASSERT_FALSE(got.ok());
  EXPECT_CONTAINS(got.status().message(), "[3]");
  EXPECT_CONTAINS(got.status().message(), "[4]");

  got = Infer(Op::kMatmul, {F32({2, 2, 3}), F32({3, 3, 4})});
  ASSERT_FALSE(got.ok()) << "batch dims 2 and 3 do not broadcast";
  EXPECT_CONTAINS(got.status().message(), "[2, 2, 3]");
  EXPECT_CONTAINS(got.status().message(), "[3, 3, 4]");

  got = Infer(Op::kMatmul, {F32({}), F32({3})});
  ASSERT_FALSE(got.ok()) << "0-d operand";
  EXPECT_CONTAINS(got.status().message(), "matmul");
}

TEST(ShapeInferenceTest, Reductions) {
  struct Case {
    std::vector<int64_t> axes;
    bool keepdims;
    Shape want;
  };
  const Case cases[] = {
      {{}, false, {}},           {{}, true, {1, 1, 1}},      {{0}, false, {3, 4}},
      {{1}, true, {2, 1, 4}},    {{-1}, false, {2, 3}},      {{-1}, true, {2, 3, 1}},
      {{0, 2}, false, {3}},      {{-3, -1}, true, {1, 3, 1}}, {{2, 0}, false, {3}},
      {{0, 1, 2}, false, {}},
  };
  for (Op op : {Op::kSum, Op::kMean, Op::kMax}) {
    for (const Case& c : cases) {
      Result<TensorMeta> got = Infer(op, {F32({2, 3, 4})}, Axes(c.axes, c.keepdims));
      ASSERT_TRUE(got.ok()) << OpName(op) << " axes " << ShapeToString(c.axes) << ": " << got.status().ToString();
      EXPECT_EQ(got->shape, c.want) << OpName(op) << " axes " << ShapeToString(c.axes) << " keepdims " << c.keepdims;
      EXPECT_EQ(got->dtype, DType::kFloat32);
    }
  }
  // 0-d input: axis 0 / -1 are accepted and reduce nothing.
  Result<TensorMeta> scalar = Infer(Op::kSum, {F32({})}, Axes({-1}, false));
  ASSERT_TRUE(scalar.ok()) << scalar.status().ToString();
  EXPECT_EQ(scalar->shape, Shape{});
  scalar = Infer(Op::kMean, {F32({})}, Axes({0}, true));
  ASSERT_TRUE(scalar.ok()) << scalar.status().ToString();
  EXPECT_EQ(scalar->shape, Shape{});
  EXPECT_FALSE(Infer(Op::kSum, {F32({})}, Axes({-2}, false)).ok());
  EXPECT_FALSE(Infer(Op::kSum, {F32({})}, Axes({1}, false)).ok());
}

TEST(ShapeInferenceTest, ReductionDTypesAndErrors) {
  EXPECT_EQ(Infer(Op::kSum, {{{3}, DType::kInt32}})->dtype, DType::kInt64);
  EXPECT_EQ(Infer(Op::kSum, {{{3}, DType::kBool}})->dtype, DType::kInt64);
  EXPECT_EQ(Infer(Op::kSum, {{{3}, DType::kFloat64}})->dtype, DType::kFloat64);
  EXPECT_EQ(Infer(Op::kMax, {{{3}, DType::kInt32}})->dtype, DType::kInt32);

  Result<TensorMeta> mean = Infer(Op::kMean, {{{3}, DType::kInt64}});
  ASSERT_FALSE(mean.ok());
  EXPECT_CONTAINS(mean.status().message(), "int64");

  Result<TensorMeta> range = Infer(Op::kSum, {F32({2, 3})}, Axes({2}, false));
  ASSERT_FALSE(range.ok());
  EXPECT_EQ(range.status().code(), Code::kInvalidArgument);
  EXPECT_CONTAINS(range.status().message(), "sum");
  EXPECT_CONTAINS(range.status().message(), "axis 2");

  range = Infer(Op::kMax, {F32({2, 3})}, Axes({-3}, false));
  ASSERT_FALSE(range.ok());
  EXPECT_CONTAINS(range.status().message(), "axis -3");

  Result<TensorMeta> twice = Infer(Op::kSum, {F32({2, 3})}, Axes({1, -1}, false));
  ASSERT_FALSE(twice.ok());
  EXPECT_CONTAINS(twice.status().message(), "twice");

  Result<TensorMeta> empty = Infer(Op::kMax, {F32({0, 3})});
  ASSERT_FALSE(empty.ok());
  EXPECT_CONTAINS(empty.status().message(), "[0, 3]");
}

TEST(ShapeInferenceTest, NormalizeAxes) {
  Result<std::vector<int64_t>> all = NormalizeAxes({}, 3);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector<int64_t>{0, 1, 2}));
  Result<std::vector<int64_t>> wrapped = NormalizeAxes({-1, -3}, 3);
  ASSERT_TRUE(wrapped.ok());
  EXPECT_EQ(*wrapped, (std::vector<int64_t>{2, 0}));
  EXPECT_FALSE(NormalizeAxes({3}, 3).ok());
  EXPECT_FALSE(NormalizeAxes({0, -3}, 3).ok());
}

TEST(ShapeInferenceTest, Reshape) {
  struct Case {
    Shape target, want;
  };
  const Case cases[] = {
      {{6, 4}, {6, 4}},   {{-1, 4}, {6, 4}}, {{4, -1}, {4, 6}}, {{2, -1, 3}, {2, 4, 3}},
      {{-1}, {24}},       {{24}, {24}},      {{1, 24, 1}, {1, 24, 1}},
  };
  for (const Case& c : cases) {
    Result<TensorMeta> got = Infer(Op::kReshape, {{{2, 3, 4}, DType::kInt64}}, WithShape(c.target));
    ASSERT_TRUE(got.ok()) << ShapeToString(c.target) << ": " << got.status().ToString();
    EXPECT_EQ(got->shape, c.want) << ShapeToString(c.target);
    EXPECT_EQ(got->dtype, DType::kInt64);
  }
  Result<TensorMeta> scalar = Infer(Op::kReshape, {F32({1, 1})}, WithShape({}));
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->shape, Shape{});
}

TEST(ShapeInferenceTest, ReshapeErrorsNameBothShapes) {
  Result<TensorMeta> got = Infer(Op::kReshape, {F32({2, 3, 4})}, WithShape({5, -1}));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kInvalidArgument);
  EXPECT_CONTAINS(got.status().message(), "[2, 3, 4]");
  EXPECT_CONTAINS(got.status().message(), "[5, -1]");

  got = Infer(Op::kReshape, {F32({2, 3, 4})}, WithShape({7}));
  ASSERT_FALSE(got.ok());
  EXPECT_CONTAINS(got.status().message(), "[2, 3, 4]");
  EXPECT_CONTAINS(got.status().message(), "[7]");

  got = Infer(Op::kReshape, {F32({2, 3, 4})}, WithShape({-1, -1}));
  ASSERT_FALSE(got.ok());
  EXPECT_CONTAINS(got.status().message(), "only one dimension may be -1");

  got = Infer(Op::kReshape, {F32({2, 3, 4})}, WithShape({-2, 12}));
  ASSERT_FALSE(got.ok());
  EXPECT_CONTAINS(got.status().message(), "[-2, 12]");
}

TEST(ShapeInferenceTest, Transpose) {
  auto dims = [](std::vector<int64_t> axes) { return Axes(std::move(axes), false); };
  EXPECT_EQ(Infer(Op::kTranspose, {F32({2, 3, 4})})->shape, Shape({2, 4, 3})) << "no dims: last two";
  EXPECT_EQ(Infer(Op::kTranspose, {F32({2, 3})})->shape, Shape({3, 2}));
  EXPECT_EQ(Infer(Op::kTranspose, {F32({5})})->shape, Shape({5})) << "1-D: unchanged";
  EXPECT_EQ(Infer(Op::kTranspose, {F32({2, 3, 4})}, dims({0, 2}))->shape, Shape({4, 3, 2}));
  EXPECT_EQ(Infer(Op::kTranspose, {F32({2, 3, 4})}, dims({-1, 0}))->shape, Shape({4, 3, 2}));
  EXPECT_EQ(Infer(Op::kTranspose, {F32({2, 3, 4})}, dims({1, 1}))->shape, Shape({2, 3, 4}));
  EXPECT_EQ(Infer(Op::kTranspose, {{{2, 3}, DType::kInt32}})->dtype, DType::kInt32);

  Result<TensorMeta> range = Infer(Op::kTranspose, {F32({2, 3})}, dims({0, 2}));
  ASSERT_FALSE(range.ok());
  EXPECT_EQ(range.status().code(), Code::kInvalidArgument);
  EXPECT_CONTAINS(range.status().message(), "[0, 2]");
  EXPECT_CONTAINS(range.status().message(), "[2, 3]");

  Result<TensorMeta> three = Infer(Op::kTranspose, {F32({2, 3, 4})}, dims({0, 1, 2}));
  ASSERT_FALSE(three.ok());
  EXPECT_CONTAINS(three.status().message(), "two dims");
}

TEST(ShapeInferenceTest, UnaryAndCreation) {
  EXPECT_EQ(Infer(Op::kSigmoid, {{{2}, DType::kInt32}})->dtype, DType::kFloat32);
  EXPECT_EQ(Infer(Op::kLog, {{{2}, DType::kFloat64}})->dtype, DType::kFloat64);
  EXPECT_EQ(Infer(Op::kRelu, {{{2}, DType::kInt64}})->dtype, DType::kInt64);
  EXPECT_EQ(Infer(Op::kNeg, {{{2}, DType::kInt32}})->dtype, DType::kInt32);
  EXPECT_EQ(Infer(Op::kExp, {F32({2, 5})})->shape, Shape({2, 5}));
  EXPECT_FALSE(Infer(Op::kNeg, {{{2}, DType::kBool}}).ok());

  Attributes create = WithShape({3, 0, 2});
  create.dtype = DType::kInt32;
  Result<TensorMeta> zeros = Infer(Op::kZeros, {}, create);
  ASSERT_TRUE(zeros.ok());
  EXPECT_EQ(zeros->shape, Shape({3, 0, 2}));
  EXPECT_EQ(zeros->dtype, DType::kInt32);

  Result<TensorMeta> randn = Infer(Op::kRandn, {}, create);
  ASSERT_FALSE(randn.ok());
  EXPECT_CONTAINS(randn.status().message(), "int32");

  Result<TensorMeta> negative = Infer(Op::kOnes, {}, WithShape({2, -3}));
  ASSERT_FALSE(negative.ok());
  EXPECT_CONTAINS(negative.status().message(), "[2, -3]");
}

TEST(ShapeInferenceTest, ZeroDimOperandsPromoteOnlyAcrossCategories) {
  TensorMeta f32_vec{{3}, DType::kFloat32}, f64_scalar{{}, DType::kFloat64};
  TensorMeta i32_vec{{3}, DType::kInt32}, i64_scalar{{}, DType::kInt64};
  EXPECT_EQ(Infer(Op::kAdd, {f32_vec, f64_scalar})->dtype, DType::kFloat32);
  EXPECT_EQ(Infer(Op::kAdd, {i32_vec, i64_scalar})->dtype, DType::kInt32);
  EXPECT_EQ(Infer(Op::kAdd, {i32_vec, f64_scalar})->dtype, DType::kFloat64);
  EXPECT_EQ(Infer(Op::kMul, {f64_scalar, f32_vec})->dtype, DType::kFloat32);
}

TEST(ShapeInferenceTest, MatmulOfMixedDTypesIsRejectedAtTheCall) {
  Result<TensorMeta> r = Infer(Op::kMatmul, {F32({2, 3}), TensorMeta{{3, 2}, DType::kFloat64}});
  ASSERT_FALSE(r.ok());
  EXPECT_CONTAINS(r.status().message(), "float32 and float64");
}

TEST(ShapeInferenceTest, BoolReluAndZeroDimTranspose) {
  EXPECT_FALSE(Infer(Op::kRelu, {TensorMeta{{2}, DType::kBool}}).ok());
  Attributes dims;
  dims.axes = {0, -1};
  Result<TensorMeta> t = Infer(Op::kTranspose, {F32({})}, dims);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->shape.empty());
}

}  // namespace
}  // namespace gt
