// Taking sessions back after a dispatcher restart (docs/ARCHITECTURE.md,
// "Surviving a dispatcher restart"; wire.proto RESUME, SessionInventory).
//
// A dispatcher keeps no journal: what it needs lives at the edges. Workers
// that outlived the old dispatcher register again with an inventory per
// client session (Add); clients send RESUME with their session token and
// the tensors they hold (Decide). The book matches the two by the token's
// digest, which the old dispatcher told every worker (SessionDigest), and
// answers each RESUME once the workers holding its tensors are back:
//   - kResume: the ClientId the workers know, where each tensor lives, the
//     highest seq any worker received (replayed instructions up to it are
//     dropped), and the errors of acknowledgements the client never got;
//   - kWait: some of its tensors are not located yet, and its wait
//     (resume_wait_ms from the RESUME's arrival) is not over; or a worker
//     holding part of it still runs instructions of it that it received
//     before the restart (SessionInventory.running): as long as that
//     worker lives;
//   - kRefuse: why not, in words a user can act on (no token; an unknown or
//     expired session; another key's session; tensors no worker holds).
// A tensor a stage placed across workers (a piece tagged with its logical
// tensor and piece count, wire.proto PieceTag) counts as located once any
// piece is; the RESUME waits (within its wait) until every tagged tensor has
// all its pieces reported, and the stages judge the tags (Stage::Restore).
// Sessions no RESUME claims within the reconnect grace are handed back
// (TakeUnclaimed) so that their workers free them.
//
// Nothing here is trusted blindly: an inventory with a malformed tensor, or
// naming a ClientId another worker reported under a different session, is
// refused (the caller frees it on that worker and logs why).
//
// Thread-safety: the dispatcher's thread.
#pragma once

#include <chrono>
#include <deque>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gt/instruction.h"
#include "gt/status.h"
#include "wire.pb.h"

namespace gt {

// What the workers are told in place of a session's token: knowing it does
// not give the token (a one-way mix), yet a RESUME's token can be checked.
uint64_t SessionDigest(uint64_t token);

// The session a RESUME claims, as the client sent it.
struct ResumeClaim {
  uint64_t token = 0;
  std::string key;             // the CURVE key its connection proved ("" without keys)
  uint64_t answered_seq = 0;   // the seq of its last answered kSync
  uint64_t answered_sync = 0;  // that sync's id
  std::vector<wire::ResumeTensor> live;
};

// A session taken back: what the dispatcher rebuilds the client from.
struct ResumedSession {
  ClientId id = 0;             // 0: a fresh session (no worker held anything of it)
  uint64_t received_seq = 0;   // replayed instructions up to this seq already reached the workers
  std::unordered_map<TensorId, size_t> tensors;  // each tensor a worker holds: its worker
  std::set<TensorId> live;     // the client's live tensors located (whole, or pieces of)
  std::set<size_t> workers;    // every worker holding something of it
  std::vector<wire::HeldTensor> held;  // every tensor a worker holds, with its tag
  std::vector<size_t> held_on;         // held[i]'s worker
  std::vector<wire::OpError> errors;  // of acknowledgements the client never got
};

class ResumeBook {
 public:
  using Clock = std::chrono::steady_clock;

  // `wait`: how long a RESUME waits for the workers holding its tensors;
  // `grace`: how long an inventory's session waits for its RESUME.
  ResumeBook(std::chrono::milliseconds wait, std::chrono::milliseconds grace) : wait_(wait), grace_(grace) {}

  // Worker `w`'s inventory of one session, reported at `now`. OK: kept for
  // the session's RESUME. Else why it was refused (free it on `w`).
  Status Add(size_t w, const wire::SessionInventory& inventory, Clock::time_point now);
  // Worker `w` was lost: what it reported is gone with it.
  void ForgetWorker(size_t w);
  // Whether worker `w` reported a piece of `client`'s session that no
  // RESUME took yet (a completing inventory updates only those).
  bool Holds(size_t w, ClientId client) const;

  struct Verdict {
    enum Kind { kWait, kRefuse, kResume };
    Kind kind = kWait;
    Status why;              // kRefuse
    ResumedSession session;  // kResume
  };
  // `asked` is when the RESUME arrived. A kResume takes the session out of
  // the book.
  Verdict Decide(const ResumeClaim& claim, Clock::time_point asked, Clock::time_point now);

  // Sessions reported longer than the grace ago that no RESUME claimed:
  // (worker, client) pairs to free, taken out of the book.
  std::vector<std::pair<size_t, ClientId>> TakeUnclaimed(Clock::time_point now);

  // The highest ClientId any inventory named (new sessions start above).
  ClientId max_client() const { return max_client_; }
  bool empty() const { return sessions_.empty(); }

 private:
  struct Piece {
    size_t worker = 0;
    uint64_t received_seq = 0;
    uint64_t acked_sync = 0;
    std::vector<wire::OpError> errors;
    std::vector<wire::HeldTensor> tensors;
    bool running = false;  // the worker still runs what it received: a later inventory completes it
  };
  struct Unclaimed {
    wire::ClientSession session;
    Clock::time_point since;
    std::vector<Piece> pieces;
  };
  Verdict Resume(ClientId id, Unclaimed& s, const ResumeClaim& claim, bool waited_enough);
  // False while some tagged tensor of `s` lacks pieces (a worker holding
  // them may not be back yet).
  static bool PiecesComplete(const Unclaimed& s);

  std::chrono::milliseconds wait_;
  std::chrono::milliseconds grace_;
  std::unordered_map<ClientId, Unclaimed> sessions_;
  std::unordered_map<uint64_t, ClientId> by_digest_;
  // Digests of sessions the grace ended while a worker still ran them (for
  // the refusal's words), oldest first, at most kExpiredRunningKept.
  std::deque<uint64_t> expired_running_;
  static constexpr size_t kExpiredRunningKept = 1024;
  ClientId max_client_ = 0;
};

}  // namespace gt
