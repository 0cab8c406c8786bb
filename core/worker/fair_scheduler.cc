#include "worker/fair_scheduler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "gt/instruction_errors.h"
#include "gt/op.h"

namespace gt {

using Clock = std::chrono::steady_clock;

namespace {

// What a compute quota may refuse: instructions that compute. Control ops
// (frees, syncs, fetches, markers) cost nothing, and a collective's peers
// would wait for it for ever.
bool Refusable(Op op) { return op == Op::kRunUnit || (KindOf(op) != OpKind::kControl && KindOf(op) != OpKind::kCollective); }

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", s);
  return text;
}

}  // namespace

FairScheduler::FairScheduler(Pipeline& pipeline, prometheus::Registry& registry, const std::string& instance,
                             Refuse refuse)
    : pipeline_(pipeline),
      meter_(registry, instance),
      instance_(instance),
      refuse_(std::move(refuse)),
      compute_quota_(MakeQuotaMetrics(registry, {{"host", "worker"}, {"instance", instance}},
                                      "compute_seconds_per_minute", 0)) {}

void FairScheduler::SetShare(const ClientShare& share) {
  queue_.SetWeight(share.client, share.weight);
  meter_.Name(share.client, share.label, share.weight);
  const double limit = share.max_compute_seconds_per_minute;
  if (limit > 0) {
    budgets_[share.client].limit = limit;
    if (compute_quota_.limit) compute_quota_.limit->Set(limit);
  }
}

void FairScheduler::Push(Instruction&& inst) {
  queue_.Push(std::move(inst));
  const uint64_t now = queue_.queued();
  queued_.store(now, std::memory_order_relaxed);
  uint64_t peak = peak_queued_.load(std::memory_order_relaxed);
  while (now > peak && !peak_queued_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

uint64_t FairScheduler::TakePeakQueued() {
  const uint64_t peak = peak_queued_.exchange(queued(), std::memory_order_relaxed);
  return std::max(peak, queued());
}

void FairScheduler::RunTurn() {
  FairQueue::Lane* lane = queue_.Next();
  if (!lane) return;
  const ClientId client = lane->client();
  const Clock::time_point start = Clock::now();
  Budget* budget = nullptr;
  if (!budgets_.empty()) {
    auto it = budgets_.find(client);
    if (it != budgets_.end()) budget = &it->second;
  }
  if (budget) {
    const double used = budget->used.LastMinute(start);
    if (used >= budget->limit) return RunRefusing(*lane, used);
  }
  Clock::time_point now = start;
  uint64_t ran = 0;
  bool dropped = false;
  while (queue_.Runnable(*lane)) {
    Instruction inst = queue_.Pop(*lane);
    dropped |= inst.op == Op::kDropClient;
    // The reading that ends one instruction starts the next one's timing:
    // one clock reading per instruction here, not two.
    now = pipeline_.Push(std::move(inst), now);
    ++ran;
    if (now - start >= kSlice) break;
  }
  pipeline_.EndBatch();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  queue_.Charge(*lane, seconds);
  if (budget) budget->used.Add(start, seconds);
  meter_.AddTurn(client, seconds, ran);
  meter_.SetQueued(client, lane->size());
  if (bytes_held_) meter_.SetBytesHeld(client, bytes_held_(client));
  if (dropped && lane->empty()) {  // the session ended here: its books go
    queue_.Forget(client);
    meter_.Forget(client);
    budgets_.erase(client);
  }
  Publish();
}

void FairScheduler::RunRefusing(FairQueue::Lane& lane, double used) {
  const ClientId client = lane.client();
  const double limit = budgets_.at(client).limit;
  bool dropped = false;
  while (queue_.Runnable(lane)) {
    Instruction inst = queue_.Pop(lane);
    dropped |= inst.op == Op::kDropClient;
    if (!Refusable(inst.op)) {
      pipeline_.Push(std::move(inst));
      continue;
    }
    if (compute_quota_.refusals) compute_quota_.refusals->Increment();
    refuse_(inst, QuotaRefusal(inst, "used " + Seconds(used) + " s of compute on " + instance_ + " in the last minute",
                               "over its limit (limits.max_compute_seconds_per_minute = " + Seconds(limit) + ")",
                               "wait for the minute to pass, or ask for a larger limit"));
  }
  pipeline_.EndBatch();
  meter_.SetQueued(client, lane.size());
  if (dropped && lane.empty()) {
    queue_.Forget(client);
    meter_.Forget(client);
    budgets_.erase(client);
  }
  Publish();
}

void FairScheduler::Publish() {
  queued_.store(queue_.queued(), std::memory_order_relaxed);
  meter_.SetTotals(queue_.queued(), queue_.active_lanes());
}

}  // namespace gt
