// A hash map from a 64-bit key (a tensor id, a storage's address) to a
// value, kept in one array: open addressing with linear probing, and
// deletion by shifting the entries behind back (no tombstones). Unlike
// std::unordered_map it allocates nothing per insert, only when it grows,
// so that storing and freeing a tensor costs no heap traffic: the torch
// backend does both for every op of a pipelined loop.
//
// Entries move when the map grows and when an entry before them is erased:
// a pointer from Find() is valid until the next Insert() or Erase().
//
// Thread-safety: none (one thread at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gt::torch_backend {

template <typename Value>
class FlatMap {
 public:
  // The entry of `key`, or null.
  Value* Find(uint64_t key) {
    if (slots_.empty()) return nullptr;
    for (size_t i = Home(key);; i = Next(i)) {
      Slot& slot = slots_[i];
      if (!slot.used) return nullptr;
      if (slot.key == key) return &slot.value;
    }
  }
  const Value* Find(uint64_t key) const { return const_cast<FlatMap*>(this)->Find(key); }

  // The entry of `key`, made from Value() when absent.
  Value& Open(uint64_t key) {
    if ((size_ + 1) * 4 > slots_.size() * 3) Grow();  // at most three quarters full
    size_t i = Home(key);
    for (; slots_[i].used; i = Next(i))
      if (slots_[i].key == key) return slots_[i].value;
    slots_[i].used = true;
    slots_[i].key = key;
    ++size_;
    return slots_[i].value;
  }

  // Removes `key` and returns its value (Value() when it was absent).
  Value Take(uint64_t key) {
    if (slots_.empty()) return Value();
    size_t hole = Home(key);
    for (;; hole = Next(hole)) {
      if (!slots_[hole].used) return Value();
      if (slots_[hole].key == key) break;
    }
    Value taken = std::move(slots_[hole].value);
    // Entries after the hole whose probe passed through it move back into it.
    for (size_t i = Next(hole); slots_[i].used; i = Next(i)) {
      const size_t home = Home(slots_[i].key);
      const bool passes_hole = hole <= i ? (home <= hole || home > i) : (home <= hole && home > i);
      if (!passes_hole) continue;
      slots_[hole].key = slots_[i].key;
      slots_[hole].value = std::move(slots_[i].value);
      hole = i;
    }
    slots_[hole].used = false;
    slots_[hole].value = Value();
    --size_;
    return taken;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Calls visit(key, value) for every entry, in no particular order.
  template <typename Visit>
  void ForEach(Visit&& visit) const {
    for (const Slot& slot : slots_)
      if (slot.used) visit(slot.key, slot.value);
  }

 private:
  struct Slot {
    uint64_t key = 0;
    bool used = false;
    Value value{};
  };

  // Fibonacci hashing: ids are dense and addresses aligned, so the low bits
  // alone would crowd a few slots.
  size_t Home(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  size_t Next(size_t i) const { return (i + 1) & (slots_.size() - 1); }

  void Grow() {
    std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(slots_.empty() ? 16 : slots_.size() * 2));
    shift_ = 64 - Log2(slots_.size());
    size_ = 0;
    for (Slot& slot : old)
      if (slot.used) Open(slot.key) = std::move(slot.value);
  }
  static unsigned Log2(size_t n) {
    unsigned bits = 0;
    while ((size_t{1} << bits) < n) ++bits;
    return bits;
  }

  std::vector<Slot> slots_;  // a power of two in size
  size_t size_ = 0;
  unsigned shift_ = 64;
};

}  // namespace gt::torch_backend
