// What lets a worker outlive its dispatcher (docs/ARCHITECTURE.md,
// "Surviving a dispatcher restart"; wire.proto).
//
// RejoinBook (pipeline thread) keeps, per client session the dispatcher
// told this worker of, what a restarted dispatcher needs to take the
// session back: the session (ClientId, token digest, key), the highest seq
// of that client received, and the last SYNC_ACK's sync id and errors (the
// acknowledgement may have died with the dispatcher), and the tags a
// dispatcher stage gave the pieces it placed here (BATCH `tags`; a tag
// outlives its piece only until the stage forgets it, and the inventory
// reports only the tags of pieces held). With the backend's
// tensors it makes the inventory of a rejoining REGISTER. Kept per batch
// and per sync, never per instruction beyond a compare.
//
// DispatcherLink (I/O thread) reads the work connection's socket events:
// a connection that closed after a handshake means the dispatcher went
// away; its next handshake (ZeroMQ reconnects on its own, backing off to
// kReconnectMaxMs) means one is there again, and the worker registers
// anew. It also keeps the grace period's clock.
//
// Thread-safety: none; each class has one owning thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gt/backend.h"
#include "gt/instruction.h"
#include "wire.pb.h"

namespace gt {

class RejoinBook {
 public:
  // A BATCH from the dispatcher: the sessions it introduces, the highest
  // seq per client, and the clients it drops (kDropClient).
  void NoteBatch(const wire::Envelope& batch);
  // The placement tags of a BATCH (from NoteBatch).
  void NoteTags(const wire::Envelope& batch);
  // A SYNC_ACK this worker sends.
  void NoteAck(const wire::Envelope& ack);
  // Fills `reg` (a REGISTER) with `rejoining` and the inventory: every
  // session known (only those in `only`, when given), with the tensors of
  // `held` in its namespace, those in `running` marked so. Tensors of
  // clients with no session known are left out (no dispatcher could give
  // them back to their client): Orphans() names those clients.
  void FillInventory(const std::vector<HeldTensor>& held, wire::Envelope& reg,
                     const std::unordered_set<ClientId>* only = nullptr,
                     const std::unordered_set<ClientId>& running = {}) const;
  bool Knows(ClientId client) const { return sessions_.count(client) != 0; }
  // The clients in `held` with no session known.
  std::vector<ClientId> Orphans(const std::vector<HeldTensor>& held) const;
  // Every client this book knows a session of.
  std::vector<ClientId> Sessions() const;
  void Forget(ClientId client) { sessions_.erase(client); }
  void Clear() { sessions_.clear(); }

 private:
  struct Session {
    wire::ClientSession session;
    uint64_t received_seq = 0;
    uint64_t acked_sync = 0;
    std::vector<wire::OpError> errors;  // of that acknowledgement
    std::unordered_map<TensorId, wire::PieceTag> tags;  // by piece
  };
  std::unordered_map<ClientId, Session> sessions_;
};

// The worker's side of a rejoin (pipeline thread). A worker may still be
// running what the old dispatcher sent when a new one takes it: its
// REGISTER comes at once, marking the sessions with instructions still
// queued `running` (their tensors are not all made yet); once it ran every
// queued instruction of such a session, a second REGISTER on the same
// connection gives that session's full inventory. The new dispatcher makes
// the session's RESUME wait for it, so the sync in flight at the loss is
// answered with its real result (the client's replay asks again).
class Rejoiner {
 public:
  struct Hooks {
    std::function<std::vector<HeldTensor>()> held;   // the backend's tensors
    std::function<void(Instruction&&)> push;         // into the run queue
    std::function<size_t(ClientId)> waiting;         // instructions of a client still queued
    std::function<void(wire::Envelope&)> send;       // a REGISTER (name, token set) on the work connection
  };
  explicit Rejoiner(Hooks hooks) : hooks_(std::move(hooks)) {}

  RejoinBook& book() { return book_; }
  // Registers again under `index`: the inventory of every session, those
  // with instructions still queued marked running. Tensors of clients with
  // no session known are freed (no dispatcher can give them back).
  void Register(uint32_t index);
  // Once welcomed, each pass while some session is marked running: the
  // full inventory of those whose queue emptied, in one REGISTER.
  void Complete(uint32_t index);
  bool completing() const { return !running_.empty(); }

 private:
  wire::Envelope Registration(uint32_t index) const;

  Hooks hooks_;
  RejoinBook book_;
  std::unordered_set<ClientId> running_;  // marked running in the last registration, not completed yet
};

class DispatcherLink {
 public:
  using Clock = std::chrono::steady_clock;
  // libzmq backs its reconnects off up to this (ZMQ_RECONNECT_IVL_MAX).
  static constexpr int kReconnectMaxMs = 1000;

  explicit DispatcherLink(std::chrono::milliseconds grace) : grace_(grace) {}

  // A socket event of the work connection (HandshakeVerdict::kEvents).
  void Observe(uint16_t event, Clock::time_point now);

  // What the worker does now, asked once per pass of the I/O thread:
  // register again (a handshake after a lost one, or a registration no
  // dispatcher answered for 2 * kReconnectMaxMs: it was still starting),
  // and free everything (the grace ran out: once per loss).
  struct Actions {
    bool register_again = false;
    bool grace_over = false;
  };
  Actions Tick(Clock::time_point now, bool welcomed);

  // The dispatcher is gone and none welcomed this worker since.
  bool lost() const { return lost_since_.has_value(); }

 private:
  std::chrono::milliseconds grace_;
  bool connected_ = false;     // a handshake completed and that connection has not closed since
  bool register_due_ = false;  // a handshake after a loss
  bool grace_handled_ = false;
  Clock::time_point asked_{};  // when it last asked for a registration
  std::optional<Clock::time_point> lost_since_;
};

}  // namespace gt
