// IdMap: tensor id -> placeholder, for the one sequence a Builder is building.
//
// Open addressing with linear probing and a generation per slot, so that
// Clear() is O(1) and an entry costs no allocation: std::unordered_map
// allocated and freed a node for every tensor of every training step, which
// was most of what building a step's wiring cost.
//
// Thread-safety: none; owned by one Builder.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "gt/instruction.h"

namespace gt::sequence {

class IdMap {
 public:
  IdMap() { slots_.resize(kInitialSlots); }

  // The value of `id`, or null when absent.
  TensorId* Find(TensorId id) {
    for (size_t i = Home(id);; i = (i + 1) & Mask()) {
      Slot& s = slots_[i];
      if (s.generation != generation_) return nullptr;
      if (s.key == id) return &s.value;
    }
  }
  // The value of `id`, set to `value` first when absent; whether it was.
  std::pair<TensorId*, bool> TryEmplace(TensorId id, TensorId value) {
    if (2 * (size_ + 1) > slots_.size()) Grow();
    for (size_t i = Home(id);; i = (i + 1) & Mask()) {
      Slot& s = slots_[i];
      if (s.generation != generation_) {
        s = Slot{id, value, generation_};
        ++size_;
        return {&s.value, true};
      }
      if (s.key == id) return {&s.value, false};
    }
  }
  // Removes `id` if present (shifting later entries of its probe run back,
  // so that no lookup stops early at the hole).
  void Erase(TensorId id) {
    size_t hole = Home(id);
    for (;; hole = (hole + 1) & Mask()) {
      if (slots_[hole].generation != generation_) return;
      if (slots_[hole].key == id) break;
    }
    for (size_t next = (hole + 1) & Mask(); slots_[next].generation == generation_; next = (next + 1) & Mask()) {
      const size_t home = Home(slots_[next].key);
      // `next` may fill the hole unless its home lies cyclically in (hole, next].
      const bool stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next);
      if (stays) continue;
      slots_[hole] = slots_[next];
      hole = next;
    }
    slots_[hole].generation = generation_ - 1;
    --size_;
  }
  void Clear() {
    size_ = 0;
    if (++generation_ == 0) {  // wrapped: stale slots could look current
      for (Slot& s : slots_) s.generation = 0;
      generation_ = 1;
    }
  }

 private:
  static constexpr size_t kInitialSlots = 256;
  struct Slot {
    TensorId key = 0;
    TensorId value = 0;
    uint32_t generation = 0;  // occupied when equal to the map's
  };

  size_t Mask() const { return slots_.size() - 1; }
  size_t Home(TensorId id) const { return (id * 0x9e3779b97f4a7c15ull) >> 20 & Mask(); }
  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    const uint32_t live = generation_;
    size_ = 0;
    for (const Slot& s : old)
      if (s.generation == live) TryEmplace(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
  uint32_t generation_ = 1;
};

}  // namespace gt::sequence
