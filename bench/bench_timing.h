// Timing helpers shared by the benchmarks: medians of wall-clock runs.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace gt::bench {

// Median wall time in seconds of `reps` runs of `body`, after one warm-up run.
inline double MedianSeconds(int reps, const std::function<void()>& body) {
  body();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    body();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace gt::bench
