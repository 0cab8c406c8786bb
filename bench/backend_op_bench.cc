// The torch backend's own cost per op, in-process (no hosts, no client): the
// instructions a pipelined Python loop sends a worker (`x = x + y`: an add,
// then the free of the old x), executed by TorchBackend::Execute, against
// ATen's `x = at::add(x, y)` in the same process. Three backends side by
// side, in alternating rounds (bench_timing.h, PairedMedians):
//   reuse   the default: freed tensors kept (tensor_cache_mib 256) and the
//           direct loops for small add/sub/mul/div
//   aten    tensor_cache_mib 0: every op ATen's own call
// and forms: tensor (x + y, 64x64 float32), scalar (x + 1.0), matmul
// (512x512, a @ b then the free of the previous product).
//
//   build/bin/gt-bench-backend-op [rounds] [ops per round]
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "bench_timing.h"
#include "torch_backend.h"

namespace gt::torch_backend {
namespace {

class NullSink final : public ReplySink {
 public:
  void SendData(const Instruction&, DType, const Shape&, BlobPtr) override {}
};

Instruction Make(Op op, std::vector<TensorId> operands, std::vector<TensorId> results) {
  Instruction inst;
  inst.op = op;
  inst.client = 1;
  inst.operands = std::move(operands);
  inst.results = std::move(results);
  return inst;
}

class Loop {
 public:
  Loop(uint64_t cache_bytes, std::vector<int64_t> shape, Op op, bool scalar) : op_(op), scalar_(scalar) {
    TorchBackendOptions options{1, {}, /*malloc_keep_mib=*/256, 0};  // the plugin's defaults
    options.tensor_cache_bytes = cache_bytes;
    backend_ = std::make_unique<TorchBackend>(options);
    for (TensorId id : {TensorId{1}, TensorId{2}}) {
      Instruction make = Make(Op::kOnes, {}, {id});
      make.attrs.shape = shape;
      Check(backend_->Execute(make, sink_));
    }
  }
  // `n` ops: result = x op y (or x op 1.0), then the old result freed.
  void Run(int n) {
    for (int i = 0; i < n; ++i) {
      const TensorId result = next_++;
      Instruction inst = Make(op_, {x_, 2}, {result});
      if (scalar_) {
        inst.operands = {x_};
        inst.attrs.scalar = 1.0;
        inst.attrs.scalar_side = ScalarSide::kRight;
      }
      if (op_ == Op::kMatmul) inst.operands = {1, 2};
      Check(backend_->Execute(inst, sink_));
      if (x_ != 1) Check(backend_->Execute(Make(Op::kFree, {x_}, {}), sink_));
      x_ = result;
    }
  }

 private:
  static void Check(const Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      std::exit(1);
    }
  }
  std::unique_ptr<TorchBackend> backend_;
  NullSink sink_;
  const Op op_;
  const bool scalar_;
  TensorId x_ = 1;
  TensorId next_ = 10;
};

void Row(const char* name, int rounds, int n, std::vector<int64_t> shape, Op op, bool scalar) {
  Loop reuse(256ull << 20, shape, op, scalar), aten(0, shape, op, scalar);
  at::Tensor x = at::ones(shape), y = at::ones(shape);
  auto eager = [&] {
    at::Tensor r = x;
    for (int i = 0; i < n; ++i) r = op == Op::kMatmul ? at::matmul(x, y) : scalar ? r + 1.0 : r + y;
  };
  const bench::PairedTimes a = bench::PairedMedians(rounds, [&] { reuse.Run(n); }, eager);
  const bench::PairedTimes b = bench::PairedMedians(rounds, [&] { aten.Run(n); }, eager);
  const bench::PairedTimes c = bench::PairedMedians(rounds, [&] { reuse.Run(n); }, [&] { aten.Run(n); });
  std::printf("%-22s %8.3f us %8.3f us %8.3f us   %5.2fx   %5.2fx   %5.2fx\n", name, 1e6 * a.a_seconds / n,
              1e6 * b.a_seconds / n, 1e6 * a.b_seconds / n, a.ratio, b.ratio, c.ratio);
}

}  // namespace
}  // namespace gt::torch_backend

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
  const int n = argc > 2 ? std::max(1, std::atoi(argv[2])) : 2000;
  at::set_num_threads(1);
  std::printf("torch backend per op (op + free of the previous result), %d paired rounds of %d ops, 1 thread\n",
              rounds, n);
  std::printf("%-22s %11s %11s %11s   %6s   %6s   %6s\n", "", "reuse", "aten", "ATen eager", "reuse/", "aten/",
              "reuse/");
  std::printf("%-22s %11s %11s %11s   %6s   %6s   %6s\n", "", "", "", "", "eager", "eager", "aten");
  using gt::Op;
  gt::torch_backend::Row("add 64x64", rounds, n, {64, 64}, Op::kAdd, false);
  gt::torch_backend::Row("add scalar 64x64", rounds, n, {64, 64}, Op::kAdd, true);
  gt::torch_backend::Row("mul 256x256", rounds, n / 4, {256, 256}, Op::kMul, false);
  gt::torch_backend::Row("matmul 512x512", rounds, std::max(1, n / 200), {512, 512}, Op::kMatmul, false);
  return 0;
}
