// The fused ops (gelu, gelu_backward, layer_norm, layer_norm_backward,
// sum_of_squares, mul_into) from
// a raw-wire client that lies, on four worker processes with the sharding
// stage, their operands whole, cut by rows, cut by columns or replicated:
// every hostile instruction gets a clear error at the next sync, no host
// dies, the session and another client go on; allowed odd inputs (integers,
// bools, empty tensors, empty pieces, eps = inf) compute with the dtype and
// shape the dispatcher inferred.
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

namespace gt::testing {
namespace {

constexpr int kPromptMs = 15000;

class FusedWireTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new ProcessCluster(ShardingClusterOptions("fused", 4));
    ready_ = cluster_->WaitForWorkers(4);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(ready_) << "four workers did not register";
    client_ = std::make_unique<RawClient>(context_, cluster_->endpoint());
    // signals: "rows" cuts axis 0 over 4 workers, "cols" axis 1 over 4, "rep" replicated, "grid" a 2-D mesh.
    std::vector<Instruction> configs;
    ConfigureSpec rows{.signal = "rows", .shard_axis = 0, .workers = {0, 1, 2, 3}};
    ConfigureSpec cols{.signal = "cols", .shard_axis = 1, .workers = {0, 1, 2, 3}};
    ConfigureSpec rep{.signal = "rep", .replicated = true};
    // "grid": [Shard(0), Replicate()] on the 2 x 2 mesh [[0, 1], [2, 3]].
    ConfigureSpec grid{.signal = "grid", .workers = {0, 1, 2, 3}, .mesh = {2, 2, 1, 0, 2, 0}};
    configs.push_back(MakeConfigure(seq_++, rows));
    configs.push_back(MakeConfigure(seq_++, cols));
    configs.push_back(MakeConfigure(seq_++, rep));
    configs.push_back(MakeConfigure(seq_++, grid));
    client_->Send(configs);
    auto done = client_->Sync(nullptr, kPromptMs);
    ASSERT_TRUE(done.has_value());
    ASSERT_EQ(done->errors_size(), 0) << done->DebugString();
  }
  void TearDown() override { EXPECT_TRUE(cluster_->AllAlive()) << "a host died"; }

  std::string Signal() const { return GetParam() == "whole" ? std::string() : GetParam(); }

  Instruction Bytes(TensorId id, DType dtype, Shape shape, const void* data, size_t size) {
    Instruction inst;
    inst.op = Op::kFromBytes;
    inst.seq = seq_++;
    inst.results = {id};
    inst.attrs.shape = std::move(shape);
    inst.attrs.dtype = dtype;
    inst.payload = CopyToBlob(data, size);
    inst.signal = Signal();
    return inst;
  }
  Instruction F32(TensorId id, Shape shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(1.0 + i));
    return Bytes(id, DType::kFloat32, std::move(shape), v.data(), v.size() * 4);
  }
  Instruction F64(TensorId id, Shape shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<double> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(1.0 + i);
    return Bytes(id, DType::kFloat64, std::move(shape), v.data(), v.size() * 8);
  }
  Instruction I64(TensorId id, Shape shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i % 7) - 3;
    return Bytes(id, DType::kInt64, std::move(shape), v.data(), v.size() * 8);
  }
  Instruction B8(TensorId id, Shape shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint8_t> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = i % 2;
    return Bytes(id, DType::kBool, std::move(shape), v.data(), v.size());
  }
  Instruction Op_(Op op, TensorId result, std::vector<TensorId> operands, std::vector<int64_t> axes = {},
                  double eps = 1e-5) {
    Instruction inst = MakeInstruction(op, seq_++, {result}, std::move(operands));
    inst.attrs.axes = std::move(axes);
    inst.attrs.scalar = eps;
    inst.signal = Signal();
    return inst;
  }

  // Sends `batch` and a sync; the sync's errors (fails if it did not come).
  std::vector<std::string> Run(const std::vector<Instruction>& batch) {
    client_->Send(batch);
    std::optional<wire::Envelope> done = client_->Sync(nullptr, kPromptMs);
    EXPECT_TRUE(done.has_value()) << "no answer within " << kPromptMs << " ms";
    std::vector<std::string> errors;
    if (done)
      for (const auto& e : done->errors()) errors.push_back(e.message());
    return errors;
  }
  // Fetches `id`: {envelope of DATA, bytes}; errors into `errors`.
  std::optional<std::pair<wire::Envelope, std::string>> Fetch(TensorId id, std::vector<std::string>* errors) {
    client_->Send({MakeInstruction(Op::kFetch, seq_++, {}, {id})});
    std::vector<std::pair<wire::Envelope, std::string>> data;
    std::optional<wire::Envelope> done = client_->Sync(&data, kPromptMs);
    EXPECT_TRUE(done.has_value());
    if (done)
      for (const auto& e : done->errors()) errors->push_back(e.message());
    if (data.empty()) return std::nullopt;
    return data[0];
  }
  void OtherClientWorks() {
    RawClient other(context_, cluster_->endpoint());
    other.Send({FromFloats(1, {1, 2, 3, 4}), MakeInstruction(Op::kAdd, 2, {2}, {1, 1})});
    EXPECT_EQ(FetchFloats(other, 2, 3), (std::vector<float>{2, 4, 6, 8}));
  }
  // An instruction that must be refused: a clear error (mentioning `what` when given), no crash.
  void ExpectRefused(const std::string& label, std::vector<Instruction> setup, Instruction bad,
                     const std::string& what = "") {
    SCOPED_TRACE(label + " [" + GetParam() + "]");
    setup.push_back(std::move(bad));
    std::vector<std::string> errors = Run(setup);
    EXPECT_FALSE(errors.empty()) << label << ": accepted";
    bool found = what.empty();
    for (const auto& e : errors) found = found || e.find(what) != std::string::npos;
    EXPECT_TRUE(found) << label << ": " << ::testing::PrintToString(errors);
    EXPECT_TRUE(cluster_->AllAlive()) << label << ": a host died";
    // The session still works.
    std::vector<std::string> after = Run({F32(next_id_ + 500, {4, 4})});
    EXPECT_TRUE(after.empty()) << label << ": session broken: " << ::testing::PrintToString(after);
    next_id_ += 1;
  }
  TensorId Id() { return next_id_++; }
  // The `count` float32 elements of `id` (empty, with a failure recorded,
  // when the fetch fails or brings another size).
  std::vector<float> FetchF32(TensorId id, size_t count) {
    std::vector<std::string> errors;
    auto got = Fetch(id, &errors);
    EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
    if (!got.has_value() || got->second.size() != count * 4) {
      ADD_FAILURE() << "fetch of %" << id << ": expected " << count << " float32 elements";
      return {};
    }
    std::vector<float> values(count);
    std::memcpy(values.data(), got->second.data(), count * 4);
    return values;
  }

  static ProcessCluster* cluster_;
  static bool ready_;
  zmq::context_t context_{1};
  std::unique_ptr<RawClient> client_;
  uint64_t seq_ = 1;
  TensorId next_id_ = 10;
};

ProcessCluster* FusedWireTest::cluster_ = nullptr;
bool FusedWireTest::ready_ = false;

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

INSTANTIATE_TEST_SUITE_P(Placements, FusedWireTest, ::testing::Values("whole", "rows", "cols", "rep", "grid"));

}  // namespace
}  // namespace gt::testing
