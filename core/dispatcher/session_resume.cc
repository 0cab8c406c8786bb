#include "dispatcher/session_resume.h"

#include <algorithm>

#include "gt/dtype.h"
#include "gt/stage.h"

namespace gt {
namespace {

// splitmix64's finalizer, twice over a keyed input: cheap, and no worker
// learns a token from its digest.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// "3, 7, 9 and 4 more": ids named in an error, bounded.
std::string NameIds(const std::vector<TensorId>& ids) {
  constexpr size_t kNamed = 8;
  std::string out;
  for (size_t i = 0; i < ids.size() && i < kNamed; ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  if (ids.size() > kNamed) out += " and " + std::to_string(ids.size() - kNamed) + " more";
  return out;
}

Status CheckTensor(const wire::HeldTensor& t, ClientId client) {
  if (t.dtype() >= static_cast<uint32_t>(DType::kCount))
    return InvalidArgument("tensor " + std::to_string(t.id()) + " of client " + std::to_string(client) +
                           " has dtype " + std::to_string(t.dtype()) + ", which no client can make");
  for (int64_t d : t.shape())
    if (d < 0)
      return InvalidArgument("tensor " + std::to_string(t.id()) + " of client " + std::to_string(client) +
                             " has a negative dimension");
  // Kept until the session is claimed: bounded here, not only where a stage reads it.
  if (t.placement().size() > kMaxPieceTagBytes)
    return InvalidArgument("tensor " + std::to_string(t.id()) + " of client " + std::to_string(client) +
                           " has a placement tag of " + std::to_string(t.placement().size()) + " bytes (at most " +
                           std::to_string(kMaxPieceTagBytes) + ")");
  return Status::Ok();
}

}  // namespace

uint64_t SessionDigest(uint64_t token) { return Mix(Mix(token ^ 0x6774207265737465ull) + 0x9e3779b97f4a7c15ull); }

Status ResumeBook::Add(size_t w, const wire::SessionInventory& inventory, Clock::time_point now) {
  const wire::ClientSession& session = inventory.session();
  const ClientId client = session.client();
  if (client == 0) return InvalidArgument("an inventory names client 0, which no session has");
  for (const wire::HeldTensor& t : inventory.tensors())
    if (Status s = CheckTensor(t, client); !s.ok()) return s;
  auto by_digest = by_digest_.find(session.digest());
  if (by_digest != by_digest_.end() && by_digest->second != client)
    return InvalidArgument("client " + std::to_string(client) + "'s session is reported under client " +
                           std::to_string(by_digest->second) + " by another worker");
  auto [it, created] = sessions_.try_emplace(client);
  Unclaimed& s = it->second;
  if (created) {
    s.session = session;
    s.since = now;
    by_digest_[session.digest()] = client;
  } else if (s.session.digest() != session.digest() || s.session.key() != session.key()) {
    return InvalidArgument("client " + std::to_string(client) +
                           " is reported under two different sessions (another worker named it first)");
  }
  std::erase_if(s.pieces, [w](const Piece& p) { return p.worker == w; });
  Piece piece;
  piece.worker = w;
  piece.received_seq = inventory.received_seq();
  piece.acked_sync = inventory.acked_sync();
  piece.errors.assign(inventory.errors().begin(), inventory.errors().end());
  piece.running = inventory.running();
  piece.tensors.assign(inventory.tensors().begin(), inventory.tensors().end());
  s.pieces.push_back(std::move(piece));
  max_client_ = std::max(max_client_, client);
  return Status::Ok();
}

bool ResumeBook::Holds(size_t w, ClientId client) const {
  auto it = sessions_.find(client);
  return it != sessions_.end() &&
         std::any_of(it->second.pieces.begin(), it->second.pieces.end(), [w](const Piece& p) { return p.worker == w; });
}

void ResumeBook::ForgetWorker(size_t w) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    std::erase_if(it->second.pieces, [w](const Piece& p) { return p.worker == w; });
    if (!it->second.pieces.empty()) {
      ++it;
      continue;
    }
    by_digest_.erase(it->second.session.digest());
    it = sessions_.erase(it);
  }
}

ResumeBook::Verdict ResumeBook::Decide(const ResumeClaim& claim, Clock::time_point asked, Clock::time_point now) {
  Verdict v;
  if (claim.token == 0) {
    v.kind = Verdict::kRefuse;
    v.why = InvalidArgument("RESUME carries no session token");
    return v;
  }
  const bool waited_enough = now - asked >= wait_;
  auto found = by_digest_.find(SessionDigest(claim.token));
  if (found != by_digest_.end()) return Resume(found->second, sessions_.at(found->second), claim, waited_enough);
  // No worker named this session (yet). A client holding no tensor its
  // last answered sync covered lost nothing: it starts afresh and its
  // replay makes the rest.
  const bool holds_older = std::any_of(claim.live.begin(), claim.live.end(),
                                       [&](const wire::ResumeTensor& t) { return t.seq() <= claim.answered_seq; });
  if (!holds_older) {
    v.kind = Verdict::kResume;
    v.session.received_seq = claim.answered_seq;
    return v;
  }
  if (!waited_enough) return v;
  v.kind = Verdict::kRefuse;
  if (std::find(expired_running_.begin(), expired_running_.end(), SessionDigest(claim.token)) != expired_running_.end()) {
    v.why = NotFound("expired session: the dispatcher's reconnect grace (" + std::to_string(grace_.count()) +
                             " ms) ran out while a worker was still running what the old dispatcher had sent it; "
                             "its tensors were freed");
    return v;
  }
  v.why = NotFound("unknown or expired session: no worker that came back holds it (it ended, the workers' reconnect "
                   "grace ran out, or the workers holding its tensors are gone)");
  return v;
}

ResumeBook::Verdict ResumeBook::Resume(ClientId id, Unclaimed& s, const ResumeClaim& claim, bool waited_enough) {
  Verdict v;
  if (s.session.key() != claim.key) {
    v.kind = Verdict::kRefuse;
    v.why = InvalidArgument("this session belongs to another client key");
    return v;
  }
  // Its tensors are still being made by what the old dispatcher sent: the
  // worker's completing inventory comes once it ran that (or it is lost).
  if (std::any_of(s.pieces.begin(), s.pieces.end(), [](const Piece& p) { return p.running; })) return v;
  ResumedSession& r = v.session;
  r.id = id;
  std::unordered_map<TensorId, size_t> logical;  // a placed tensor: one of its pieces' worker
  for (const Piece& p : s.pieces) {
    r.workers.insert(p.worker);
    r.received_seq = std::max(r.received_seq, p.received_seq);
    for (const wire::HeldTensor& t : p.tensors) {
      r.tensors[t.id()] = p.worker;
      if (!t.placement().empty()) logical.emplace(t.logical(), p.worker);
      r.held.push_back(t);
      r.held_on.push_back(p.worker);
    }
    if (p.acked_sync > claim.answered_sync) r.errors.insert(r.errors.end(), p.errors.begin(), p.errors.end());
  }
  // Tensors the workers received the making of must be on one of them;
  // the replay makes the later ones.
  std::vector<TensorId> missing;
  for (const wire::ResumeTensor& t : claim.live) {
    if (r.tensors.count(t.id()) || logical.count(t.id())) r.live.insert(t.id());
    else if (t.seq() <= std::max(r.received_seq, claim.answered_seq)) missing.push_back(t.id());
  }
  if (!missing.empty()) {
    if (!waited_enough) return v;
    v.kind = Verdict::kRefuse;
    v.why = NotFound("tensors " + NameIds(missing) +
                     " of this session are on no worker that came back (the workers holding them are gone)");
    return v;
  }
  if (!waited_enough && !PiecesComplete(s)) return v;  // the stages judge what is still missing
  v.kind = Verdict::kResume;
  by_digest_.erase(s.session.digest());
  sessions_.erase(id);
  return v;
}

bool ResumeBook::PiecesComplete(const Unclaimed& s) {
  std::unordered_map<TensorId, std::pair<uint32_t, std::set<TensorId>>> seen;  // logical -> (pieces, ids)
  for (const Piece& p : s.pieces)
    for (const wire::HeldTensor& t : p.tensors)
      if (!t.placement().empty()) {
        auto& [pieces, ids] = seen[t.logical()];
        pieces = std::max(pieces, t.pieces());
        ids.insert(t.id());
      }
  return std::all_of(seen.begin(), seen.end(), [](const auto& e) { return e.second.second.size() >= e.second.first; });
}

std::vector<std::pair<size_t, ClientId>> ResumeBook::TakeUnclaimed(Clock::time_point now) {
  std::vector<std::pair<size_t, ClientId>> unclaimed;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (now - it->second.since <= grace_) {
      ++it;
      continue;
    }
    for (const Piece& p : it->second.pieces) unclaimed.emplace_back(p.worker, it->first);
    if (std::any_of(it->second.pieces.begin(), it->second.pieces.end(), [](const Piece& p) { return p.running; })) {
      expired_running_.push_back(it->second.session.digest());
      if (expired_running_.size() > kExpiredRunningKept) expired_running_.pop_front();
    }
    by_digest_.erase(it->second.session.digest());
    it = sessions_.erase(it);
  }
  return unclaimed;
}

}  // namespace gt
