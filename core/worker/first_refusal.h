// The reason a worker ends: the first refusal any of its threads learns
// (the dispatcher refused the registration, the attach or the keys; it was
// declared lost; no dispatcher took it back within its grace). Later ones
// are ignored: the first says why the worker stopped.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <mutex>

#include "gt/status.h"

namespace gt {

class FirstRefusal {
 public:
  void Set(Status why) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (why_.ok()) why_ = std::move(why);
    set_.store(true, std::memory_order_release);
  }
  // Cheap enough for every loop pass.
  bool set() const { return set_.load(std::memory_order_acquire); }
  Status why() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return why_;
  }

 private:
  mutable std::mutex mutex_;
  Status why_;  // GUARDED_BY(mutex_)
  std::atomic<bool> set_{false};
};

}  // namespace gt
