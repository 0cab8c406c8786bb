// The worker's run queue: one FIFO lane per client session, served by
// weighted fair share of measured execution time (docs/ARCHITECTURE.md,
// "Fair sharing").
//
// Each lane keeps a virtual time: the execution seconds charged to it
// divided by its weight. The next lane served is the one with the least
// virtual time among those whose head may run (Next). A lane that was idle
// starts again at the queue's virtual clock (the virtual time of the lane
// served last), so idling banks no credit and a newcomer waits for at most
// the turn in progress. A client's own instructions leave its lane in the
// order they came.
//
// Collectives (OpKind::kCollective) make workers wait on each other, so
// they run in the order they arrived, whoever sent them: each takes a
// ticket when pushed, and a lane whose head is a collective may run only
// when that collective holds the oldest ticket not yet run. The dispatcher
// sends every worker its instructions in one global order, so every member
// of two collectives runs them in the same order and no two workers can
// wait on each other's different collectives.
//
// Thread-safety: none; the worker's pipeline thread only.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "gt/instruction.h"

namespace gt {

class FairQueue {
 public:
  // One client's queue and its books.
  class Lane {
   public:
    ClientId client() const { return client_; }
    double weight() const { return weight_; }
    double virtual_time() const { return virtual_time_; }
    bool empty() const { return head_ == entries_.size(); }
    size_t size() const { return entries_.size() - head_; }

   private:
    friend class FairQueue;
    struct Entry {
      Instruction inst;
      uint64_t ticket = 0;  // a collective's place in arrival order; 0 for any other op
    };
    ClientId client_ = 0;
    double weight_ = 1.0;
    double virtual_time_ = 0.0;
    std::vector<Entry> entries_;  // entries_[head_..] wait; the slots before are spent
    size_t head_ = 0;
  };

  // Appends `inst` to its client's lane (made on first use, weight 1).
  void Push(Instruction&& inst);

  // Sets `client`'s weight. REQUIRES: weight > 0 and finite (the dispatcher's
  // manifest checked it).
  void SetWeight(ClientId client, double weight);

  // The lane to serve next: the least virtual time among lanes whose head
  // may run. nullptr when no instruction waits (never while one does: the
  // oldest collective's lane can always run).
  Lane* Next();

  // The head of `lane` when it may run now; nullptr when the lane is empty
  // or its head is a collective that must wait for an older one.
  const Instruction* Runnable(const Lane& lane) const;

  // Removes and returns the head of `lane`. REQUIRES: Runnable(lane).
  Instruction Pop(Lane& lane);

  // Adds `seconds` of execution to `lane`'s virtual time (over its weight).
  void Charge(Lane& lane, double seconds);

  // Drops `client`'s lane once it is empty (its session ended); a later
  // instruction of it would make a fresh one.
  void Forget(ClientId client);

  // Instructions of `client` waiting.
  size_t Waiting(ClientId client) const;
  // Instructions waiting, all lanes together.
  size_t queued() const { return queued_; }
  bool empty() const { return queued_ == 0; }
  // Lanes with instructions waiting.
  size_t active_lanes() const { return active_.size(); }

 private:
  Lane& LaneFor(ClientId client);
  void Activate(Lane& lane);
  void Deactivate(Lane& lane);

  std::unordered_map<ClientId, Lane> lanes_;  // node-based: Lane addresses stay valid
  std::vector<Lane*> active_;                 // lanes with instructions waiting
  Lane* last_pushed_ = nullptr;               // consecutive instructions are mostly one client's
  double clock_ = 0.0;                        // virtual time of the lane served last
  uint64_t tickets_issued_ = 0;               // collectives pushed
  uint64_t tickets_run_ = 0;                  // collectives popped (always in ticket order)
  size_t queued_ = 0;
};

}  // namespace gt
