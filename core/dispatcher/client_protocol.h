// The dispatcher's client protocol: what it does with each message a client
// sends (wire.proto: HELLO, BATCH, HEARTBEAT, BYE, STATS), and the end of a
// client's session.
//
//  - HELLO opens a session on the connection, under the CURVE key the
//    connection proved; one key's sessions are capped
//    (limits.max_sessions_per_key), so that the per-session quotas bound
//    what a key holds.
//  - BATCH: each instruction is decoded, given the connection's client id
//    (never one the message names), admitted (admission.h) and pushed
//    through the stages. Until the first worker registers, admitted
//    instructions are held back (ReleaseBacklog), so that every stage error
//    names the client's own instruction.
//  - A session ends on BYE, on missed heartbeats, or when the client leaves
//    its replies unread (PeerOutbox); its drop goes through the stages (they
//    free what they keep for it) and reaches the workers from the router.
//
// Errors found here wait in the client's ClientState for its next sync.
//
// Thread-safety: the dispatcher's thread.
#pragma once

#include <functional>

#include <chrono>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "dispatcher/admission.h"
#include "dispatcher/client_table.h"
#include "dispatcher/dispatcher_events.h"
#include "dispatcher/peer_outbox.h"
#include "dispatcher/session_resume.h"
#include "dispatcher/stats_fanout.h"
#include "host/host_metrics.h"
#include "host/manifest.h"
#include "host/pipeline.h"
#include "net/transport.h"

namespace gt {

class ClientProtocol {
 public:
  // Registers the quota series (gt_client_limit{resource=...}) on `metrics`.
  // REQUIRES: every reference outlives this object.
  ClientProtocol(const HostManifest& manifest, HostMetrics& metrics, ClientTable& clients, Pipeline& pipeline,
                 PeerOutbox& outbox, StatsFanout& stats, const DispatcherEvents& events);

  // A message from a connection that is no worker's, other than REGISTER
  // and ATTACH. `peer_key`: the CURVE public key the connection proved (""
  // without keys). Anything unexpected is rejected to the sender.
  void Handle(WireMessage& msg, const std::string& peer_key);

  // An error of the client's instruction `ref`, reported at its next sync
  // (logged when the client is gone). The pipeline's error sink.
  void RecordError(const OpRef& ref, const Status& status);

  // Called for every admitted instruction before the stages see it (the
  // dispatcher names a new client's worker by load: PlaceByLoad).
  using Placer = std::function<void(ClientState& c, Instruction& inst)>;
  void set_placer(Placer placer) { placer_ = std::move(placer); }

  // Ends client `id`'s session (nothing when there is none). After
  // kGoodbye its connection is forgotten; otherwise remembered as closed
  // for `why`, which a client coming back is told.
  void Drop(ClientId id, std::string_view why);
  // Drops the clients that send heartbeats and were silent for `timeout`.
  void DropSilent(ClientTable::Clock::time_point now, std::chrono::milliseconds timeout);
  // Drops the clients the outbox found not reading.
  void DropUnread();

  // The first worker registered and the stages know it: the held
  // instructions go through the stages now, and later ones at once.
  void ReleaseBacklog();

  // RESUME (wire.proto; client_resume.cc): a session carried over a lost
  // connection (still open here: it moves to the new one) or a restarted
  // dispatcher (taken back from the workers' inventories, ResumeBook).
  // Answered RESUMED or ERROR, at once or when RetryResumes can.
  void Resume(WireMessage& msg, const std::string& peer_key);
  // Answers the waiting RESUMEs that can be answered now (a worker
  // rejoined, or their wait ran out).
  void RetryResumes(ClientTable::Clock::time_point now);
  // REQUIRES: outlives this object. Null: RESUME only moves open sessions.
  void set_resume_book(ResumeBook* book) { resume_book_ = book; }

 private:
  void Hello(const std::string& route, uint64_t token, const std::string& key);
  ClientState& ClientFor(const std::string& route, uint64_t token);
  void HandleBatch(ClientState& c, WireMessage& msg);
  // Decodes, admits and pushes `msg`'s instructions for `c` (no EndBatch).
  void AdmitAll(ClientState& c, WireMessage& msg);
  // A RESUME still waiting for the workers holding its session.
  struct PendingResume {
    WireMessage msg;
    ResumeClaim claim;
    ClientTable::Clock::time_point asked;
    size_t bytes = 0;  // what it holds here, counted against kPendingResumeBytes
  };
  // Bounds on the RESUMEs waiting for workers: any client key may send
  // one, so what they hold is capped like every other client input.
  static constexpr size_t kMaxPendingResumes = 64;
  static constexpr size_t kPendingResumeBytes = size_t{256} << 20;
  // Why `env` may not wait here (too many waiting, too large): OK if it may.
  Status CheckPendingRoom(const WireMessage& msg) const;
  bool ResumePendingOn(const std::string& route) const;
  // False: it waits on.
  bool TryResume(PendingResume& pending, ClientTable::Clock::time_point now);
  void Restore(PendingResume& pending, const ResumedSession& session);
  void AnswerResumed(const std::string& route, uint64_t received_seq);

  const HostManifest& manifest_;
  HostMetrics& metrics_;
  ClientTable& clients_;
  Pipeline& pipeline_;
  PeerOutbox& outbox_;
  StatsFanout& stats_;
  const DispatcherEvents& events_;
  Admission admission_;
  QuotaMetrics sessions_quota_;
  bool hold_ = true;                 // no worker yet: instructions wait in backlog_
  std::deque<Instruction> backlog_;  // client instructions that came before any worker
  Placer placer_;
  ResumeBook* resume_book_ = nullptr;
  std::vector<PendingResume> pending_resumes_;
};

}  // namespace gt
