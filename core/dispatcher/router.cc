#include "dispatcher/router.h"

#include <algorithm>
#include <map>
#include <unordered_set>

#include "gt/instruction_errors.h"
#include "gt/log.h"
#include "gt/op_attrs.h"
#include "gt/unit.h"

namespace gt {
namespace {

std::string TensorName(TensorId id) { return "%" + std::to_string(id); }

// "worker w1 was lost (why); this client's tensors on it are gone: %3, %8
// and 2 shards of sharded tensors".
// `lost`: the client's tensors, by its own ids, and the stage's shard and
// copy ids (counted, not named) where no stage named their tensors.
std::string LostMessage(const std::string& worker, const std::string& why, std::vector<TensorId> lost, bool noted) {
  std::string text = "worker " + worker + " was lost (" + why + ")";
  if (lost.empty()) return text + " before it answered";
  std::sort(lost.begin(), lost.end());
  lost.erase(std::unique(lost.begin(), lost.end()), lost.end());
  constexpr size_t kNamed = 16;
  std::string ids;
  size_t named = 0, shards = 0;
  for (TensorId id : lost) {
    if (id >= kPhysicalIdBase) shards += noted ? 0 : 1;
    else if (named++ < kNamed) ids += (ids.empty() ? "" : ", ") + TensorName(id);
  }
  if (named > kNamed) ids += " and " + std::to_string(named - kNamed) + " more";
  if (shards) ids += (ids.empty() ? "" : "; ") + std::to_string(shards) + " shard(s) of sharded tensors";
  return text + "; this client's tensors on it are gone: " + ids;
}

}  // namespace

Status Router::Accept(Instruction inst) {
  // Meant for the stages; no worker needs them.
  if (inst.op == Op::kMembership) return NoteLostTensors(inst);
  if (inst.op == Op::kConfigure) return MissingStage(inst);
  if (inst.op == Op::kHotStart && !MarksHotSequence(inst) && ReadHotMarker(inst).required) return MissingStage(inst);
  ClientState* client = clients_.Find(inst.client);
  if (!client) return Internal("instruction for unknown client " + std::to_string(inst.client));
  ClientState& c = *client;
  if (inst.op == Op::kDropClient) return SendDrop(c, inst);
  if (inst.op == Op::kSync) {
    syncs_.Begin(c, inst);
    return Status::Ok();
  }
  if (inst.op == Op::kDefineUnit) return DefineUnit(c, std::move(inst));
  if (inst.op == Op::kInspect) return AnswerInspect(c, inst);
  // Only the sharding stage checks a checkpoint's paths against the
  // operator's checkpoint_root, and it names the worker: one naming none
  // would let a client write anywhere a worker can.
  if ((inst.op == Op::kCheckpointWrite || inst.op == Op::kCheckpointRead) && inst.worker < 0)
    return Refuse(c, inst, Unimplemented(inst.Describe() + ": a distributed checkpoint needs the sharding stage; " +
                                         host_description_ + " does not run one"));
  // A free of what was never made, or was lost with a worker, frees nothing.
  if (inst.op == Op::kFree && !c.failed.empty()) {
    std::erase_if(inst.operands, [&](TensorId id) { return c.failed.Forget(id); });
    if (inst.operands.empty()) return Status::Ok();
  }
  if (inst.op == Op::kFree) return Free(c, inst);
  if (Status s = CheckIds(c, inst); !s.ok()) {
    // The other members of a collective wait for this one: its worker takes
    // part all the same, with a stand-in for the operand it does not have.
    if (KindOf(inst.op) == OpKind::kCollective && inst.worker >= 0 && workers_.IsAlive(static_cast<size_t>(inst.worker)))
      Enqueue(static_cast<size_t>(inst.worker), c, inst);
    return Refuse(c, inst, s);
  }
  Result<size_t> target = TargetWorker(c, inst);
  if (!target.ok()) return Refuse(c, inst, target.status());
  if (inst.op == Op::kRunUnit) {
    if (Status s = SendUnitOnce(c, *target, inst); !s.ok()) return Refuse(c, inst, s);
    for (TensorId id : ConsumedOperands(inst)) c.tensors.erase(id);
  }
  for (TensorId r : inst.results) c.tensors[r] = *target;
  GT_LOG(kDispatcher, "place " << OpName(inst.op) << " #" << inst.seq << " of client " << c.id << " on "
                                << workers_.at(*target).name);
  Enqueue(*target, c, inst);
  return Status::Ok();
}

// Only notes are for the router; a membership's news reached the stages.
Status Router::NoteLostTensors(const Instruction& membership) {
  if (!IsLostTensorsNote(membership)) return Status::Ok();
  std::optional<LostWorker> worker = MembershipLostWorker(membership);
  ClientState* c = clients_.Find(membership.client);
  if (!worker || worker->index < 0 || !c) return Status::Ok();  // the client left meanwhile
  std::vector<TensorId>& noted = c->lost_notes[static_cast<size_t>(worker->index)];
  noted.insert(noted.end(), membership.operands.begin(), membership.operands.end());
  return Status::Ok();
}

void Router::OnWorkerLost(size_t w, const std::string& why) {
  const std::string& name = workers_.at(w).name;
  for (auto& [id, c] : clients_) {
    std::vector<TensorId> lost;
    const auto note = c.lost_notes.find(w);
    const bool noted = note != c.lost_notes.end();
    if (noted) {
      lost = std::move(note->second);  // named by the stage: their shards here are not named again
      c.lost_notes.erase(note);
    }
    for (auto it = c.tensors.begin(); it != c.tensors.end();) {
      if (it->second != w) {
        ++it;
        continue;
      }
      lost.push_back(it->first);
      c.failed.RecordLost(it->first, name);
      it = c.tensors.erase(it);
    }
    c.units_sent.erase(w);
    c.ever.erase(w);
    if (c.worker == static_cast<int>(w)) c.worker = -1;
    const bool had_tensors = !lost.empty();
    syncs_.OnWorkerLost(c, w, LostMessage(name, why, std::move(lost), noted), had_tensors);
  }
}

Status Router::MissingStage(const Instruction& inst) const {
  if (inst.op == Op::kConfigure) {
    const ConfigureSpec spec = ReadConfigure(inst);
    const bool places = spec.shard_axis.has_value() || spec.replicated || !spec.workers.empty();
    if (spec.forget || !places) return Status::Ok();  // nothing to place: no stage is needed
    return Unimplemented("signal '" + spec.signal +
                              "': its config places tensors on workers, which needs the sharding stage; " +
                              host_description_ + " does not run one (run a dispatcher manifest with a `sharding` "
                              "stage, e.g. configs/dispatcher.yaml)");
  }
  return Unimplemented("compile scope '" + inst.signal + "': GT_COMPILE=1 asks for it to be compiled, which needs "
                       "the compile stage; " + host_description_ + " does not run one (a client whose configs "
                       "place tensors leaves compiling to its dispatcher): run a dispatcher manifest with `hotpath` "
                       "and `compile` stages (configs/dispatcher-compile.yaml), or GT_COMPILE=0 to run compile "
                       "scopes eagerly");
}

Status Router::SendDrop(ClientState& c, const Instruction& drop) {
  for (size_t w : c.ever)
    if (workers_.IsAlive(w)) EnqueueTo(w, drop);
  return Status::Ok();
}

Status Router::AnswerInspect(ClientState& c, const Instruction& inspect) {
  const BlobPtr& answer = InspectAnswer(inspect);
  if (!answer)
    return Refuse(c, inspect, InvalidArgument(inspect.Describe() + ": inspect is answered by the dispatcher's sharding "
                                              "stage, and this cluster's dispatcher manifest has none"));
  // A tensor the stage has no record of lives whole on a worker: the router
  // knows whether it does.
  if (Status s = CheckIds(c, inspect); !s.ok()) return Refuse(c, inspect, s);
  wire::Envelope data;
  data.set_kind(wire::Envelope::DATA);
  data.set_seq(inspect.seq);
  if (!inspect.operands.empty()) data.set_tensor(inspect.operands[0]);
  data.set_dtype(static_cast<uint32_t>(DType::kInt64));
  data.add_shape(static_cast<int64_t>(answer->size() / sizeof(int64_t)));
  syncs_.Reply(c, data, {answer});
  return Status::Ok();
}

// Keeps a unit's definition; it goes to a worker just before that worker's
// first kRunUnit of it (SendUnitOnce), so each worker gets it once.
Status Router::DefineUnit(ClientState& c, Instruction inst) {
  if (!inst.payload) return Invalid(inst, "no unit template");
  const uint64_t key = UnitKey(inst);
  auto it = c.units.find(key);
  if (it != c.units.end()) {
    const Blob& held = *it->second.payload;
    if (held.size() == inst.payload->size() && std::equal(held.data(), held.data() + held.size(), inst.payload->data()))
      return Status::Ok();
    // Redefined: workers that had the old one must get the new one.
    for (auto& [w, keys] : c.units_sent) keys.erase(key);
  }
  c.units[key] = std::move(inst);
  return Status::Ok();
}

Status Router::SendUnitOnce(ClientState& c, size_t w, const Instruction& run) {
  auto unit = c.units.find(UnitKey(run));
  if (unit == c.units.end()) return NotFound(run.Describe() + ": no unit was defined under this key");
  if (c.units_sent[w].insert(UnitKey(run)).second) Enqueue(w, c, unit->second);
  return Status::Ok();
}

Status Router::CheckIds(const ClientState& c, const Instruction& inst) const {
  for (TensorId id : inst.operands) {  // the first operand at fault is named, whatever its fault
    if (std::optional<FailedTensors::Use> use = c.failed.Find(id)) return FailedTensors::UseError(inst, *use);
    if (!c.tensors.count(id)) return NotFound(inst.Describe() + ": unknown tensor " + TensorName(id));
  }
  for (TensorId id : inst.results)
    if (c.tensors.count(id)) return Invalid(inst, "result " + TensorName(id) + " already names a live tensor");
  if (ProducesTensor(inst.op) && inst.results.size() != 1)
    return Invalid(inst, "expected exactly one result id");
  if (inst.op == Op::kRunUnit) {
    // Several results: every one a distinct new id (each is placed on the target worker).
    std::unordered_set<TensorId> distinct(inst.results.begin(), inst.results.end());
    if (distinct.size() != inst.results.size()) return Invalid(inst, "a result id appears twice");
    for (int64_t index : FreedOperandIndexes(inst))
      if (index < 0 || static_cast<size_t>(index) >= inst.operands.size())
        return Invalid(inst, "freed operand index " + std::to_string(index) + " out of range");
  }
  return Status::Ok();
}

// REQUIRES: CheckIds(c, inst) passed (every operand is a live tensor of c).
Result<size_t> Router::TargetWorker(ClientState& c, const Instruction& inst) {
  if (inst.worker >= 0) {  // placed by a stage
    const size_t w = static_cast<size_t>(inst.worker);
    const std::string where = inst.signal.empty() ? "" : "signal '" + inst.signal + "': ";
    if (!workers_.IsAlive(w))
      return Unavailable(where + inst.Describe() + ": worker index " + std::to_string(w) + " is not a live worker (" +
                         std::to_string(workers_.LiveCount()) + " live)");
    for (TensorId id : inst.operands)
      if (c.tensors.at(id) != w)
        return Internal(inst.Describe() + ": operand " + TensorName(id) + " is on " + workers_.at(c.tensors.at(id)).name +
                        ", not on the worker the instruction was placed on");
    return w;
  }
  if (!inst.operands.empty()) {
    const size_t w = c.tensors.at(inst.operands[0]);
    for (TensorId id : inst.operands)
      if (c.tensors.at(id) != w)
        return Unavailable(inst.Describe() + ": operands live on different workers (" + workers_.at(w).name + ", " +
                           workers_.at(c.tensors.at(id)).name + ")");
    if (!workers_.IsAlive(w))
      return Unavailable(inst.Describe() + ": operands were on worker " + workers_.at(w).name + ", which is gone");
    return w;
  }
  if (c.worker >= 0 && workers_.IsAlive(static_cast<size_t>(c.worker))) return static_cast<size_t>(c.worker);
  std::optional<size_t> w = workers_.NextPlacement();
  if (!w) return Unavailable(inst.Describe() + ": no live worker");
  c.worker = static_cast<int>(*w);
  return *w;
}

// Every operand the client holds is freed, wherever each lives (one free
// per worker): admission's books have forgotten them all, so no free is
// refused whole. Ids it does not hold are an error for its next sync.
Status Router::Free(ClientState& c, const Instruction& free) {
  // Almost every free names tensors of one worker (a client's tensors live
  // on its worker unless a stage placed them): it goes there as it came,
  // without the per-worker split's map and copy (docs/performance/capacity.md).
  if (std::optional<size_t> w = SoleWorker(c, free.operands)) {
    for (TensorId id : free.operands) c.tensors.erase(id);
    if (workers_.IsAlive(*w)) Enqueue(*w, c, free);
    return Status::Ok();
  }
  std::map<size_t, std::vector<TensorId>> by_worker;
  std::vector<TensorId> unknown;
  for (TensorId id : free.operands) {
    auto it = c.tensors.find(id);
    if (it == c.tensors.end()) {
      unknown.push_back(id);
      continue;
    }
    by_worker[it->second].push_back(id);
    c.tensors.erase(it);
  }
  for (auto& [w, ids] : by_worker) {
    if (!workers_.IsAlive(w)) continue;  // gone with the worker
    Instruction piece = free;
    piece.operands = std::move(ids);
    Enqueue(w, c, piece);
  }
  if (unknown.empty()) return Status::Ok();
  return NotFound(free.Describe() + ": unknown tensor " + TensorName(unknown[0]) +
                  (unknown.size() > 1 ? " and " + std::to_string(unknown.size() - 1) + " more" : "") +
                  " (the others were freed)");
}

// The one worker holding every id of `ids` (each a live tensor of c, none
// named twice); nullopt otherwise, and for a long list (the repeat check is
// quadratic: a long free takes the general path).
std::optional<size_t> Router::SoleWorker(const ClientState& c, const std::vector<TensorId>& ids) {
  constexpr size_t kShortFree = 16;
  if (ids.size() > kShortFree) return std::nullopt;
  std::optional<size_t> sole;
  for (auto id = ids.begin(); id != ids.end(); ++id) {
    auto it = c.tensors.find(*id);
    if (it == c.tensors.end() || (sole && it->second != *sole)) return std::nullopt;
    if (std::find(ids.begin(), id, *id) != id) return std::nullopt;  // named twice: the general path reports it
    sole = it->second;
  }
  return sole;
}

// Remembers that the results of `inst` were never made (a result id that
// names a live tensor keeps it), so later uses name this op; a kRunUnit
// refused here still frees the live operands it would have consumed (the
// client has forgotten them), as a worker does for one that fails there.
Status Router::Refuse(ClientState& c, const Instruction& inst, Status status) {
  if (inst.op == Op::kRunUnit) {
    for (TensorId id : ConsumedOperands(inst)) {
      auto it = c.tensors.find(id);
      if (it == c.tensors.end()) continue;
      const size_t w = it->second;
      c.tensors.erase(it);
      if (workers_.IsAlive(w)) Enqueue(w, c, MakeFree(c.id, inst.seq, {id}));
    }
  }
  for (TensorId r : inst.results)
    if (!c.tensors.count(r)) c.failed.Record(r, inst.seq);
  return status;
}

void Router::EnqueueTo(size_t w, const Instruction& inst) {
  workers_.Enqueue(w, inst);
  if (events_ == nullptr || !events_->enabled()) return;
  const std::string peer = "worker " + workers_.at(w).name;
  const std::string client = "client=" + std::to_string(inst.client);
  HostEvent event{HostEventKind::kWorkerSend, peer, &inst};
  event.bytes = inst.payload ? inst.payload->size() : 0;
  event.detail = client;
  events_->Emit(event);
}

void Router::Enqueue(size_t w, ClientState& c, const Instruction& inst) {
  EnqueueTo(w, inst);
  c.touched.insert(w);
  c.ever.insert(w);
}

}  // namespace gt
