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

struct PairedTimes {
  double a_seconds;  // median of a's rounds
  double b_seconds;  // median of b's rounds
  double ratio;      // median of the rounds' a / b
};

// `rounds` rounds of `a` and `b` back to back, who goes first alternating,
// after one warm-up of each. The ratio is the median of the rounds' ratios:
// on a shared VM a slow spell falls on both sides of one round, where two
// separate medians can each catch a different spell.
inline PairedTimes PairedMedians(int rounds, const std::function<void()>& a, const std::function<void()>& b) {
  auto seconds = [](const std::function<void()>& body) {
    auto start = std::chrono::steady_clock::now();
    body();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  a();
  b();
  std::vector<double> as, bs, ratios;
  for (int i = 0; i < rounds; ++i) {
    double ta, tb;
    if (i % 2 == 0) {
      ta = seconds(a);
      tb = seconds(b);
    } else {
      tb = seconds(b);
      ta = seconds(a);
    }
    as.push_back(ta);
    bs.push_back(tb);
    ratios.push_back(ta / tb);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(as), median(bs), median(ratios)};
}

}  // namespace gt::bench
