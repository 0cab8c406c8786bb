#include "dispatcher/worker_membership.h"

#include <algorithm>
#include <iostream>
#include <optional>

#include "gt/log.h"
#include "gt/op_attrs.h"
#include "host/worker_lost_notice.h"

namespace gt {
namespace {

// A rejoining worker's index must be one a dispatcher could have given:
// the registry fills every slot below it (more workers than this need
// more than one dispatcher: docs/SCALING.md).
constexpr uint32_t kMaxRejoinIndex = 4096;

constexpr const char* kConnectionClosed = "its connection closed";

}  // namespace

WorkerMembership::WorkerMembership(const HostManifest& manifest, HostMetrics& metrics, WorkerRegistry& workers,
                                   ClientTable& clients, SyncTracker& syncs, StatsFanout& stats, Router& router,
                                   Pipeline& pipeline, PeerOutbox& outbox, const DispatcherEvents& events, Hooks hooks)
    : manifest_(manifest),
      metrics_(metrics),
      workers_(workers),
      clients_(clients),
      syncs_(syncs),
      stats_(stats),
      router_(router),
      pipeline_(pipeline),
      outbox_(outbox),
      events_(events),
      hooks_(std::move(hooks)) {}

void WorkerMembership::Register(const std::string& route, const wire::Envelope& env, const std::string& peer_ip,
                                int fd, const std::string& key) {
  // The close of a connection whose fd this one reuses is queued before
  // this connection's accept, but may have arrived during this drain:
  // read it now, or it would be taken for this worker's. Losses found
  // while flushing are reported before a replacement takes their index.
  hooks_.read_closes();
  if (!lost_unreported_.empty()) ReportLost();
  // An open connection's fd is unique: a live worker still on this one
  // had its connection closed (its monitor event was lost).
  ConnectionClosed(fd);
  std::optional<size_t> at;
  bool moved = false;  // a rejoining worker given a new index
  if (env.rejoining()) {
    if (env.worker_index() >= kMaxRejoinIndex) {
      const std::string why = "worker '" + env.name() + "' rejoins as #" + std::to_string(env.worker_index()) +
                              ", beyond any index a dispatcher gives (" + std::to_string(kMaxRejoinIndex) + ")";
      log::Warn("dispatcher", manifest_.id + ": " + why);
      return outbox_.Reject(route, InvalidArgument(why));
    }
    at = env.worker_index();
    if (workers_.IsAlive(*at)) {
      const WorkerState& holder = workers_.at(*at);
      if (holder.token == env.token() && holder.key == key) {
        Lost(*at, "registered again on a new connection");  // itself, after a lost connection this side missed
        if (!lost_unreported_.empty()) ReportLost();
      } else if (holder.claimed_index) {
        // Both say they were #at before the restart: one of them is not.
        const std::string why = "worker '" + env.name() + "' rejoins as #" + std::to_string(*at) +
                                ", which live worker '" + holder.name +
                                "' claimed first: refused (two workers, one identity)";
        log::Warn("dispatcher", manifest_.id + ": " + why);
        return outbox_.Reject(route, FailedPrecondition(why));
      } else {
        // A worker that registered afresh (or was moved) took the index
        // first: no identity conflict. The rejoining one gets a new index;
        // its inventory is taken there.
        log::Warn("dispatcher", manifest_.id + ": worker '" + env.name() + "' rejoins as #" + std::to_string(*at) +
                                    ", which worker '" + holder.name + "' took first: it gets index #" +
                                    std::to_string(workers_.size()) + ", its tensors kept");
        at = workers_.size();
        moved = true;
      }
    }
  } else if (std::optional<size_t> old = workers_.FindLiveByName(env.name())) {
    // One that is heard from keeps its place (two workers may share an id,
    // e.g. the default "worker").
    if (WorkerRegistry::Clock::now() - workers_.at(*old).last_seen >
        2 * std::chrono::milliseconds(manifest_.heartbeat_interval_ms))
      Lost(*old, "replaced by a new registration under its id");
  }
  const size_t index =
      workers_.Register(route, env.name(), env.metrics_endpoint(), peer_ip, fd, env.token(), key, at, !moved);
  Welcome(index, route, peer_ip);
  if (env.rejoining()) TakeInventory(index, env);
}

void WorkerMembership::Welcome(size_t index, const std::string& route, const std::string& peer_ip) {
  GT_LOG(kDispatcher, manifest_.id << ": worker " << workers_.at(index).name << " registered as #" << index
                                   << (peer_ip.empty() ? "" : " from " + peer_ip));
  metrics_.workers_connected.Increment();
  if (events_.enabled())
    events_.Record(HostEventKind::kConnect, "worker " + workers_.at(index).name, "worker",
                   "index=" + std::to_string(index) + (peer_ip.empty() ? "" : " from=" + peer_ip));
  wire::Envelope welcome;
  welcome.set_kind(wire::Envelope::WELCOME);
  welcome.set_worker_index(static_cast<uint32_t>(index));
  outbox_.Send(route, welcome, {});
  if (!ever_had_worker_) {
    ever_had_worker_ = true;
    Announce();
    hooks_.on_first_worker();
  }
  changed_ = true;
}

// Each session of a rejoining worker's inventory waits in the ResumeBook
// for its client, unless it cannot be given back: then it is freed there.
void WorkerMembership::TakeInventory(size_t w, const wire::Envelope& env) {
  const auto now = WorkerRegistry::Clock::now();
  for (const wire::SessionInventory& inventory : env.inventory()) {
    const ClientId client = inventory.session().client();
    if (client == 0 || client >= ClientTable::kMaxClientId) {
      DropOn(w, client, "no dispatcher gives that client id");
      continue;
    }
    if (clients_.Find(client)) {
      // Open here: the worker was declared lost (its clients were told) and
      // came back, or it is late and its session resumed without it.
      DropOn(w, client, "its session is open here without this worker's tensors");
      continue;
    }
    Status taken = resume_ ? resume_->Add(w, inventory, now) : FailedPrecondition("this dispatcher resumes no sessions");
    if (!taken.ok()) {
      DropOn(w, client, taken.message());
      continue;
    }
    clients_.ReserveThrough(client);
  }
  Flush();
  GT_LOG(kDispatcher, manifest_.id << ": worker " << workers_.at(w).name << " rejoined with "
                                   << env.inventory_size() << " client sessions");
  if (hooks_.on_rejoined) hooks_.on_rejoined();
}

// Only sessions the book still has from `w` are updated: one resumed
// meanwhile, or freed on the worker, is no longer the inventory's to change.
void WorkerMembership::CompleteInventory(size_t w, const wire::Envelope& env) {
  if (!resume_) return;
  const auto now = WorkerRegistry::Clock::now();
  size_t completed = 0;
  for (const wire::SessionInventory& inventory : env.inventory()) {
    const ClientId client = inventory.session().client();
    if (!resume_->Holds(w, client)) continue;
    if (Status taken = resume_->Add(w, inventory, now); !taken.ok()) DropOn(w, client, taken.message());
    else ++completed;
  }
  Flush();
  GT_LOG(kDispatcher, manifest_.id << ": worker " << workers_.at(w).name << " completed the inventory of "
                                   << completed << " client sessions");
  if (hooks_.on_rejoined) hooks_.on_rejoined();
}

void WorkerMembership::DropOn(size_t w, ClientId client, const std::string& why) {
  log::Warn("dispatcher", manifest_.id + ": worker " + workers_.at(w).name + " held tensors of client " +
                              std::to_string(client) + ", freed: " + why);
  workers_.Enqueue(w, MakeDropClient(client));
}

void WorkerMembership::DropUnclaimed(WorkerRegistry::Clock::time_point now) {
  if (!resume_ || resume_->empty()) return;
  std::vector<std::pair<size_t, ClientId>> unclaimed = resume_->TakeUnclaimed(now);
  for (const auto& [w, client] : unclaimed)
    if (workers_.IsAlive(w)) DropOn(w, client, "no client resumed its session within the reconnect grace");
  if (!unclaimed.empty()) Flush();
}

void WorkerMembership::Attach(const std::string& route, const wire::Envelope& env, int fd, const std::string& key) {
  // As in Register: closes queued before this connection's accept are read
  // first, and a live worker on this fd lost that connection.
  hooks_.read_closes();
  ConnectionClosed(fd);
  std::optional<size_t> w = workers_.FindByToken(env.token());
  if (!w || !workers_.IsAlive(*w) || workers_.at(*w).key != key)
    return outbox_.Reject(route, InvalidArgument("ATTACH names no registered worker"));
  if (clients_.FindByRoute(route))
    return outbox_.Reject(route, InvalidArgument("a client's connection cannot become a worker's"));
  workers_.AttachControl(*w, route, fd);
  workers_.Touch(*w);
  GT_LOG(kDispatcher, manifest_.id << ": worker " << workers_.at(*w).name << " attached its control connection");
}

bool WorkerMembership::HandleStrayHeartbeat(const WireMessage& msg, int fd, const std::string& key) {
  const uint64_t token = msg.envelope.token();
  if (token == 0 || clients_.FindByToken(token)) return false;
  std::optional<size_t> w = workers_.FindByToken(token);
  if (!w || workers_.at(*w).key != key) return false;
  if (workers_.IsAlive(*w)) {
    Attach(msg.routing_id, msg.envelope, fd, key);
    return true;
  }
  // Lost, yet alive (SIGCONT, a connection ZeroMQ reconnected): the lost
  // notice makes it start afresh and register again, empty (host/worker_lost_notice.h).
  outbox_.Send(msg.routing_id, MakeLostNotice(manifest_.id, workers_.at(*w).name, token), {});
  return true;
}

void WorkerMembership::Handle(size_t w, WireMessage& msg) {
  workers_.Touch(w);
  const wire::Envelope& env = msg.envelope;
  switch (env.kind()) {
    case wire::Envelope::HEARTBEAT:
      if (std::optional<WorkerLoad> load = LoadIn(env)) workers_.ReportLoad(w, load->queued, load->resident_bytes);
      return;
    case wire::Envelope::SYNC_ACK:
      if (ClientState* c = clients_.Find(env.client())) syncs_.OnAck(*c, w, env);
      return;  // else the client left meanwhile
    case wire::Envelope::DATA:
      return ForwardData(msg);
    case wire::Envelope::BYE:
      return Lost(w, std::string(kGoodbye));
    case wire::Envelope::REGISTER:
      // A rejoined worker that was still running what the old dispatcher
      // sent: the rest of its inventory (wire.proto SessionInventory.running).
      if (env.rejoining() && env.token() != 0 && env.token() == workers_.at(w).token) CompleteInventory(w, env);
      return;  // else a repeated registration changes nothing
    case wire::Envelope::ATTACH:
      return;
    case wire::Envelope::STATS_REPLY:
      return stats_.OnReply(w, env);
    default:
      metrics_.malformed_messages.Increment();
      log::Warn("dispatcher", manifest_.id + ": unexpected " + wire::Envelope::Kind_Name(env.kind()) +
                                  " from worker " + workers_.at(w).name);
  }
}

void WorkerMembership::ForwardData(WireMessage& msg) {
  ClientState* c = clients_.Find(msg.envelope.client());
  if (!c) return;
  msg.envelope.clear_client();
  outbox_.Send(c->route, msg.envelope, msg.frames);
}

// A connection's fd is reused by the next one accepted; the monitor queues
// the close before that accept, and the socket loop reads it before the
// socket (and Register again, for a close that came during a drain), so
// `fd` still names the closed connection's worker here.
void WorkerMembership::ConnectionClosed(int fd) {
  if (std::optional<size_t> w = workers_.FindByFd(fd)) Lost(*w, kConnectionClosed);
  else if (std::optional<size_t> c = workers_.FindByControlFd(fd)) workers_.DetachControl(*c);
}

void WorkerMembership::LoseSilent(WorkerRegistry::Clock::time_point now) {
  const auto timeout = std::chrono::milliseconds(manifest_.heartbeat_timeout_ms);
  for (size_t w : workers_.Silent(now, timeout)) {
    metrics_.heartbeats_missed.Increment();
    Lost(w, "missed heartbeats for " + std::to_string(manifest_.heartbeat_timeout_ms) + " ms");
  }
}

void WorkerMembership::Flush() {
  auto send = [this](const WorkerState& w) {
    GT_LOG(kDispatcher, manifest_.id << ": batch of " << w.outgoing.instructions_size() << " instructions to worker "
                                     << w.name);
    return outbox_.Send(w.route, w.outgoing, w.payloads);
  };
  flushing_ = true;
  for (size_t w : workers_.Flush(send)) Lost(w, "unreachable");
  flushing_ = false;
}

void WorkerMembership::EndPass() {
  // Announced here, outside any pipeline pass (a worker can be lost in the
  // middle of one).
  if (!lost_unreported_.empty()) ReportLost();
  if (changed_) {
    changed_ = false;
    Announce();
  }
}

void WorkerMembership::Lost(size_t w, const std::string& why) {
  outbox_.Forget(workers_.at(w).route);
  outbox_.Forget(workers_.at(w).control_route);
  if (!workers_.MarkLost(w)) return;
  if (resume_) resume_->ForgetWorker(w);
  metrics_.workers_connected.Decrement();
  GT_LOG(kDispatcher, manifest_.id << ": worker " << workers_.at(w).name << " disconnected (" << why << ")");
  if (events_.enabled()) events_.Record(HostEventKind::kDisconnect, "worker " + workers_.at(w).name, "worker", why);
  if (why != kGoodbye)
    std::cerr << "dispatcher " << manifest_.id << ": worker " << workers_.at(w).name << " lost (" << why << ")\n";
  lost_unreported_.emplace_back(w, why);
  if (!flushing_) ReportLost();
}

void WorkerMembership::ReportLost() {
  while (!lost_unreported_.empty()) {
    auto [w, why] = std::move(lost_unreported_.front());
    lost_unreported_.pop_front();
    std::vector<int64_t> live = workers_.LiveIndexes();
    // Not live (Register reports losses before a replacement takes an
    // index); erased all the same, as the announcement must not list it.
    std::erase(live, static_cast<int64_t>(w));
    pipeline_.Push(MakeMembership(live, LostWorker{static_cast<int>(w), workers_.at(w).name}));
    pipeline_.EndBatch();
    router_.OnWorkerLost(w, why);
    stats_.OnWorkerLost(w);
  }
}

// Tells the stages which workers are alive (the sharding modifier places
// tensors on them).
void WorkerMembership::Announce() {
  pipeline_.Push(MakeMembership(workers_.LiveIndexes()));
  pipeline_.EndBatch();
}

}  // namespace gt
