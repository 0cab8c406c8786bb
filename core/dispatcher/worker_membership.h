// The dispatcher's worker membership: workers registering (REGISTER on the
// work connection, ATTACH of a control connection under the REGISTER's
// token, wire.proto), what they send back (heartbeats, SYNC_ACK, DATA,
// STATS_REPLY, BYE), and their loss: a BYE, a closed work connection,
// missed heartbeats, a send that cannot reach them, or a replacement under
// the same id.
//
// A loss is told to the stages first (a membership instruction naming the
// lost worker: the router's error to each client names the tensors the
// stages placed there), then to the router and the STATS fanout. A loss
// found while flushing, inside a pipeline pass, waits for EndPass().
//
// Thread-safety: the dispatcher's thread.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <utility>

#include "dispatcher/client_table.h"
#include "dispatcher/dispatcher_events.h"
#include "dispatcher/peer_outbox.h"
#include "dispatcher/router.h"
#include "dispatcher/session_resume.h"
#include "dispatcher/stats_fanout.h"
#include "dispatcher/sync_tracker.h"
#include "dispatcher/worker_registry.h"
#include "host/host_metrics.h"
#include "host/manifest.h"
#include "host/pipeline.h"
#include "net/transport.h"

namespace gt {

class WorkerMembership {
 public:
  // What membership needs from the socket loop and the client protocol.
  struct Hooks {
    // Reads the socket's pending connection closes (ConnectionClosed for
    // each) before a new connection is taken as a worker's: its fd may be
    // a closed one's.
    std::function<void()> read_closes;
    // The first worker registered (after the stages heard of it).
    std::function<void()> on_first_worker;
    // A worker rejoined with an inventory: RESUMEs waiting for it may go on.
    std::function<void()> on_rejoined;
  };

  // REQUIRES: every reference outlives this object.
  WorkerMembership(const HostManifest& manifest, HostMetrics& metrics, WorkerRegistry& workers, ClientTable& clients,
                   SyncTracker& syncs, StatsFanout& stats, Router& router, Pipeline& pipeline, PeerOutbox& outbox,
                   const DispatcherEvents& events, Hooks hooks);

  // REGISTER from a connection no worker holds: the worker gets the next
  // index and a WELCOME. A live worker under the same id that has missed
  // two heartbeats is replaced (a restart not yet past its timeout).
  // `peer_ip` ("" unless tcp) and `fd` name the connection, `key` the
  // CURVE key it proved ("" without keys).
  // A REGISTER with `rejoining` (a worker that outlived its dispatcher,
  // worker_rejoin.cc) takes back its old index unless a live worker holds
  // it: one that claimed that index the same way -> refused (two workers
  // claim one identity); one that registered afresh (or was moved) ->
  // the rejoining worker gets the next new index. Its inventory goes to
  // the ResumeBook; sessions this dispatcher cannot give back (already
  // open here, refused by the book) are freed on the worker. A later
  // rejoining REGISTER on its own connection completes the inventory of
  // sessions it reported `running`.
  void Register(const std::string& route, const wire::Envelope& env, const std::string& peer_ip, int fd,
                const std::string& key);
  // Where rejoining workers' inventories go (null: every session they name
  // is freed on them). REQUIRES: outlives this object.
  void set_resume_book(ResumeBook* book) { resume_ = book; }
  // Frees on their workers the sessions no RESUME claimed within the grace.
  void DropUnclaimed(WorkerRegistry::Clock::time_point now);
  // ATTACH: a registered worker's control connection, in place of any it
  // had; it must show the REGISTER's token and, with keys, the same key. A
  // route that holds a client session cannot become a worker's.
  void Attach(const std::string& route, const wire::Envelope& env, int fd, const std::string& key);
  // A heartbeat carrying a worker's token from a connection no worker
  // holds: ZeroMQ reconnected that worker's control connection (attached
  // again), or this dispatcher lost the worker (sent the lost notice: it
  // starts afresh rather than live on unheard). False: not a worker's (maybe
  // a client's).
  bool HandleStrayHeartbeat(const WireMessage& msg, int fd, const std::string& key);
  // A message from worker `w`'s connection.
  void Handle(size_t w, WireMessage& msg);

  // The connection with file descriptor `fd` closed. A worker is lost with
  // its work connection; its control connection alone closing loses only
  // the heartbeat and STATS path (on a graceful stop it may close before
  // the BYE on the work connection is read).
  void ConnectionClosed(int fd);
  // Loses the workers silent for longer than the heartbeat timeout.
  void LoseSilent(WorkerRegistry::Clock::time_point now);
  // Sends each worker this pass's batch (Router::EndBatch); a worker that
  // cannot be reached is lost.
  void Flush();
  // Between pipeline passes: reports the losses found inside one, and
  // announces a changed membership to the stages.
  void EndPass();

 private:
  void Lost(size_t w, const std::string& why);
  void Welcome(size_t index, const std::string& route, const std::string& peer_ip);
  void TakeInventory(size_t w, const wire::Envelope& env);
  void CompleteInventory(size_t w, const wire::Envelope& env);
  void DropOn(size_t w, ClientId client, const std::string& why);
  void ReportLost();
  void Announce();
  void ForwardData(WireMessage& msg);

  const HostManifest& manifest_;
  HostMetrics& metrics_;
  WorkerRegistry& workers_;
  ClientTable& clients_;
  SyncTracker& syncs_;
  StatsFanout& stats_;
  Router& router_;
  Pipeline& pipeline_;
  PeerOutbox& outbox_;
  const DispatcherEvents& events_;
  Hooks hooks_;
  ResumeBook* resume_ = nullptr;
  bool ever_had_worker_ = false;
  bool changed_ = false;   // announce the live workers to the stages
  bool flushing_ = false;  // inside Flush, so inside a pipeline pass
  std::deque<std::pair<size_t, std::string>> lost_unreported_;  // lost workers the stages and router have not heard of
};

}  // namespace gt
