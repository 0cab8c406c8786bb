// The op conformance test: every op that produces a tensor runs through the
// real stack (C++ client -> gt-dispatcher process -> gt-worker process with
// the torch backend plugin) and its result is compared with the same op run
// here, in-process, with ATen on the same inputs.
//
// Adding an op means adding a case to Cases(); EveryTensorOpHasACase fails
// until one exists.
#include <ATen/ATen.h>

#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "connected_cluster.h"
#include "gt/distributed.h"
#include "gt/gt.h"
#include "gt/nn.h"
#include "gt/op.h"

namespace {

using gt::DType;
using gt::Op;

// ---- gt <-> ATen -------------------------------------------------------------

at::ScalarType ToAten(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return at::kFloat;
    case DType::kFloat64: return at::kDouble;
    case DType::kInt32: return at::kInt;
    case DType::kInt64: return at::kLong;
    case DType::kBool: return at::kBool;
    case DType::kCount: break;
  }
  ADD_FAILURE() << "no ATen type for dtype " << static_cast<int>(dtype);
  return at::kFloat;
}

std::optional<DType> FromAten(at::ScalarType type) {
  for (size_t i = 0; i < static_cast<size_t>(DType::kCount); ++i)
    if (ToAten(static_cast<DType>(i)) == type) return static_cast<DType>(i);
  return std::nullopt;
}

gt::Shape ShapeOf(const at::Tensor& t) { return gt::Shape(t.sizes().begin(), t.sizes().end()); }

// Sends `t`'s bytes to the cluster (op from_bytes).
gt::Tensor Send(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  std::optional<DType> dtype = FromAten(c.scalar_type());
  if (!dtype) throw gt::Error(gt::Code::kInvalidArgument, "test input has a non-gt dtype");
  return gt::from_data(c.data_ptr(), c.nbytes(), ShapeOf(c), *dtype);
}

// Fetches `t` (op fetch, a sync point) into an ATen tensor.
at::Tensor Fetch(const gt::Tensor& t) {
  at::Tensor out = at::empty(t.shape(), at::TensorOptions().dtype(ToAten(t.dtype())));
  t.copy_to(out.data_ptr(), out.nbytes());
  return out;
}

// ---- deterministic inputs ------------------------------------------------------

at::Generator Gen(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

// Standard normal float32 values.
at::Tensor Normal(at::IntArrayRef shape, uint64_t seed, at::ScalarType type = at::kFloat) {
  return at::randn(shape, Gen(seed), at::TensorOptions().dtype(at::kDouble)).to(type);
}

// Values in [0.1, 2.1): safe for log, sqrt and as a divisor.
at::Tensor Positive(at::IntArrayRef shape, uint64_t seed, at::ScalarType type = at::kFloat) {
  return (at::rand(shape, Gen(seed), at::TensorOptions().dtype(at::kDouble)) * 2 + 0.1).to(type);
}

// Integers in [-11, 11], from a fixed pattern.
at::Tensor Ints(at::IntArrayRef shape, at::ScalarType type, int64_t offset = 0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  at::Tensor flat = at::remainder(at::arange(offset, offset + n, at::kLong) * 7, 23) - 11;
  return flat.reshape(shape).to(type);
}

// Non-zero integers in [1, 9] (divisors).
at::Tensor NonZeroInts(at::IntArrayRef shape, at::ScalarType type) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return (at::remainder(at::arange(n, at::kLong) * 5, 9) + 1).reshape(shape).to(type);
}

at::Tensor Bools(at::IntArrayRef shape) { return at::remainder(Ints(shape, at::kLong), 3) == 0; }

// ---- the case table ------------------------------------------------------------

using Remote = std::function<gt::Tensor(const std::vector<gt::Tensor>&)>;
using Local = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

struct Case {
  std::string name;
  std::vector<Op> ops;              // the ops the case exercises (coverage)
  std::vector<at::Tensor> inputs;   // sent with gt::from_data
  Remote remote;
  Local local;
};

std::vector<int64_t> AllDims(const at::Tensor& t) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < t.dim(); ++d) dims.push_back(d);
  return dims;
}

// The case tables, in the order the cases run (each split out for length).
#include "conformance_basic_cases.h"
#include "conformance_dtype_cases.h"
#include "conformance_transformer_cases.h"
#include "conformance_view_cases.h"
#include "conformance_conv_cases.h"

std::vector<Case> Cases() {
  using A = std::vector<at::Tensor>;
  std::vector<Case> cases;
  auto add = [&cases](std::string name, std::vector<Op> ops, A inputs, Remote remote, Local local) {
    cases.push_back({std::move(name), std::move(ops), std::move(inputs), std::move(remote), std::move(local)});
  };

  AddBasicCases(add);
  AddDTypeCases(add);
  AddTransformerCases(add);
  AddViewInPlaceAndLossCases(add);
  AddConvCases(add);
  return cases;
}

// ---- comparison ------------------------------------------------------------------

// Compares the remote result with the local one: the client's inferred shape
// and dtype, then the fetched bytes (exact for integers and bools, allclose
// for floating point). Always fetches, so that a remote failure is reported
// by the case that caused it (a fetch is a sync point); a gt::Error from the
// fetch propagates to the caller.
void ExpectMatches(const gt::Tensor& remote, const at::Tensor& want) {
  std::optional<DType> want_dtype = FromAten(want.scalar_type());
  ASSERT_TRUE(want_dtype.has_value()) << "ATen result type " << want.scalar_type() << " is not a gt dtype";
  EXPECT_EQ(remote.shape(), ShapeOf(want)) << "inferred shape " << gt::ShapeToString(remote.shape()) << ", ATen "
                                           << gt::ShapeToString(ShapeOf(want));
  EXPECT_EQ(remote.dtype(), *want_dtype) << "inferred dtype " << gt::DTypeName(remote.dtype()) << ", ATen "
                                         << gt::DTypeName(*want_dtype);
  at::Tensor got = Fetch(remote);
  if (got.scalar_type() != want.scalar_type() || got.sizes() != want.sizes()) return;  // reported above
  if (at::isFloatingType(want.scalar_type())) {
    EXPECT_TRUE(at::allclose(got, want, /*rtol=*/1e-5, /*atol=*/1e-6, /*equal_nan=*/true))
        << "remote:\n" << got << "\nATen:\n" << want;
  } else {
    EXPECT_TRUE(at::equal(got, want)) << "remote:\n" << got << "\nATen:\n" << want;
  }
}

std::string Describe(const std::vector<Op>& ops) {
  std::string out;
  for (Op op : ops) out += (out.empty() ? "" : ",") + std::string(gt::OpName(op));
  return out;
}

// ---- the fixture: one cluster of real processes for the whole suite ---------------

class ConformanceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gt::testing::ConnectedCluster::Start(); }

  static void TearDownTestSuite() { gt::testing::ConnectedCluster::Stop(); }

  void SetUp() override {
    ASSERT_TRUE(gt::testing::ConnectedCluster::ready()) << gt::testing::ConnectedCluster::NotReady();
  }

  void TearDown() override { EXPECT_TRUE(gt::testing::ConnectedCluster::cluster().AllAlive()) << "a host process died"; }

};


// Adding an op to enum Op without a case here fails this test (STYLE.md 13).
TEST(ConformanceCoverageTest, EveryTensorOpHasACase) {
  std::set<Op> covered;
  for (const Case& c : Cases()) covered.insert(c.ops.begin(), c.ops.end());
  for (size_t i = 0; i < static_cast<size_t>(Op::kCount); ++i) {
    Op op = static_cast<Op>(i);
    if (gt::KindOf(op) == gt::OpKind::kCollective) continue;  // only stages make them: tests/sharding_test.cc
    if (gt::ProducesTensor(op)) EXPECT_TRUE(covered.count(op)) << "op " << gt::OpName(op) << " has no conformance case";
    else EXPECT_FALSE(covered.count(op)) << "control op " << gt::OpName(op) << " listed as a tensor case";
  }
}

TEST_F(ConformanceTest, EveryOpMatchesLibTorch) {
  std::vector<Case> cases = Cases();
  std::set<std::string> names;
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + c.name + " (" + Describe(c.ops) + ")");
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name";
    try {
      std::vector<gt::Tensor> remote_inputs;
      for (const at::Tensor& in : c.inputs) remote_inputs.push_back(Send(in));
      gt::Tensor remote = c.remote(remote_inputs);
      at::Tensor want = c.local(c.inputs);
      ExpectMatches(remote, want);
    } catch (const gt::Error& e) {
      ADD_FAILURE() << "gt::Error (" << gt::CodeName(e.code()) << "): " << e.what();
    } catch (const c10::Error& e) {
      ADD_FAILURE() << "ATen reference failed: " << e.what_without_backtrace();
    }
  }
  EXPECT_GE(cases.size(), 100u);
  RecordProperty("cases", static_cast<int>(cases.size()));
  EXPECT_NO_THROW(gt::sync());  // nothing failed since the last fetch
}

TEST_F(ConformanceTest, RandnSeedsAndStatistics) {
  const gt::Shape shape = {200, 500};
  gt::Tensor a = gt::randn(shape, DType::kFloat32, 7);
  gt::Tensor b = gt::randn(shape, DType::kFloat32, 7);
  gt::Tensor c = gt::randn(shape, DType::kFloat32, 8);
  gt::Tensor unseeded = gt::randn(shape);
  gt::Tensor unseeded_again = gt::randn(shape);
  EXPECT_EQ(a.shape(), shape);
  EXPECT_EQ(a.dtype(), DType::kFloat32);
  EXPECT_EQ(unseeded.shape(), shape);
  EXPECT_EQ(gt::randn({3}, DType::kFloat64, 1).dtype(), DType::kFloat64);

  at::Tensor va = Fetch(a), vb = Fetch(b), vc = Fetch(c), vu = Fetch(unseeded), vu2 = Fetch(unseeded_again);
  EXPECT_TRUE(at::equal(va, vb)) << "same seed, different values";
  EXPECT_FALSE(at::equal(va, vc)) << "seeds 7 and 8 gave the same values";
  EXPECT_FALSE(at::equal(vu, vu2)) << "two unseeded randn calls gave the same values";
  EXPECT_TRUE(at::equal(va, at::randn(shape, Gen(7), at::TensorOptions().dtype(at::kFloat))))
      << "seeded randn differs from ATen's with a generator of the same seed";

  // 100000 standard normal samples: the mean's standard error is ~0.003.
  for (const at::Tensor& v : {va, vc, vu}) {
    EXPECT_NEAR(v.mean().item<double>(), 0.0, 0.02);
    EXPECT_NEAR(v.std().item<double>(), 1.0, 0.02);
  }
  // The same statistic computed remotely.
  EXPECT_NEAR(a.mean().item(), va.mean().item<double>(), 1e-5);
}

// ATen refuses to write a float result into an integer tensor (or a number
// into a bool) in place, and so does gt, at the call, leaving it unchanged.
TEST_F(ConformanceTest, AnInPlaceResultTheTensorCannotHoldThrowsAsInATen) {
  at::Tensor ints = Ints({3}, at::kLong), floats = Normal({3}, 130);
  EXPECT_THROW(ints.clone().add_(floats), c10::Error);
  gt::Tensor n = Send(ints), f = Send(floats);
  for (const auto& op : std::vector<std::function<void()>>{[&] { n += f; }, [&] { n *= f; }, [&] { n += 1.5; },
                                                           [&] { n.add_(f, 2); }})
    EXPECT_THROW(op(), gt::Error);
  EXPECT_EQ(n.to_vector<int64_t>(), std::vector<int64_t>(ints.data_ptr<int64_t>(), ints.data_ptr<int64_t>() + 3));
}

TEST_F(ConformanceTest, ShapeMismatchThrowsAtTheCall) {
  gt::Tensor a = Send(Normal({2, 3}, 100));
  gt::Tensor b = Send(Normal({4}, 101));
  gt::Tensor m = Send(Normal({4, 5}, 102));

  auto expect_error = [](const std::function<void()>& call, std::vector<std::string> parts) {
    try {
      call();
      ADD_FAILURE() << "no gt::Error thrown";
    } catch (const gt::Error& e) {
      EXPECT_EQ(e.code(), gt::Code::kInvalidArgument) << e.what();
      for (const std::string& p : parts)
        EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << e.what() << "' lacks '" << p << "'";
    }
  };
  expect_error([&] { (void)(a + b); }, {"add", "[2, 3]", "[4]"});
  expect_error([&] { (void)(a / b); }, {"div", "[2, 3]", "[4]"});
  expect_error([&] { (void)a.matmul(m); }, {"matmul", "[2, 3]", "[4, 5]"});
  expect_error([&] { (void)a.reshape({4, -1}); }, {"reshape", "[2, 3]", "[4, -1]"});
  expect_error([&] { (void)a.sum({2}); }, {"sum", "axis 2"});
  expect_error([&] { (void)a.transpose(0, 5); }, {"transpose", "[2, 3]"});

  // Nothing was sent for the rejected calls: the session carries on cleanly.
  gt::sync();
  ExpectMatches(a + 1, at::add(Normal({2, 3}, 100), 1));
}

TEST_F(ConformanceTest, RemoteErrorSurfacesAtTheNextSyncPoint) {
  // An index's values are known only on the worker: one out of range fails
  // there, and is reported at the next sync point.
  gt::Tensor a = Send(Normal({4}, 140));
  gt::Tensor index = Send(at::tensor({5}, at::kLong));
  gt::Tensor picked;
  ASSERT_NO_THROW(picked = a.index_select(0, index));
  EXPECT_EQ(picked.dtype(), DType::kFloat32);
  gt::Tensor dependent = picked.sum();  // consumes the failed op's result

  try {
    gt::sync();
    ADD_FAILURE() << "gt::sync() did not report the failed op";
  } catch (const gt::Error& e) {
    std::string what = e.what();
    EXPECT_EQ(e.code(), gt::Code::kInvalidArgument) << what;
    EXPECT_NE(what.find("index_select #"), std::string::npos) << what;
    EXPECT_NE(what.find("failed on worker-0"), std::string::npos) << what;
    EXPECT_NE(what.find("index out of range"), std::string::npos) << what;
    EXPECT_NE(what.find("and 1 more failed op"), std::string::npos) << "the dependent sum also failed: " << what;
  }

  // Errors are reported once; the session keeps working.
  EXPECT_NO_THROW(gt::sync());
  ExpectMatches(a + 1, at::add(Normal({4}, 140), 1));

  // Reading the dependent result names the op that failed first.
  try {
    (void)Fetch(dependent);
    ADD_FAILURE() << "fetching a tensor whose op failed did not throw";
  } catch (const gt::Error& e) {
    std::string what = e.what();
    EXPECT_EQ(e.code(), gt::Code::kFailedPrecondition) << what;
    EXPECT_NE(what.find("fetch #"), std::string::npos) << what;
    EXPECT_NE(what.find("failed"), std::string::npos) << what;
  }
  // Dropping the handles of failed tensors is not itself an error.
  picked = gt::Tensor();
  dependent = gt::Tensor();
  EXPECT_NO_THROW(gt::sync());
}

}  // namespace
