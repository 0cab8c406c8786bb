// ClientProtocol's RESUME (client_protocol.h, wire.proto): a client whose
// dispatcher connection was lost carries its session over.
#include <algorithm>
#include <map>

#include "dispatcher/client_protocol.h"
#include "gt/log.h"

namespace gt {
namespace {

ResumeClaim ClaimOf(const wire::Envelope& resume, const std::string& key) {
  ResumeClaim claim;
  claim.token = resume.token();
  claim.key = key;
  claim.answered_seq = resume.seq();
  claim.answered_sync = resume.sync_id();
  claim.live.assign(resume.live().begin(), resume.live().end());
  return claim;
}

// What a waiting RESUME holds: the message as it came (envelope and data
// frames) and the claim's copy of its live list (about the envelope again).
size_t MessageBytes(const WireMessage& msg) { return msg.bytes + msg.envelope.ByteSizeLong(); }

// Where a resumed client's new whole tensors go: with most of its old ones.
int WorkerWithMost(const ResumedSession& session) {
  std::map<size_t, size_t> counts;
  for (const auto& [tensor, w] : session.tensors) ++counts[w];
  auto most = std::max_element(counts.begin(), counts.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  return most == counts.end() ? -1 : static_cast<int>(most->first);
}

// What the stages rebuild the client from (Stage::Restore).
RestoredSession StagesView(const ResumeClaim& claim, const ResumedSession& session) {
  RestoredSession out;
  out.client = session.id;
  out.held.reserve(session.held.size());
  for (size_t i = 0; i < session.held.size(); ++i) {
    const wire::HeldTensor& t = session.held[i];
    HeldPiece piece{static_cast<int32_t>(session.held_on[i]), t.id(), Shape(t.shape().begin(), t.shape().end()),
                    static_cast<DType>(t.dtype()), t.logical(), t.pieces(), t.placement()};
    out.held.push_back(std::move(piece));
  }
  for (const wire::ResumeTensor& t : claim.live)
    out.live.push_back({t.id(), Shape(t.shape().begin(), t.shape().end()), static_cast<DType>(t.dtype())});
  return out;
}

}  // namespace

void ClientProtocol::Resume(WireMessage& msg, const std::string& peer_key) {
  const wire::Envelope& env = msg.envelope;
  const std::string route = msg.routing_id;
  if (env.token() == 0) return outbox_.Reject(route, InvalidArgument("RESUME carries no session token"));
  if (clients_.FindByRoute(route))
    return outbox_.Reject(route, FailedPrecondition("this connection holds a session already: RESUME comes first on "
                                                    "a new connection"));
  if (ClientState* c = clients_.FindByToken(env.token())) {
    // Still open here: the client lost only its connection.
    if (c->key != peer_key) {
      log::Warn("dispatcher", manifest_.id + ": a RESUME named another key's session: refused");
      return outbox_.SendError(route, InvalidArgument("dispatcher " + manifest_.id +
                                                      " cannot resume the session: it belongs to another client key"));
    }
    outbox_.Forget(c->route);
    clients_.Rebind(c->id, route);
    c->replay_through = c->last_seq;
    GT_LOG(kDispatcher, manifest_.id << ": client " << c->id << " resumed its session on a new connection");
    return AnswerResumed(route, c->last_seq);
  }
  // A client retrying on yet another connection: only its latest RESUME is answered.
  std::erase_if(pending_resumes_, [&](const PendingResume& p) { return p.claim.token == env.token(); });
  if (ResumePendingOn(route))
    return outbox_.Reject(route, FailedPrecondition("this connection has a RESUME waiting already"));
  if (Status room = CheckPendingRoom(msg); !room.ok()) {
    log::Warn("dispatcher", manifest_.id + ": refused a RESUME: " + room.message());
    return outbox_.SendError(route, room);
  }
  ResumeClaim claim = ClaimOf(env, peer_key);  // before `msg` (and so `env`) moves
  const size_t bytes = MessageBytes(msg);
  PendingResume pending{std::move(msg), std::move(claim), ClientTable::Clock::now(), bytes};
  if (!TryResume(pending, pending.asked)) pending_resumes_.push_back(std::move(pending));
}

Status ClientProtocol::CheckPendingRoom(const WireMessage& msg) const {
  const int64_t max_live = manifest_.limits.max_live_tensors;
  if (max_live > 0 && msg.envelope.live_size() > max_live)
    return ResourceExhausted("its session names " + std::to_string(msg.envelope.live_size()) +
                             " live tensors, more than a session may hold (limits.max_live_tensors = " +
                             std::to_string(max_live) + ")");
  size_t held = MessageBytes(msg);
  for (const PendingResume& p : pending_resumes_) held += p.bytes;
  if (pending_resumes_.size() >= kMaxPendingResumes || held > kPendingResumeBytes)
    return ResourceExhausted("too many sessions are waiting to resume here (at most " +
                             std::to_string(kMaxPendingResumes) + ", 256 MiB): try again in a moment");
  return Status::Ok();
}

bool ClientProtocol::ResumePendingOn(const std::string& route) const {
  return std::any_of(pending_resumes_.begin(), pending_resumes_.end(),
                     [&](const PendingResume& p) { return p.msg.routing_id == route; });
}

void ClientProtocol::RetryResumes(ClientTable::Clock::time_point now) {
  std::erase_if(pending_resumes_, [&](PendingResume& p) { return TryResume(p, now); });
}

bool ClientProtocol::TryResume(PendingResume& pending, ClientTable::Clock::time_point now) {
  const std::string& route = pending.msg.routing_id;
  if (!resume_book_) {
    outbox_.SendError(route, NotFound("dispatcher " + manifest_.id + " cannot resume the session: it does not know it"));
    return true;
  }
  ResumeBook::Verdict verdict = resume_book_->Decide(pending.claim, pending.asked, now);
  if (verdict.kind == ResumeBook::Verdict::kWait) return false;
  if (verdict.kind == ResumeBook::Verdict::kRefuse) {
    log::Warn("dispatcher", manifest_.id + ": refused a RESUME: " + verdict.why.message());
    outbox_.SendError(route, Status(verdict.why.code(),
                                    "dispatcher " + manifest_.id + " cannot resume the session: " + verdict.why.message()));
    return true;
  }
  if (clients_.Find(verdict.session.id)) {  // Adopt's contract: never two sessions under one id
    log::Warn("dispatcher", manifest_.id + ": refused a RESUME: client " + std::to_string(verdict.session.id) +
                                " is a live session here");
    outbox_.SendError(route, FailedPrecondition("dispatcher " + manifest_.id +
                                                " cannot resume the session: its id is another live session's"));
    return true;
  }
  Restore(pending, verdict.session);
  return true;
}

// The client's namespace and books, rebuilt from what its workers hold;
// then its configs and unit definitions (as it sent them) go through the
// stages again, and the replay that follows skips what already ran.
void ClientProtocol::Restore(PendingResume& pending, const ResumedSession& session) {
  const std::string& route = pending.msg.routing_id;
  ClientState& c = clients_.Adopt(session.id, route, pending.claim.token);
  c.key = pending.claim.key;
  c.tensors = session.tensors;
  c.live.insert(session.live.begin(), session.live.end());
  c.ever = session.workers;
  c.touched = session.workers;  // the replayed sync asks each of them
  c.errors = session.errors;
  c.worker = WorkerWithMost(session);
  metrics_.clients_connected.Increment();
  if (events_.enabled()) events_.Record(HostEventKind::kConnect, "client " + std::to_string(c.id), "client", "resumed");
  // The stages' records first (a refusal ends the session: its tensors are
  // freed), then its configs and units as the client sent them.
  if (Status restored = pipeline_.Restore(StagesView(pending.claim, session)); !restored.ok()) {
    pipeline_.EndBatch();
    log::Warn("dispatcher", manifest_.id + ": refused a RESUME of client " + std::to_string(c.id) + ": " +
                                restored.message());
    outbox_.SendError(route, Status(restored.code(), "dispatcher " + manifest_.id +
                                                         " cannot resume the session: " + restored.message()));
    return Drop(c.id, kGoodbye);
  }
  AdmitAll(c, pending.msg);
  pipeline_.EndBatch();
  c.replay_through = session.received_seq;
  c.last_seq = std::max(c.last_seq, session.received_seq);
  GT_LOG(kDispatcher, manifest_.id << ": client " << c.id << " resumed with " << c.tensors.size()
                                   << " tensors on " << c.ever.size() << " workers (replay drops seq <= "
                                   << session.received_seq << ")");
  AnswerResumed(route, session.received_seq);
}

void ClientProtocol::AnswerResumed(const std::string& route, uint64_t received_seq) {
  wire::Envelope resumed;
  resumed.set_kind(wire::Envelope::RESUMED);
  resumed.set_seq(received_seq);
  outbox_.Send(route, resumed, {});
}

}  // namespace gt
