#include "dispatcher/client_protocol.h"

#include <algorithm>
#include <optional>

#include "gt/log.h"
#include "gt/op_attrs.h"
#include "ir/codec.h"

namespace gt {

ClientProtocol::ClientProtocol(const HostManifest& manifest, HostMetrics& metrics, ClientTable& clients,
                               Pipeline& pipeline, PeerOutbox& outbox, StatsFanout& stats,
                               const DispatcherEvents& events)
    : manifest_(manifest),
      metrics_(metrics),
      clients_(clients),
      pipeline_(pipeline),
      outbox_(outbox),
      stats_(stats),
      events_(events),
      admission_(manifest.limits,
                 metrics.ForQuota("live_tensors", static_cast<double>(manifest.limits.max_live_tensors)),
                 metrics.ForQuota("inflight", static_cast<double>(manifest.limits.max_inflight))),
      sessions_quota_(
          metrics.ForQuota("sessions_per_key", static_cast<double>(manifest.limits.max_sessions_per_key))) {}

void ClientProtocol::Handle(WireMessage& msg, const std::string& peer_key) {
  const wire::Envelope& env = msg.envelope;
  const std::string& route = msg.routing_id;
  switch (env.kind()) {
    case wire::Envelope::HELLO:
      // The token names the client's heartbeats: without them a client
      // that vanished would never be cleaned up.
      if (env.token() == 0) return outbox_.Reject(route, InvalidArgument("HELLO carries no heartbeat token"));
      return Hello(route, env.token(), peer_key);
    case wire::Envelope::BATCH:
      // Nothing is kept for a peer that never said HELLO; a session is
      // the key's that opened it, whatever routing id a peer claims.
      if (ClientState* c = clients_.FindByRoute(route)) {
        if (c->key != peer_key) return outbox_.Reject(route, InvalidArgument("this session belongs to another key"));
        return HandleBatch(*c, msg);
      }
      if (std::optional<std::string> why = clients_.ClosedWhy(route))
        return outbox_.Reject(route, Unavailable("this client's session was closed (" + *why +
                                                 "); its tensors are gone: connect again"));
      return outbox_.Reject(route, FailedPrecondition("no session: a client says HELLO before its first batch"));
    case wire::Envelope::HEARTBEAT:
      if (ClientState* c = clients_.FindByToken(env.token())) c->last_seen = ClientTable::Clock::now();
      return;
    case wire::Envelope::BYE:
      if (ClientState* c = clients_.FindByRoute(route)) Drop(c->id, kGoodbye);
      return;
    case wire::Envelope::RESUME:
      return Resume(msg, peer_key);
    case wire::Envelope::STATS:
      // Only a session's: answers to a peer that never said HELLO would
      // be queued for nobody.
      if (!clients_.FindByRoute(route))
        return outbox_.Reject(route, FailedPrecondition("no session: a client says HELLO before STATS"));
      return stats_.Begin(route, env);
    default:
      return outbox_.Reject(route, InvalidArgument("unexpected message kind " + wire::Envelope::Kind_Name(env.kind()) +
                                                   " from a client"));
  }
}

// A repeated HELLO on an open session changes nothing.
void ClientProtocol::Hello(const std::string& route, uint64_t token, const std::string& key) {
  // Under its user's own key set every session is that user's: no per-key cap.
  const int64_t cap = manifest_.security.user_key_set ? 0 : manifest_.limits.max_sessions_per_key;
  const bool new_session = clients_.FindByRoute(route) == nullptr;
  if (new_session && ResumePendingOn(route))
    return outbox_.Reject(route, FailedPrecondition("this connection's RESUME is waiting: no HELLO on it"));
  if (new_session && cap > 0 && static_cast<int64_t>(clients_.SessionsOf(key)) >= cap) {
    if (sessions_quota_.refusals) sessions_quota_.refusals->Increment();
    return outbox_.Reject(route, ResourceExhausted("this client key already holds " + std::to_string(cap) +
                                                   " sessions, its limit (limits.max_sessions_per_key): "
                                                   "close one first"));
  }
  ClientFor(route, token).key = key;
}

ClientState& ClientProtocol::ClientFor(const std::string& route, uint64_t token) {
  bool created = false;
  ClientState& c = clients_.ForRoute(route, token, &created);
  if (created) {
    metrics_.clients_connected.Increment();
    GT_LOG(kDispatcher, manifest_.id << ": client " << c.id << " connected");
    if (events_.enabled()) events_.Record(HostEventKind::kConnect, "client " + std::to_string(c.id), "client", "");
  }
  return c;
}

void ClientProtocol::HandleBatch(ClientState& c, WireMessage& msg) {
  GT_LOG(kDispatcher, manifest_.id << ": batch of " << msg.envelope.instructions_size() << " instructions from client "
                                   << c.id);
  AdmitAll(c, msg);
  pipeline_.EndBatch();
}

namespace {

// While `c` replays after a RESUME: whether `wi` already reached the
// workers (seq <= replay_through) and is dropped. Syncs, fetches and
// inspects are answered again: the client waits for them. The first later
// seq ends the replay.
bool AlreadyRan(ClientState& c, const wire::Instruction& wi) {
  if (wi.seq() > c.replay_through) {
    c.replay_through = 0;
    return false;
  }
  const Op op = static_cast<Op>(wi.op());
  return op != Op::kSync && op != Op::kFetch && op != Op::kInspect;
}

}  // namespace

void ClientProtocol::AdmitAll(ClientState& c, WireMessage& msg) {
  for (const wire::Instruction& wi : msg.envelope.instructions()) {
    if (c.replay_through != 0 && AlreadyRan(c, wi)) continue;
    c.last_seq = std::max(c.last_seq, wi.seq());
    Result<Instruction> inst = DecodeInstruction(wi, msg.frames);
    const OpRef ref{c.id, wi.seq(), wi.op() < static_cast<uint32_t>(Op::kCount) ? static_cast<Op>(wi.op()) : Op::kSync};
    if (!inst.ok()) {
      metrics_.malformed_messages.Increment();
      wire::OpError e = MakeOpError(ref, inst.status(), manifest_.id);
      e.set_op(wi.op());  // as sent: the client calls a code it does not know "op N", not the sync of `ref`
      c.errors.push_back(std::move(e));
      continue;
    }
    inst->client = c.id;  // the namespace is the connection's, whatever the message says
    if (Status s = admission_.Admit(c, *inst); !s.ok()) {
      RecordError(ref, s);
      continue;
    }
    if (inst->op == Op::kDefineUnit || inst->op == Op::kRunUnit) ClientTable::KeyUnitByContent(c, *inst);
    if (placer_) placer_(c, *inst);
    if (hold_) backlog_.push_back(std::move(*inst));
    else pipeline_.Push(std::move(*inst));
  }
}

void ClientProtocol::RecordError(const OpRef& ref, const Status& status) {
  ClientState* c = clients_.Find(ref.client);
  if (!c) {
    log::Warn("dispatcher", manifest_.id + ": " + status.ToString());  // a departed client's, per message
    return;
  }
  c->errors.push_back(MakeOpError(ref, status, manifest_.id));
}

void ClientProtocol::Drop(ClientId id, std::string_view why) {
  if (!clients_.Find(id)) return;
  if (events_.enabled()) events_.Record(HostEventKind::kDisconnect, "client " + std::to_string(id), "client", why);
  pipeline_.Push(MakeDropClient(id));
  pipeline_.EndBatch();
  if (why == kGoodbye) clients_.Erase(id);
  else clients_.Close(id, "dispatcher " + manifest_.id + ": " + std::string(why));
  GT_LOG(kDispatcher, manifest_.id << ": client " << id << " disconnected");
  metrics_.clients_connected.Decrement();
}

void ClientProtocol::DropSilent(ClientTable::Clock::time_point now, std::chrono::milliseconds timeout) {
  for (ClientId id : clients_.Silent(now, timeout)) {
    metrics_.heartbeats_missed.Increment();
    Drop(id, "no heartbeat for " + std::to_string(timeout.count()) + " ms");
  }
}

void ClientProtocol::DropUnread() {
  for (ClientId id : outbox_.TakeUnread())
    Drop(id, "it left " + std::to_string(PeerOutbox::kQueueMessages) + " replies unread");
}

void ClientProtocol::ReleaseBacklog() {
  hold_ = false;
  std::deque<Instruction> pending;
  pending.swap(backlog_);
  for (Instruction& inst : pending)
    if (clients_.Find(inst.client)) pipeline_.Push(std::move(inst));  // a client gone meanwhile is skipped
  pipeline_.EndBatch();
}

}  // namespace gt
