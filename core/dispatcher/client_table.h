// The dispatcher's clients: one namespace each, keyed by the connection
// they came in on (never by anything a message says), with the placement of
// every live tensor, the tensors that failed, the workers they touched, the
// errors waiting for their next sync point and their compiled units.
//
// Thread-safety: owned by the dispatcher's thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gt/failed_tensors.h"
#include "gt/instruction.h"
#include "wire.pb.h"

namespace gt {

// A sync point the client asked for that some worker has not acknowledged.
struct PendingSync {
  uint64_t sync_id = 0;
  uint64_t admitted_before = 0;  // the client's instructions admitted before this sync
  std::set<size_t> waiting;  // worker indexes that have not acknowledged yet
  std::vector<wire::OpError> errors;
};

struct ClientState {
  ClientId id = 0;
  std::string route;  // its ZeroMQ routing id
  uint64_t token = 0;  // heartbeat token; 0: the client sends no heartbeats
  std::chrono::steady_clock::time_point last_seen;
  int worker = -1;                               // where new tensors go
  std::unordered_map<TensorId, size_t> tensors;  // live tensor -> worker index
  FailedTensors failed;
  std::set<size_t> touched;                      // workers sent to since the last sync
  std::set<size_t> ever;                         // workers that may hold its tensors
  std::vector<wire::OpError> errors;             // found here, reported at the next sync
  std::deque<PendingSync> syncs;
  // The CURVE public key (Z85) the connection proved; "" without keys.
  std::string key;
  // The quotas' books, kept by Admission in the client's own terms (one
  // instruction, one tensor id, however a stage splits them): the ids it
  // holds, the instructions it sent and how many of those an answered sync
  // covers (the difference is in flight), and the count admitted before
  // each sync still on its way to the router, by the sync's seq.
  std::unordered_set<TensorId> live;
  uint64_t admitted = 0;
  uint64_t answered = 0;
  std::deque<std::pair<uint64_t, uint64_t>> admitted_before_sync;
  // A stage's notes (MakeLostTensorsNote) until the loss is reported: worker
  // -> the tensors it named, which the router knows by other ids.
  std::unordered_map<size_t, std::vector<TensorId>> lost_notes;
  std::unordered_map<uint64_t, Instruction> units;                      // kDefineUnit by unit key
  std::unordered_map<uint64_t, uint64_t> unit_keys;                     // the client's key -> content key
  std::unordered_map<size_t, std::unordered_set<uint64_t>> units_sent;  // worker -> keys it was sent
  // Surviving a lost dispatcher or connection (RESUME): the highest seq
  // admitted, and while the client replays, the seq up to which the
  // workers already have its instructions (0: not replaying).
  uint64_t last_seq = 0;
  uint64_t replay_through = 0;
};

class ClientTable {
 public:
  using Clock = std::chrono::steady_clock;

  // The client connected under `route`, created (with `token`) on its first
  // message; `*created` tells which.
  ClientState& ForRoute(const std::string& route, uint64_t token, bool* created);
  // A resumed session (RESUME) under ClientId `id` (0: the next free one),
  // on connection `route`. REQUIRES: no live client has `id` or `route`.
  ClientState& Adopt(ClientId id, const std::string& route, uint64_t token);
  // Moves client `id`'s session to connection `route` (its client lost the
  // old one). REQUIRES: `id` is live and `route` is nobody's.
  void Rebind(ClientId id, const std::string& route);
  // New sessions get ids above `id` (those workers still hold).
  void ReserveThrough(ClientId id) {
    if (id < kMaxClientId) next_id_ = std::max(next_id_, id + 1);
  }
  // The largest id a worker's inventory may name: ids are handed out from
  // 1 up, so a larger one is a lie, and taking it would let the counter
  // wrap onto live sessions.
  static constexpr ClientId kMaxClientId = ClientId{1} << 48;
  // nullptr when there is no such client (it left, or never was).
  ClientState* Find(ClientId id);
  ClientState* FindByRoute(const std::string& route);
  ClientState* FindByToken(uint64_t token);
  void Erase(ClientId id);
  // Erase(), remembering for the client's connection why the dispatcher
  // closed its session (`why`), so that a client that comes back from a
  // pause is told that, not that it never said HELLO. Bounded: the oldest
  // of kRememberedClosures are forgotten.
  void Close(ClientId id, const std::string& why);
  // Why the session on `route` was closed, if it was and is remembered.
  std::optional<std::string> ClosedWhy(const std::string& route) const;
  // The live sessions opened with CURVE public key `key`.
  size_t SessionsOf(const std::string& key) const;
  static constexpr size_t kRememberedClosures = 1024;
  // Clients with a heartbeat token not heard from for longer than `timeout`.
  std::vector<ClientId> Silent(Clock::time_point now, Clock::duration timeout) const;

  auto begin() { return clients_.begin(); }
  auto end() { return clients_.end(); }

  // Workers keep units by key for every client and refuse a different
  // template under a key they hold, so a unit a client defined itself (its
  // own compile stage) reaches them under a key made from its template's
  // bytes, not the key the client chose: two clients' templates never meet
  // under one key unless they are the same template (then shared). The
  // client's runs name its key; they are mapped through its definitions.
  static void KeyUnitByContent(ClientState& c, Instruction& define_or_run);

 private:
  ClientId next_id_ = 1;
  // The next id no session holds (never 0).
  ClientId TakeFreeId();
  std::unordered_map<ClientId, ClientState> clients_;
  std::unordered_map<std::string, ClientId> by_route_;
  std::unordered_map<uint64_t, ClientId> by_token_;
  // route -> why its session was closed, and the closure's number; the
  // routes in closing order with that number (a route that opened again
  // and closed anew is forgotten by its newer number, not its old one).
  std::unordered_map<std::string, std::pair<std::string, uint64_t>> closed_;
  std::deque<std::pair<std::string, uint64_t>> closed_order_;
  uint64_t closures_ = 0;
};

}  // namespace gt
