// Sharding benchmark: the embedded default with 2 workers (LibTorch and
// OpenBLAS held to one thread, GT_INTRA_OP_THREADS=1, so each worker computes
// on its own thread), in one run:
//
//   2048x2048 matmul, whole on one worker        vs row-sharded over 2 workers
//                                                  (B replicated beforehand; no communication)
//   all-reduce of 64 MiB between 2 workers       (Gloo, worker to worker): time and bandwidth
//
// Each timing is the median of several runs after a warm-up; the matmul
// result is reduced to a scalar and only that is fetched.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <vector>

#include "bench_timing.h"
#include "gt/gt.h"

namespace {

using gt::bench::MedianSeconds;



gt::Tensor Make(const char* signal, const std::function<gt::Tensor()>& make) {
  std::optional<gt::SignalScope> scope;
  if (signal) scope.emplace(signal);
  return make();
}

}  // namespace

int main() {
  // One thread per worker, for LibTorch and OpenBLAS alike; both settings are
  // process-wide, so the in-process reference below runs on one thread too.
  setenv("GT_INTRA_OP_THREADS", "1", 1);
  gt::workers(2);
  gt::register_config("rows", {.shard = gt::ShardConfig{0, {0, 1}}});
  gt::register_config("both", {.replicated = true});
  constexpr int64_t n = 2048;
  constexpr int reps = 7;

  (void)gt::zeros({1}).item();  // starts the embedded cluster, whose workers set the thread counts
  at::Tensor la = at::randn({n, n}), lb = at::randn({n, n});
  const double local = MedianSeconds(reps, [&] { (void)at::matmul(la, lb).sum().item<float>(); });

  gt::Tensor a1 = gt::randn({n, n}), b1 = gt::randn({n, n});
  const double one = MedianSeconds(reps, [&] { (void)a1.matmul(b1).sum().item(); });

  gt::Tensor a2 = Make("rows", [] { return gt::randn({n, n}); });
  gt::Tensor b2 = Make("both", [] { return gt::randn({n, n}); });
  gt::sync();
  const double two = MedianSeconds(reps, [&] { (void)a2.matmul(b2).sum().item(); });

  // 64 MiB per worker: x is [2, 16Mi] floats sharded on axis 0, so x.sum({0})
  // all-reduces one [16Mi] partial (64 MiB) between the two workers.
  constexpr int64_t elems = int64_t{16} << 20;
  gt::Tensor x = Make("rows", [] { return gt::ones({2, elems}); });
  gt::Tensor one_row = gt::ones({1, elems});
  gt::sync();
  const double local_sum = MedianSeconds(reps, [&] { one_row.sum({0}); gt::sync(); });
  const double reduce = MedianSeconds(reps, [&] { x.sum({0}); gt::sync(); });
  const double mib = static_cast<double>(elems * 4) / (1 << 20);

  std::printf("| benchmark | time | note |\n|---|---|---|\n");
  std::printf("| 2048x2048 matmul, LibTorch in-process, 1 thread | %.1f ms | the limit for one worker |\n", local * 1e3);
  std::printf("| 2048x2048 matmul, gt, whole on 1 worker | %.1f ms | %.2fx LibTorch |\n", one * 1e3, one / local);
  std::printf("| 2048x2048 matmul, gt, row-sharded over 2 workers | %.1f ms | %.2fx faster than 1 worker |\n", two * 1e3,
              one / two);
  std::printf("| all-reduce of %.0f MiB between 2 workers (sum over the sharded axis) | %.1f ms | %.0f MiB/s; "
              "the same sum on one worker without a collective: %.1f ms |\n",
              mib, reduce * 1e3, mib / (reduce - local_sum > 0 ? reduce - local_sum : reduce), local_sum * 1e3);
  return 0;
}
