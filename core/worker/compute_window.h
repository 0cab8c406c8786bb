// The execution seconds one client used on this worker in the last minute,
// kept in one-second slots: what limits.max_compute_seconds_per_minute
// caps (FairScheduler refuses a client's compute while it is at its limit).
//
// Thread-safety: none; the pipeline thread only.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace gt {

class ComputeWindow {
 public:
  using Clock = std::chrono::steady_clock;

  // Adds `seconds` used up to `now`.
  void Add(Clock::time_point now, double seconds) {
    Advance(now);
    slots_[static_cast<size_t>(newest_ % kSlots)] += seconds;
  }
  // The seconds added in the minute before `now` (to a second's precision).
  double LastMinute(Clock::time_point now) {
    Advance(now);
    double sum = 0;
    for (double s : slots_) sum += s;
    return sum;
  }

 private:
  static constexpr int64_t kSlots = 60;
  // Empties the slots of the seconds that passed since the newest.
  void Advance(Clock::time_point now) {
    const int64_t second = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
    if (newest_ < 0) newest_ = second;
    for (int64_t s = newest_ + 1; s <= second && s <= newest_ + kSlots; ++s) slots_[static_cast<size_t>(s % kSlots)] = 0;
    if (second > newest_) newest_ = second;
  }
  std::array<double, kSlots> slots_{};
  int64_t newest_ = -1;
};

}  // namespace gt
