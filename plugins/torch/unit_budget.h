// What compiled units cost a worker, and who pays (issue 39): the
// bookkeeping behind the torch backend's unit cache budget
// (unit_cache_mib) and the units' share of a client's max_client_mib.
//
// A unit held by the backend has two parts:
//   - its template (the define_unit payload), kept as long as any client
//     that defined it has a session: small, and what a run needs to
//     recompile the rest;
//   - its compiled state (plan, folded constants, graphs), which may be
//     evicted, least recently run first, and is rebuilt from the template on
//     the next run (UnitExecutor does both).
// The cache's total (templates plus compiled states) stays within the
// budget: a definition that cannot fit even after every compiled state is
// evicted is refused. Each unit is charged, whole, to one client that
// defined it (the first; when that one leaves, the next); a unit no
// remaining client defined is forgotten when the last one's session ends.
//
// No LibTorch here. Thread-safety: none (the worker's pipeline thread).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gt/instruction.h"

namespace gt::torch_backend {

class UnitBudget {
 public:
  // `limit_bytes`: the budget; 0: none.
  explicit UnitBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}

  uint64_t limit() const { return limit_; }
  // Bytes held now: every template and every compiled state.
  uint64_t held() const { return held_; }
  bool Holds(uint64_t key) const { return units_.count(key) != 0; }

  // Whether a new unit charged `template_bytes` + `compiled_bytes` fits once
  // compiled states are evicted: an error message naming the limit if not.
  std::optional<std::string> Refusal(uint64_t template_bytes, uint64_t compiled_bytes) const;
  // Records unit `key` defined by `client`, charged to it. REQUIRES: not held.
  void Add(uint64_t key, ClientId client, uint64_t template_bytes);
  // Another client defined a unit already held: it shares it from now on.
  void AddDefiner(uint64_t key, ClientId client);
  // Unit `key` has (again) a compiled state of `bytes`, and was just used.
  void SetCompiled(uint64_t key, uint64_t bytes);
  // Unit `key` ran: the last to be evicted.
  void Touch(uint64_t key);
  // The units whose compiled state must go, least recently used first, for
  // the total to fit the budget with `room` bytes more; `keep` is never one.
  // Their compiled bytes are no longer counted.
  std::vector<uint64_t> Evict(uint64_t room, std::optional<uint64_t> keep);
  // `client`'s session ended: the units only it defined, now forgotten.
  std::vector<uint64_t> DropClient(ClientId client);
  // Bytes of the units charged to `client` (counted in its max_client_mib).
  uint64_t ChargedTo(ClientId client) const;

 private:
  struct Entry {
    uint64_t template_bytes = 0;
    uint64_t compiled_bytes = 0;  // 0: evicted, or not compiled yet
    std::vector<ClientId> definers;  // the first is charged
    std::list<uint64_t>::iterator recent;
  };
  uint64_t limit_;
  uint64_t held_ = 0;
  uint64_t templates_ = 0;  // the part of held_ no eviction frees
  std::unordered_map<uint64_t, Entry> units_;
  std::list<uint64_t> recent_;  // least recently used first
  std::unordered_map<ClientId, uint64_t> charged_;
};

}  // namespace gt::torch_backend
