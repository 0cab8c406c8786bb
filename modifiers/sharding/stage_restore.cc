// The sharding stage across a dispatcher restart (sharding_stage.h Retag,
// Restore; piece_tags.h; docs/ARCHITECTURE.md section 9): each record is
// told to the workers holding its pieces whenever it changed in a batch, and
// a restarted dispatcher's stage rebuilds the records from those tags.
#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "gt/log.h"
#include "piece_tags.h"
#include "sharding_stage.h"

namespace gt::sharding {
namespace {

bool SameRecord(const Tensor& a, const Tensor& b) {
  return SameLayout(a.placement, b.placement) && a.placement.ids == b.placement.ids &&
         a.placement.sizes == b.placement.sizes && a.meta.shape == b.meta.shape && a.meta.dtype == b.meta.dtype;
}

PieceTag Forget(ClientId client, int worker, TensorId id) {
  PieceTag tag;
  tag.client = client;
  tag.worker = worker;
  tag.id = id;
  return tag;
}

// The pieces of one client tensor as the workers reported them.
struct Group {
  std::string_view record;
  Tensor tensor;
  std::map<size_t, const HeldPiece*> members;
};

std::string Where(const HeldPiece& piece) {
  return "piece " + TensorName(piece.id) + " on worker " + std::to_string(piece.worker);
}

// The workers' indexes as the tags name them (the old dispatcher's) and as
// they are now: a rejoining worker whose old index a fresh worker took is
// given another. One to one, or the tags contradict each other.
struct Renumbering {
  std::map<int, int> now_of, was_of;
  Status Note(int was, int now, const HeldPiece& piece) {
    auto [a, new_was] = now_of.emplace(was, now);
    auto [b, new_now] = was_of.emplace(now, was);
    if (a->second != now || b->second != was)
      return InvalidArgument("piece " + TensorName(piece.id) + " on worker " + std::to_string(now) +
                             ": its tag places that piece elsewhere (on worker " + std::to_string(was) +
                             ", whose other pieces are on worker " + std::to_string(a->second) + ")");
    return Status::Ok();
  }
  bool identity() const {
    return std::all_of(now_of.begin(), now_of.end(), [](const auto& e) { return e.first == e.second; });
  }
};

// `piece`'s tag decoded into its group; InvalidArgument naming the piece
// when it is malformed or contradicts the other pieces or what it is.
Status AddPiece(const HeldPiece& piece, std::unordered_map<TensorId, Group>& groups, Renumbering& renumbering) {
  Result<DecodedTag> tag = DecodePieceTag(piece.placement);
  if (!tag.ok()) return InvalidArgument(Where(piece) + ": " + tag.status().message());
  const Placement& p = tag->tensor.placement;
  if (tag->logical != piece.logical || p.workers.size() != piece.pieces)
    return InvalidArgument(Where(piece) + ": its tag names another tensor or piece count than the worker reports");
  if (p.ids[tag->member] != piece.id) return InvalidArgument(Where(piece) + ": its tag names another piece");
  if (Status s = renumbering.Note(p.workers[tag->member], piece.worker, piece); !s.ok()) return s;
  if (piece.dtype != tag->tensor.meta.dtype || piece.shape != PieceShape(tag->tensor, tag->member))
    return InvalidArgument(Where(piece) + ": the worker holds " + ShapeToString(piece.shape) +
                           ", not the piece its tag describes");
  auto [it, first] = groups.try_emplace(tag->logical);
  Group& g = it->second;
  if (first) {
    g.record = tag->record;
    g.tensor = std::move(tag->tensor);
  } else if (g.record != tag->record) {
    return InvalidArgument(Where(piece) + ": its tag contradicts another piece's of tensor " + TensorName(tag->logical));
  }
  if (!g.members.emplace(tag->member, &piece).second)
    return InvalidArgument(Where(piece) + ": two pieces claim member " + std::to_string(tag->member) + " of tensor " +
                           TensorName(tag->logical));
  return Status::Ok();
}

// Every group complete and as the client sees its tensor.
Status CheckGroups(const std::unordered_map<TensorId, Group>& groups, const RestoredSession& session) {
  std::unordered_map<TensorId, const ClientTensor*> live;
  for (const ClientTensor& t : session.live) live[t.id] = &t;
  for (const auto& [logical, g] : groups) {
    if (g.members.size() != g.tensor.placement.workers.size())
      return InvalidArgument("tensor " + TensorName(logical) + " has " + std::to_string(g.members.size()) + " of its " +
                             std::to_string(g.tensor.placement.workers.size()) +
                             " pieces on the workers that came back");
    auto it = live.find(logical);
    if (it != live.end() && (it->second->shape != g.tensor.meta.shape || it->second->dtype != g.tensor.meta.dtype))
      return InvalidArgument("tensor " + TensorName(logical) + " is " + ShapeToString(g.tensor.meta.shape) +
                             " by its pieces' tags, " + ShapeToString(it->second->shape) + " by the client");
  }
  return Status::Ok();
}

}  // namespace

void ShardingStage::Retag(ClientId id, Client& c, Emitter& out) {
  c.retag = false;
  for (auto it = c.tagged.begin(); it != c.tagged.end();) {  // records gone: their pieces forgotten
    if (c.tensors.count(it->first)) {
      ++it;
      continue;
    }
    const Placement& old = it->second.placement;
    for (size_t k = 0; k < old.ids.size(); ++k) out.Tag(Forget(id, old.workers[k], old.ids[k]));
    it = c.tagged.erase(it);
  }
  for (const auto& [logical, t] : c.tensors) {
    auto [it, first] = c.tagged.try_emplace(logical);
    if (!first && SameRecord(it->second, t)) continue;
    const Placement& p = t.placement;
    if (!first) {  // pieces the new record no longer has
      const Placement& old = it->second.placement;
      for (size_t k = 0; k < old.ids.size(); ++k)
        if (std::find(p.ids.begin(), p.ids.end(), old.ids[k]) == p.ids.end())
          out.Tag(Forget(id, old.workers[k], old.ids[k]));
    }
    it->second = Tensor{t.meta, p};
    const std::string record = EncodeRecord(logical, t);
    for (size_t k = 0; k < p.ids.size(); ++k) {
      PieceTag tag{id, p.workers[k], p.ids[k], logical, static_cast<uint32_t>(p.ids.size()), PieceTagOf(record, k)};
      if (tag.placement.size() > kMaxPieceTagBytes) break;  // untold: a restart cannot give this tensor back
      out.Tag(std::move(tag));
    }
  }
}

Status ShardingStage::Restore(const RestoredSession& session, Emitter& out) {
  std::unordered_map<TensorId, Group> groups;
  Renumbering renumbering;
  Client c;
  std::map<int, size_t> whole_on;  // untagged client tensors per worker: where its unrecorded ones live
  std::vector<const HeldPiece*> stray;
  for (const HeldPiece& piece : session.held) {
    if (piece.id >= kPhysicalIdBase) c.next_physical = std::max(c.next_physical, piece.id + 1);
    if (!piece.placement.empty()) {
      if (Status s = AddPiece(piece, groups, renumbering); !s.ok()) {
        log::Warn("sharding", "client " + std::to_string(session.client) + ": " + s.message());
        return s;
      }
    } else if (piece.id >= kPhysicalIdBase) {
      stray.push_back(&piece);
    } else {
      ++whole_on[piece.worker];
    }
  }
  if (Status s = CheckGroups(groups, session); !s.ok()) {
    log::Warn("sharding", "client " + std::to_string(session.client) + ": " + s.message());
    return s;
  }
  // A record is kept with today's worker indexes; its pieces' workers are
  // told it again (Retag below) when that changed them.
  for (auto& [logical, g] : groups) {
    c.tagged.emplace(logical, g.tensor);
    for (int& w : g.tensor.placement.workers) w = renumbering.now_of.at(w);
    c.tensors.emplace(logical, std::move(g.tensor));
  }
  if (!renumbering.identity()) Retag(session.client, c, out);
  c.placing = !c.tensors.empty();
  auto most = std::max_element(whole_on.begin(), whole_on.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  if (most != whole_on.end()) c.default_worker = most->first;
  // A step's temporaries the old dispatcher never freed.
  for (const HeldPiece* piece : stray) {
    Instruction free = MakeFree(session.client, 0, {piece->id});
    free.worker = piece->worker;
    out.Emit(std::move(free));
  }
  clients_[session.client] = std::move(c);
  return Status::Ok();
}

}  // namespace gt::sharding
