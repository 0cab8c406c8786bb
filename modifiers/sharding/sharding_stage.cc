// The sharding stage's stream side (sharding_stage.h): setup, worker
// membership, the checks on what a client may send, and which path each
// instruction takes; frees, fetches and compiled units. The other paths are
// in their own files: stage_config.cc (signal configs), stage_inspect.cc
// (layout queries and recordings), stage_pending.cc (pending sums) and
// stage_ops.cc (creation and every other op).
#include "sharding_stage.h"

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <sstream>

#include "gt/metrics.h"
#include "gt/op_attrs.h"
#include "gt/unit.h"
#include "sharding.h"
#include "strategies.h"

namespace gt::sharding {

// ---- setup -----------------------------------------------------------------

Result<std::unique_ptr<Stage>> ShardingStage::Create(const StageContext& context, StartRendezvous start) {
  std::string host = context.options->GetString(kOptionRendezvousHost);
  if (host.empty()) host = context.peer_host.empty() ? "127.0.0.1" : context.peer_host;
  const int64_t port = context.options->GetInt(kOptionRendezvousPort);
  const bool explain = context.options->GetBool(kOptionExplain);
  const bool auto_shard = context.options->GetBool(kOptionAutoShard);
  const std::string checkpoint_root = context.options->GetString(kOptionCheckpointRoot);
  Result<std::unique_ptr<Rendezvous>> rendezvous = start(host, port);
  if (!rendezvous.ok()) return rendezvous.status();
  Gauges gauges;
  if (context.registry) {
    const prometheus::Labels labels = StageLabels(context);
    auto gauge = [&](const char* name, const char* help) {
      return &prometheus::BuildGauge().Name(name).Help(help).Register(*context.registry).Add(labels);
    };
    try {
      gauges.clients = gauge("gt_sharding_clients", "Clients a sharding stage keeps state for (configs, placements).");
      gauges.tensors = gauge("gt_sharding_tracked_tensors",
                             "Client tensors whose placement a sharding stage records, all clients together.");
    } catch (const std::exception& e) {
      return PluginError(std::string("sharding: cannot register metrics: ") + e.what());
    }
  }
  return std::unique_ptr<Stage>(new ShardingStage(std::move(*rendezvous), explain, auto_shard, gauges, checkpoint_root));
}

ShardingStage::ShardingStage(std::unique_ptr<Rendezvous> rendezvous, bool explain, bool auto_shard, Gauges gauges,
                             std::string checkpoint_root)
    : rendezvous_(std::move(rendezvous)),
      rendezvous_address_(rendezvous_->address()),
      explain_(explain),
      auto_shard_(auto_shard),
      checkpoint_root_(std::move(checkpoint_root)),
      gauges_(gauges) {}
ShardingStage::~ShardingStage() = default;

// ---- the stream --------------------------------------------------------------

// The dispatcher announces its workers before any client instruction
// reaches its stages; should every worker be lost, a client's ops fail here
// at once (reported to that client) rather than wait.
Status ShardingStage::Process(Instruction&& inst, Emitter& out) {
  switch (inst.op) {
    case Op::kMembership:
      if (!IsLostTensorsNote(inst)) Membership(inst, out);  // a note is another stage's, for the router
      break;
    case Op::kDropClient: clients_.erase(inst.client); break;  // the client left: forget everything of it
    default: return Handle(std::move(inst), out);
  }
  out.Emit(std::move(inst));
  return Status::Ok();
}

void ShardingStage::Membership(const Instruction& membership, Emitter& out) {
  const std::optional<LostWorker> lost = MembershipLostWorker(membership);
  const uint64_t before = workers_.generation();
  workers_.Assign(MembershipWorkers(membership));
  if (!lost) return;
  // A loss always ends a generation, even one announced after its index
  // was taken again (the live set then looks unchanged).
  if (workers_.generation() == before) workers_.NewGeneration();
  rendezvous_->MarkLost(before, lost->index);
  ForgetLost(*lost, out);
}

void ShardingStage::ForgetLost(const LostWorker& lost, Emitter& out) {
  for (auto& [id, c] : clients_) {
    std::vector<TensorId> gone;
    for (auto it = c.tensors.begin(); it != c.tensors.end();) {
      const Placement& p = it->second.placement;
      if (!Contains(p.workers, lost.index)) {
        ++it;
        continue;
      }
      for (size_t r = 0; r < p.workers.size(); ++r) {
        if (p.workers[r] == lost.index) continue;
        Instruction free = MakeFree(id, 0, {p.ids[r]});
        free.worker = p.workers[r];
        out.Emit(std::move(free));
      }
      gone.push_back(it->first);
      c.failed.RecordLost(it->first, lost.name);
      it = c.tensors.erase(it);
    }
    if (c.default_worker == lost.index) c.default_worker = -1;
    if (!gone.empty()) {
      MarkRetag(id, c);
      std::sort(gone.begin(), gone.end());
      out.Emit(MakeLostTensorsNote(id, lost, std::move(gone)));
    }
  }
}

Status ShardingStage::EndBatch(Emitter& out) {
  for (ClientId id : retag_)
    if (auto it = clients_.find(id); it != clients_.end()) Retag(id, it->second, out);
  retag_.clear();
  if (!gauges_.tensors) return Status::Ok();
  size_t tensors = 0;
  for (const auto& [id, c] : clients_) tensors += c.tensors.size();
  gauges_.tensors->Set(static_cast<double>(tensors));
  gauges_.clients->Set(static_cast<double>(clients_.size()));
  return Status::Ok();
}

Status ShardingStage::Handle(Instruction&& inst, Emitter& out) {
  Client& c = clients_[inst.client];
  switch (inst.op) {
    case Op::kConfigure: return Configure(c, inst);
    case Op::kSync: out.Emit(std::move(inst)); return Status::Ok();
    default: break;
  }
  if (KindOf(inst.op) == OpKind::kCollective)
    return InvalidArgument(inst.Describe() + ": reserved for the dispatcher");
  // A creation's worker is the dispatcher's hint, the least loaded worker
  // (PlaceByLoad; admission refused any a client set); DefaultFor takes it.
  if (inst.worker >= 0 && KindOf(inst.op) != OpKind::kCreate)
    return InvalidArgument(inst.Describe() + ": a client may not place instructions on workers");
  // The stage's shards and temporaries live in the client's namespace too:
  // a client that named one could free or overwrite a shard behind its back.
  for (const std::vector<TensorId>* ids : {&inst.results, &inst.operands})
    for (TensorId id : *ids)
      if (id >= kPhysicalIdBase)
        return InvalidArgument(inst.Describe() + ": tensor ids from " + TensorName(kPhysicalIdBase) + " up are reserved");
  if (workers_.empty()) {
    for (TensorId r : inst.results) c.failed.RecordIfAbsent(r, inst.seq);
    return Unavailable(inst.Describe() + ": no live worker");
  }
  // What may change a record marks the client for Retag: these rare ops,
  // and whatever a placing client sends (nothing on PassOn's path).
  if (inst.op == Op::kInspect || inst.op == Op::kSettle || inst.op == Op::kCheckpointWrite ||
      inst.op == Op::kCheckpointRead) {
    MarkRetag(inst.client, c);
    if (inst.op == Op::kInspect) return Inspect(c, std::move(inst), out);
    if (inst.op == Op::kSettle) return SettleTogether(c, std::move(inst), out);
    return Checkpoint(c, std::move(inst), out);
  }
  // A redistributed tensor has a record, so the client's later tensors need them too.
  if (inst.op == Op::kRedistribute) c.placing = true;
  if (!c.placing && !auto_shard_) return PassOn(c, std::move(inst), out);
  MarkRetag(inst.client, c);
  if (inst.op == Op::kDefineUnit) {  // the router keeps it until the unit's first run on a worker
    out.Emit(std::move(inst));
    return Status::Ok();
  }
  if (inst.op == Op::kRunUnit) return RunUnit(c, std::move(inst), out);
  if (inst.op == Op::kFree) return Free(c, std::move(inst), out);
  if (inst.op == Op::kFetch) return Fetch(c, std::move(inst), out);
  if (KindOf(inst.op) == OpKind::kCreate) return Create(c, std::move(inst), out);
  return Compute(c, std::move(inst), out);
}

// Every tensor of such a client is whole on its worker, so nothing needs a
// record: the router places each op by its operands.
Status ShardingStage::PassOn(Client& c, Instruction&& inst, Emitter& out) {
  if (!c.failed.empty()) {  // only after this stage refused one of its ops
    if (inst.op == Op::kFree) return Free(c, std::move(inst), out);
    if (Status f = c.failed.CheckOperands(inst); !f.ok()) {
      for (TensorId r : inst.results) c.failed.RecordIfAbsent(r, inst.seq);
      if (inst.op == Op::kRunUnit) FreeConsumed(c, inst, out);
      return f;
    }
  }
  // What takes no tensor is made where the client's tensors are (a unit of a
  // compile scope can take none).
  if (KindOf(inst.op) == OpKind::kCreate || (inst.op == Op::kRunUnit && inst.operands.empty()))
    inst.worker = workers_.DefaultFor(c, inst.worker);
  out.Emit(std::move(inst));
  return Status::Ok();
}

void ShardingStage::FreeConsumed(Client& c, const Instruction& run, Emitter& out) {
  Instruction free = MakeFree(run.client, run.seq, ConsumedOperands(run));
  if (!free.operands.empty()) (void)Free(c, std::move(free), out);
}

Step ShardingStage::StepFor(Client& c, const Instruction& inst, Emitter& out) {
  return Step{&c, &inst, &out, &workers_, &rendezvous_address_, {}, {}};
}

void ShardingStage::Explain(const Step& s, const std::vector<const Tensor*>& in, const Placement& result) {
  if (!explain_) return;
  std::ostringstream line;
  line << "gt explain: " << OpName(s.inst->op) << " #" << s.inst->seq;
  if (!s.inst->signal.empty()) line << " [" << s.inst->signal << "]";
  line << ":";
  for (size_t i = 0; i < in.size(); ++i)
    line << (i ? "," : "") << " "
         << (in[i] ? in[i]->placement.ToString() : "whole without a record (a tensor from before the first config)");
  line << " -> " << result.ToString() << "; collectives: ";
  if (s.collectives.empty()) line << "none";
  for (size_t i = 0; i < s.collectives.size(); ++i) line << (i ? ", " : "") << s.collectives[i];
  std::cerr << line.str() << "\n";
}

// ---- frees, fetches, units ---------------------------------------------------

// Whole tensors stay in `inst` (compacted in place), which goes on to the
// router; every shard or copy gets a free on its worker.
Status ShardingStage::Free(Client& c, Instruction inst, Emitter& out) {
  Step s = StepFor(c, inst, out);
  size_t kept = 0;
  std::map<int, std::vector<TensorId>> pieces;  // worker -> the pieces it frees, one free each
  for (size_t i = 0; i < inst.operands.size(); ++i) {
    const TensorId id = inst.operands[i];
    if (c.failed.Forget(id)) continue;  // never made: nothing to free
    auto it = c.tensors.find(id);
    if (it == c.tensors.end() || it->second.placement.whole()) {
      if (it != c.tensors.end()) c.tensors.erase(it);
      inst.operands[kept++] = id;
      continue;
    }
    const Placement& p = it->second.placement;
    for (size_t r = 0; r < p.workers.size(); ++r) pieces[p.workers[r]].push_back(p.ids[r]);
    c.tensors.erase(it);
  }
  for (auto& [worker, ids] : pieces) EmitOn(s, worker, MakeFree(0, 0, std::move(ids)));
  inst.operands.resize(kept);
  if (kept) out.Emit(std::move(inst));
  return Status::Ok();
}

Status ShardingStage::Fetch(Client& c, Instruction inst, Emitter& out) {
  if (Status f = c.failed.CheckOperands(inst); !f.ok()) return f;
  if (inst.operands.size() != 1) {
    out.Emit(std::move(inst));
    return Status::Ok();
  }
  auto it = c.tensors.find(inst.operands[0]);
  if (it == c.tensors.end() || it->second.placement.whole()) {
    out.Emit(std::move(inst));
    return Status::Ok();
  }
  Step s = StepFor(c, inst, out);
  Settle(c, s, inst);
  const Tensor& t = it->second;
  const int worker = t.placement.workers[0];
  TensorId whole = WholeOn(s, t, worker);
  Instruction fetch = inst;
  fetch.operands = {whole};
  EmitOn(s, worker, fetch);
  Explain(s, {&t}, Placement{Placement::Kind::kWhole, {worker}, {whole}, 0, {}});
  FreeTemporaries(s);
  return Status::Ok();
}

// The unit runs on the client's default worker, where its unrecorded
// tensors live and where its results (which get no record) must live too.
Status ShardingStage::RunUnit(Client& c, Instruction&& inst, Emitter& out) {
  auto refuse = [&](Status status) {
    for (TensorId r : inst.results)
      if (!c.tensors.count(r)) c.failed.RecordIfAbsent(r, inst.seq);  // a live tensor keeps its id
    FreeConsumed(c, inst, out);  // the client has forgotten them
    return status;
  };
  if (Status f = c.failed.CheckOperands(inst); !f.ok()) return refuse(f);
  ForgetConstants(c, inst);  // the unit's body may write into its operands
  const int home = workers_.DefaultFor(c);
  for (TensorId id : inst.operands) {
    auto it = c.tensors.find(id);
    if (it == c.tensors.end()) continue;  // unrecorded: whole on `home`
    const Placement& p = it->second.placement;
    if (!p.whole() || p.workers[0] != home)
      return refuse(InvalidArgument(inst.Describe() + ": operand " + TensorName(id) + " is " + p.ToString() +
                                    "; a compiled unit takes only tensors whole on the client's worker " +
                                    std::to_string(home) + " (where this stage places a client's tensors, units "
                                    "are made after it, not by the client)"));
  }
  for (TensorId r : inst.results)
    if (c.tensors.count(r)) return refuse(InvalidArgument(inst.Describe() + ": result " + TensorName(r) + " already names a live tensor"));
  for (TensorId id : ConsumedOperands(inst)) c.tensors.erase(id);
  inst.worker = home;
  out.Emit(std::move(inst));
  return Status::Ok();
}

}  // namespace gt::sharding
