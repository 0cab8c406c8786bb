// Foundation benchmark: gt's embedded default against LibTorch in-process,
// the same work in the same run, reported as ratios (gt time / LibTorch time).
// Each row runs the two sides in alternating rounds; the ratio is the median
// of the rounds' ratios (bench_timing.h: PairedMedians).
//
//   pipelined small ops: 2000 adds of 64x64 tensors, then one fetch
//   op + fetch round trip: one 64x64 add and its fetch, repeated
//   matmul + fetch: one 512x512 matmul and its fetch, repeated
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "bench_timing.h"
#include "gt/gt.h"

namespace {

using gt::bench::PairedMedians;
using gt::bench::PairedTimes;

struct Row {
  const char* name;
  PairedTimes times;  // a: gt, b: LibTorch
};

void Print(const std::vector<Row>& rows) {
  std::printf("%-34s %14s %14s %10s\n", "benchmark", "gt", "libtorch", "ratio");
  for (const Row& r : rows)
    std::printf("%-34s %11.3f ms %11.3f ms %9.2fx\n", r.name, r.times.a_seconds * 1e3, r.times.b_seconds * 1e3,
                r.times.ratio);
}

std::vector<float> Values(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

PairedTimes PerOp(PairedTimes times, int n) {
  times.a_seconds /= n;
  times.b_seconds /= n;
  return times;
}

gt::Tensor ToGt(const at::Tensor& t) {
  std::vector<float> v = Values(t);
  return gt::tensor<float>(v, gt::Shape(t.sizes().begin(), t.sizes().end()));
}

Row PipelinedAdds(int reps) {
  at::Tensor a = at::randn({64, 64}), b = at::randn({64, 64});
  gt::Tensor ga = ToGt(a), gb = ToGt(b);
  PairedTimes times = PairedMedians(reps, [&] {
    gt::Tensor c = ga;
    for (int i = 0; i < 2000; ++i) c = c + gb;
    volatile float sink = c.to_vector<float>()[0];
    (void)sink;
  }, [&] {
    at::Tensor c = a;
    for (int i = 0; i < 2000; ++i) c = at::add(c, b);
    volatile float sink = Values(c)[0];
    (void)sink;
  });
  return {"2000 x add 64x64, then fetch", times};
}

Row RoundTrip(int reps) {
  at::Tensor a = at::randn({64, 64}), b = at::randn({64, 64});
  gt::Tensor ga = ToGt(a), gb = ToGt(b);
  const int n = 200;
  PairedTimes times = PairedMedians(reps, [&] {
    for (int i = 0; i < n; ++i) (void)(ga + gb).to_vector<float>();
  }, [&] {
    for (int i = 0; i < n; ++i) (void)Values(at::add(a, b));
  });
  return {"add 64x64 + fetch (round trip)", PerOp(times, n)};
}

Row Matmul(int reps) {
  at::Tensor a = at::randn({512, 512}), b = at::randn({512, 512});
  gt::Tensor ga = ToGt(a), gb = ToGt(b);
  const int n = 10;
  PairedTimes times = PairedMedians(reps, [&] {
    for (int i = 0; i < n; ++i) (void)ga.matmul(gb).to_vector<float>();
  }, [&] {
    for (int i = 0; i < n; ++i) (void)Values(at::matmul(a, b));
  });
  return {"matmul 512x512 + fetch", PerOp(times, n)};
}

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
  std::printf("gt foundation benchmark: embedded default (dispatcher + %s workers), LibTorch %d intra-op threads, "
              "%d alternating rounds, medians\n",
              std::getenv("GT_WORKERS") ? std::getenv("GT_WORKERS") : "2", at::get_num_threads(), reps);
  std::vector<Row> rows = {PipelinedAdds(reps), RoundTrip(reps), Matmul(reps)};
  Print(rows);
  gt::shutdown();
  return 0;
}
