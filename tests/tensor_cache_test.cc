// The torch backend's reuse of freed tensors (tensor_cache.h,
// recycled_kernels.h) and the table's flat map (flat_map.h), driven
// directly (no hosts): a result written into a freed tensor must equal, bit
// for bit and in layout, what ATen makes afresh; a tensor anybody else still
// holds (a fetch in flight, a view) is never written; the kept bytes stay
// within their bound, count in the client's quota and go back before the
// client is refused.
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "direct_kernels.h"
#include "flat_map.h"
#include "tensor_cache.h"
#include "torch_backend.h"

namespace gt::torch_backend {
namespace {

TEST(FlatMap, AgreesWithUnorderedMapThroughRandomInsertsAndErases) {
  FlatMap<int> flat;
  std::unordered_map<uint64_t, int> reference;
  std::mt19937_64 rng(7);
  for (int step = 0; step < 200000; ++step) {
    const uint64_t key = rng() % 5000;  // dense ids: the table's case
    if (rng() % 3 == 0) {
      auto it = reference.find(key);
      const int want = it == reference.end() ? 0 : it->second;
      if (it != reference.end()) reference.erase(it);
      ASSERT_EQ(flat.Take(key), want) << "step " << step;
    } else {
      flat.Open(key) = step;
      reference[key] = step;
    }
    ASSERT_EQ(flat.size(), reference.size());
  }
  for (const auto& [key, value] : reference) ASSERT_NE(flat.Find(key), nullptr) << key;
  size_t visited = 0;
  flat.ForEach([&](uint64_t key, int value) {
    ++visited;
    EXPECT_EQ(reference.at(key), value);
  });
  EXPECT_EQ(visited, reference.size());
  EXPECT_EQ(flat.Find(99999), nullptr);
}

at::Tensor Random(std::vector<int64_t> shape, uint64_t seed) {
  return at::randn(shape, at::detail::createCPUGenerator(seed), at::TensorOptions().dtype(at::kFloat));
}

TEST(TensorCache, GivesBackTheStorageOfAFreedTensorOfTheSameSize) {
  TensorCache cache(1 << 20);
  at::Tensor t = Random({8, 8}, 1);
  const void* data = t.data_ptr();
  cache.Offer(3, std::move(t));
  EXPECT_EQ(cache.BytesOf(3), 256u);
  EXPECT_FALSE(cache.Take(4, at::kFloat, {8, 8}).defined()) << "another client's";
  EXPECT_FALSE(cache.Take(3, at::kDouble, {4, 8}).defined()) << "same bytes, other dtype";
  at::Tensor again = cache.Take(3, at::kFloat, {2, 32});  // same element count, other shape
  ASSERT_TRUE(again.defined());
  EXPECT_EQ(again.data_ptr(), data);
  EXPECT_EQ(again.sizes(), at::IntArrayRef({2, 32}));
  EXPECT_TRUE(again.is_contiguous());
  EXPECT_EQ(cache.bytes(), 0u);
}

TEST(TensorCache, NeverKeepsWhatSomebodyElseHolds) {
  TensorCache cache(1 << 20);
  at::Tensor held = Random({16}, 2);
  at::Tensor other_ref = held;
  cache.Offer(1, std::move(held));
  at::Tensor base = Random({16}, 3);
  at::Tensor view = base.view({4, 4});
  cache.Offer(1, std::move(base));  // the view shares its storage
  std::vector<float> outside(16);
  cache.Offer(1, at::from_blob(outside.data(), {16}));  // not ATen's memory
  cache.Offer(1, Random({4, 4}, 4).t());                // not contiguous
  cache.Offer(1, Random({32}, 5).slice(0, 0, 16));      // not its whole storage
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_FALSE(cache.Take(1, at::kFloat, {16}).defined());
}

TEST(TensorCache, StaysWithinItsBounds) {
  TensorCache cache(4096);
  for (int i = 0; i < 10; ++i) cache.Offer(1, Random({256}, i));  // 1 KiB each
  EXPECT_EQ(cache.bytes(), TensorCache::kKeptPerSize * 1024) << "at most kKeptPerSize of one size";
  for (int i = 0; i < 10; ++i) cache.Offer(2, Random({300}, i));
  EXPECT_LE(cache.bytes(), 4096u);
  TensorCache sizes(1 << 30);
  for (int64_t n = 1; n <= static_cast<int64_t>(TensorCache::kSizesPerClient) + 8; ++n) sizes.Offer(1, Random({n}, n));
  EXPECT_FALSE(sizes.Take(1, at::kFloat, {1}).defined()) << "the least recently used size went first";
  EXPECT_TRUE(sizes.Take(1, at::kFloat, {TensorCache::kSizesPerClient + 8}).defined());
  sizes.Drop(1);
  EXPECT_EQ(sizes.bytes(), 0u);
  TensorCache none(0);
  none.Offer(1, Random({4}, 9));
  EXPECT_EQ(none.bytes(), 0u);
}

// Values where a different formula would show: zeros of both signs,
// infinities, NaN, subnormals, values near overflow, ordinary ones.
at::Tensor Awkward(at::ScalarType dtype, int64_t n, uint64_t seed) {
  at::Tensor t = at::randn({n}, at::detail::createCPUGenerator(seed), at::TensorOptions().dtype(at::kDouble)) * 1e3;
  const double inf = std::numeric_limits<double>::infinity();
  const double specials[] = {0.0, -0.0, inf, -inf, std::nan(""), 1e-40, -1e-310, 3e38, -3e38, 1.0, 1.0 / 3};
  for (int64_t i = 0; i < n; i += 7) t[i] = specials[(i / 7 + seed) % std::size(specials)];
  return t.to(dtype);
}

TEST(DirectKernels, MatchATenBitForBit) {
  const Op ops[] = {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv};
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const at::Tensor a = Awkward(dtype, 4099, 1), b = Awkward(dtype, 4099, 2);
    for (Op op : ops) {
      auto aten = [op](const at::Tensor& x, const at::Tensor& y) {
        return op == Op::kAdd ? at::add(x, y) : op == Op::kSub ? at::sub(x, y) : op == Op::kMul ? at::mul(x, y) : at::div(x, y);
      };
      for (double v : {1.0, 3.0, 0.1, -0.0, 7.5e-39, 1e30, std::nan("")}) {
        at::Tensor s = at::scalar_tensor(v, at::TensorOptions().dtype(dtype));
        s.unsafeGetTensorImpl()->set_wrapped_number(true);
        for (int form = 0; form < 3; ++form) {
          const at::Tensor& x = form == 1 ? s : a;
          const at::Tensor& y = form == 0 ? b : form == 1 ? a : s;
          at::Tensor out = at::empty({4099}, a.options());
          ASSERT_TRUE(DirectBinarySupports(op, out.numel()));
          DirectBinary(op, x, y, out);
          const at::Tensor want = aten(x, y);
          ASSERT_EQ(want.scalar_type(), dtype);
          EXPECT_EQ(std::memcmp(out.data_ptr(), want.data_ptr(), want.nbytes()), 0)
              << OpName(op) << " " << c10::toString(dtype) << " form " << form << " scalar " << v;
        }
      }
    }
  }
  EXPECT_FALSE(DirectBinarySupports(Op::kAdd, kDirectMaxElements + 1)) << "ATen would use its threads";
  EXPECT_FALSE(DirectBinarySupports(Op::kMaximum, 16)) << "NaN rules of its own";
}

// A backend with a real registry for its cache counters.
class RecycledBackend : public ::testing::Test {
 protected:
  class KeepSink final : public ReplySink {
   public:
    void SendData(const Instruction&, DType, const Shape&, BlobPtr bytes) override { last = std::move(bytes); }
    BlobPtr last;
  };

  void Start(uint64_t cache_bytes, uint64_t max_client_bytes = 0) {
    auto gauge = [&](const char* name) { return &prometheus::BuildGauge().Name(name).Register(registry_).Add({}); };
    auto counter = [&](const char* name) { return &prometheus::BuildCounter().Name(name).Register(registry_).Add({}); };
    TorchBackendOptions options{1, {}, 0, 0};
    options.max_client_bytes = max_client_bytes;
    options.tensor_cache_bytes = cache_bytes;
    options.tensor_cache_counters = {gauge("bytes"), counter("hits"), counter("misses"), counter("evicted")};
    hits_ = options.tensor_cache_counters.hits;
    backend_ = std::make_unique<TorchBackend>(options);
  }

  static Instruction Make(Op op, std::vector<TensorId> operands, std::vector<TensorId> results) {
    Instruction inst;
    inst.op = op;
    inst.client = 1;
    inst.operands = std::move(operands);
    inst.results = std::move(results);
    return inst;
  }
  Status Run(Instruction inst) { return backend_->Execute(inst, sink_); }
  void Store(TensorId id, const at::Tensor& t) {
    Instruction inst = Make(Op::kFromBytes, {}, {id});
    inst.attrs.shape.assign(t.sizes().begin(), t.sizes().end());
    inst.attrs.dtype = t.scalar_type() == at::kDouble ? DType::kFloat64 : DType::kFloat32;
    inst.payload = CopyToBlob(t.data_ptr(), t.nbytes());
    ASSERT_TRUE(Run(inst).ok());
  }
  // The bytes of `id`, fetched.
  std::vector<std::byte> Fetch(TensorId id) {
    EXPECT_TRUE(Run(Make(Op::kFetch, {id}, {})).ok());
    if (!sink_.last) return {};
    return std::vector<std::byte>(sink_.last->data(), sink_.last->data() + sink_.last->size());
  }
  static std::vector<std::byte> Bytes(const at::Tensor& t) {
    at::Tensor c = t.contiguous();
    auto* p = static_cast<const std::byte*>(c.data_ptr());
    return std::vector<std::byte>(p, p + c.nbytes());
  }
  double hits() const { return hits_->Value(); }

  prometheus::Registry registry_;
  prometheus::Counter* hits_ = nullptr;
  std::unique_ptr<TorchBackend> backend_;
  KeepSink sink_;
};

// x = x op y, the old x freed each time, as a Python loop sends it.
TEST_F(RecycledBackend, APipelinedLoopWritesIntoFreedTensorsAndComputesWhatATenDoes) {
  Start(64 << 20);
  const at::Tensor x0 = Random({64, 64}, 10), y = 1 + Random({64, 64}, 11) * 0.01;
  Store(1, x0);
  Store(2, y);
  at::Tensor want = x0;
  const Op ops[] = {Op::kAdd, Op::kMul, Op::kSub, Op::kDiv, Op::kMaximum, Op::kMinimum};
  TensorId x = 1;
  for (int i = 0; i < 60; ++i) {
    const Op op = ops[i % 6];
    ASSERT_TRUE(Run(Make(op, {x, 2}, {x + 100})).ok());
    if (x != 1) {
      ASSERT_TRUE(Run(Make(Op::kFree, {x}, {})).ok());
    }
    x += 100;
    switch (op) {
      case Op::kAdd: want = at::add(want, y); break;
      case Op::kMul: want = at::mul(want, y); break;
      case Op::kSub: want = at::sub(want, y); break;
      case Op::kDiv: want = at::div(want, y); break;
      case Op::kMaximum: want = at::maximum(want, y); break;
      default: want = at::minimum(want, y); break;
    }
  }
  EXPECT_EQ(Fetch(x), Bytes(want));
  EXPECT_GT(hits(), 50) << "the loop's results should mostly be written into freed tensors";
  EXPECT_EQ(backend_->ClientBytes(1), 4u * 64 * 64 * 4) << "x0, y, the last x and one kept tensor";
}

TEST_F(RecycledBackend, ScalarsUnaryOpsComparisonsAndMatmulMatchATen) {
  Start(64 << 20);
  const at::Tensor a = Random({32, 48}, 20), b = Random({48, 32}, 21);
  Store(1, a);
  Store(2, b);
  struct Case {
    Instruction inst;
    at::Tensor want;
  };
  auto scalar = [&](Op op, double v, ScalarSide side) {
    Instruction i = Make(op, {1}, {});
    i.attrs.scalar = v;
    i.attrs.scalar_side = side;
    return i;
  };
  std::vector<Case> cases = {
      {scalar(Op::kAdd, 1.0, ScalarSide::kRight), a + 1.0},
      {scalar(Op::kSub, 0.1, ScalarSide::kLeft), 0.1 - a},
      {scalar(Op::kDiv, 3.0, ScalarSide::kRight), a / 3.0},
      {scalar(Op::kMul, -0.0, ScalarSide::kRight), a * -0.0},
      {scalar(Op::kGt, 0.25, ScalarSide::kRight), at::gt(a, 0.25)},
      {Make(Op::kExp, {1}, {}), at::exp(a)},
      {Make(Op::kTanh, {1}, {}), at::tanh(a)},
      {Make(Op::kSigmoid, {1}, {}), at::sigmoid(a)},
      {Make(Op::kAbs, {1}, {}), at::abs(a)},
      {Make(Op::kMatmul, {1, 2}, {}), at::matmul(a, b)},
      {Make(Op::kMatmul, {2, 1}, {}), at::matmul(b, a)},
  };
  TensorId next = 10;
  for (int pass = 0; pass < 2; ++pass) {  // the second pass finds the first's freed results
    for (Case& c : cases) {
      c.inst.results = {next};
      ASSERT_TRUE(Run(c.inst).ok()) << c.inst.Describe();
      EXPECT_EQ(Fetch(next), Bytes(c.want)) << c.inst.Describe() << " pass " << pass;
      sink_.last.reset();  // the fetch is sent: nothing holds the result now
      ASSERT_TRUE(Run(Make(Op::kFree, {next}, {})).ok());
      ++next;
    }
  }
  EXPECT_GE(hits(), static_cast<double>(cases.size())) << "the second pass should reuse every result";
}

TEST_F(RecycledBackend, AFetchStillSendingIsNeverOverwritten) {
  Start(64 << 20);
  Store(1, Random({64}, 30));
  Store(2, Random({64}, 31));
  ASSERT_TRUE(Run(Make(Op::kAdd, {1, 2}, {3})).ok());
  const std::vector<std::byte> sent = Fetch(3);
  BlobPtr in_flight = sink_.last;  // the transport has not sent it yet
  ASSERT_TRUE(Run(Make(Op::kFree, {3}, {})).ok());
  ASSERT_TRUE(Run(Make(Op::kMul, {1, 2}, {4})).ok());
  ASSERT_TRUE(Run(Make(Op::kSub, {1, 2}, {5})).ok());
  EXPECT_EQ(std::vector<std::byte>(in_flight->data(), in_flight->data() + in_flight->size()), sent);
}

TEST_F(RecycledBackend, KeptTensorsGoBackBeforeTheClientIsRefusedAndWhenItLeaves) {
  Start(64 << 20, /*max_client_bytes=*/3 * 4096 + 100);
  Store(1, Random({1024}, 40));  // 4 KiB each
  Store(2, Random({1024}, 41));
  ASSERT_TRUE(Run(Make(Op::kAdd, {1, 2}, {3})).ok());
  ASSERT_TRUE(Run(Make(Op::kFree, {3}, {})).ok());
  EXPECT_EQ(backend_->ClientBytes(1), 3u * 4096) << "two tensors and one kept";
  Instruction big = Make(Op::kZeros, {}, {4});
  big.attrs.shape = {1024};
  EXPECT_TRUE(Run(big).ok()) << "the kept tensor makes room for a new one";
  EXPECT_EQ(backend_->ClientBytes(1), 3u * 4096);
  big.results = {5};
  Status refused = Run(big);
  EXPECT_EQ(refused.code(), Code::kResourceExhausted) << refused.ToString();
  ASSERT_TRUE(Run(Make(Op::kFree, {4}, {})).ok());
  EXPECT_GT(backend_->ClientBytes(1), 0u);
  ASSERT_TRUE(Run(Make(Op::kDropClient, {}, {})).ok());
  EXPECT_EQ(backend_->ClientBytes(1), 0u);
  EXPECT_EQ(backend_->Stats().resident_bytes, 0u);
}

}  // namespace
}  // namespace gt::torch_backend
