#include "worker/fair_queue.h"

#include <algorithm>
#include <iterator>

#include "gt/op.h"

namespace gt {
namespace {

// A lane that never empties (a client that keeps its queue full) compacts
// its spent slots once they are this many and at least half the vector.
constexpr size_t kCompactAfter = 1024;

}  // namespace

FairQueue::Lane& FairQueue::LaneFor(ClientId client) {
  if (last_pushed_ && last_pushed_->client_ == client) return *last_pushed_;
  Lane& lane = lanes_[client];
  lane.client_ = client;
  last_pushed_ = &lane;
  return lane;
}

void FairQueue::Push(Instruction&& inst) {
  Lane& lane = LaneFor(inst.client);
  if (lane.empty()) Activate(lane);
  const uint64_t ticket = KindOf(inst.op) == OpKind::kCollective ? ++tickets_issued_ : 0;
  lane.entries_.push_back({std::move(inst), ticket});
  ++queued_;
}

void FairQueue::SetWeight(ClientId client, double weight) { LaneFor(client).weight_ = weight; }

// An idle lane banks no credit: it starts at the clock.
void FairQueue::Activate(Lane& lane) {
  lane.virtual_time_ = std::max(lane.virtual_time_, clock_);
  active_.push_back(&lane);
}

void FairQueue::Deactivate(Lane& lane) {
  lane.entries_.clear();  // keeps the capacity: no allocation in the steady state
  lane.head_ = 0;
  auto it = std::find(active_.begin(), active_.end(), &lane);
  if (it != active_.end()) {
    *it = active_.back();
    active_.pop_back();
  }
}

const Instruction* FairQueue::Runnable(const Lane& lane) const {
  if (lane.empty()) return nullptr;
  const Lane::Entry& head = lane.entries_[lane.head_];
  if (head.ticket != 0 && head.ticket != tickets_run_ + 1) return nullptr;
  return &head.inst;
}

FairQueue::Lane* FairQueue::Next() {
  Lane* best = nullptr;
  for (Lane* lane : active_)
    if ((!best || lane->virtual_time_ < best->virtual_time_) && Runnable(*lane)) best = lane;
  if (best) clock_ = std::max(clock_, best->virtual_time_);
  return best;
}

Instruction FairQueue::Pop(Lane& lane) {
  Lane::Entry& head = lane.entries_[lane.head_++];
  if (head.ticket != 0) tickets_run_ = head.ticket;
  Instruction inst = std::move(head.inst);
  --queued_;
  if (lane.empty()) {
    Deactivate(lane);
  } else if (lane.head_ >= kCompactAfter && 2 * lane.head_ >= lane.entries_.size()) {
    lane.entries_.erase(lane.entries_.begin(), lane.entries_.begin() + static_cast<std::ptrdiff_t>(lane.head_));
    lane.head_ = 0;
  }
  return inst;
}

void FairQueue::Charge(Lane& lane, double seconds) { lane.virtual_time_ += seconds / lane.weight_; }

size_t FairQueue::Waiting(ClientId client) const {
  auto it = lanes_.find(client);
  return it == lanes_.end() ? 0 : it->second.size();
}

void FairQueue::Forget(ClientId client) {
  auto it = lanes_.find(client);
  if (it == lanes_.end() || !it->second.empty()) return;
  if (last_pushed_ == &it->second) last_pushed_ = nullptr;
  lanes_.erase(it);
}

}  // namespace gt
