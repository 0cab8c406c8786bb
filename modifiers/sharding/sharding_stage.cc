#include "stage.h"

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "gt/metrics.h"
#include "gt/op_attrs.h"
#include "gt/unit.h"
#include "sharding.h"
#include "strategies.h"
#include "strategy_table.h"

namespace gt::sharding {
namespace {

// Ops whose result a worker makes as a view of operand 0.
// True when `inst` writes an operand on a mesh (a mutation's destination,
// adam_step's state too) that the mesh cannot run it on piece by piece.
bool WritesMesh(const Instruction& inst, const std::vector<const Tensor*>& in) {
  if (KindOf(inst.op) != OpKind::kMutate || in.empty()) return false;
  if (in[0]->placement.mesh()) return true;
  return inst.op == Op::kAdamStep && in.size() == 4 && (in[2]->placement.mesh() || in[3]->placement.mesh());
}

bool IsView(Op op) {
  return op == Op::kSlice || op == Op::kSelect || op == Op::kTranspose || op == Op::kPermute || op == Op::kUnsqueeze ||
         op == Op::kSqueeze || op == Op::kReshape;
}

}  // namespace

// ---- setup -----------------------------------------------------------------

Result<std::unique_ptr<Stage>> ShardingStage::Create(const StageContext& context, StartRendezvous start) {
  std::string host = context.options->GetString(kOptionRendezvousHost);
  if (host.empty()) host = context.peer_host.empty() ? "127.0.0.1" : context.peer_host;
  const int64_t port = context.options->GetInt(kOptionRendezvousPort);
  const bool explain = context.options->GetBool(kOptionExplain);
  const bool auto_shard = context.options->GetBool(kOptionAutoShard);
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
  return std::unique_ptr<Stage>(new ShardingStage(std::move(*rendezvous), explain, auto_shard, gauges));
}

ShardingStage::ShardingStage(std::unique_ptr<Rendezvous> rendezvous, bool explain, bool auto_shard, Gauges gauges)
    : rendezvous_(std::move(rendezvous)),
      rendezvous_address_(rendezvous_->address()),
      explain_(explain),
      auto_shard_(auto_shard),
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
      std::sort(gone.begin(), gone.end());
      out.Emit(MakeLostTensorsNote(id, lost, std::move(gone)));
    }
  }
}

Status ShardingStage::EndBatch(Emitter& out) {
  (void)out;
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
  if (inst.worker >= 0) return InvalidArgument(inst.Describe() + ": a client may not place instructions on workers");
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
  if (inst.op == Op::kInspect) return Inspect(c, std::move(inst), out);
  if (inst.op == Op::kSettle) return SettleTogether(c, std::move(inst), out);
  // A redistributed tensor has a record, so the client's later tensors need them too.
  if (inst.op == Op::kRedistribute) c.placing = true;
  if (!c.placing && !auto_shard_) return PassOn(c, std::move(inst), out);
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
    inst.worker = workers_.DefaultFor(c);
  out.Emit(std::move(inst));
  return Status::Ok();
}

void ShardingStage::FreeConsumed(Client& c, const Instruction& run, Emitter& out) {
  Instruction free = MakeFree(run.client, run.seq, ConsumedOperands(run));
  if (!free.operands.empty()) (void)Free(c, std::move(free), out);
}

namespace {

// ConfigureSpec::mesh into `config`: {rows, columns, kind_0, dim_0, kind_1,
// dim_1} over as many distinct workers.
Status ReadMeshConfig(const ConfigureSpec& spec, Config& config) {
  const std::string where = "signal '" + spec.signal + "': mesh: ";
  const std::vector<int64_t>& m = spec.mesh;
  if (m.size() != 6 || m[0] < 1 || m[1] < 1 || m[0] > (1 << 16) || m[1] > (1 << 16) ||
      static_cast<size_t>(m[0] * m[1]) != config.workers.size())
    return InvalidArgument(where + "expected {rows, columns, kind_0, dim_0, kind_1, dim_1} over rows * columns workers");
  if (config.sharded || config.replicated) return InvalidArgument(where + "excludes shard and replicated");
  for (size_t i = 0; i < config.workers.size(); ++i)
    if (std::find(config.workers.begin(), config.workers.begin() + static_cast<std::ptrdiff_t>(i), config.workers[i]) !=
        config.workers.begin() + static_cast<std::ptrdiff_t>(i))
      return InvalidArgument(where + "worker " + std::to_string(config.workers[i]) + " is named twice");
  config.mesh_shape = {m[0], m[1]};
  for (size_t a = 0; a < 2; ++a) {
    const int64_t kind = m[2 + 2 * a], dim = m[3 + 2 * a];
    if (kind == 2) {
      config.mesh_axes.push_back(MeshAxis{});
    } else if (kind == 1 && dim > -(1 << 20) && dim < (1 << 20)) {
      config.mesh_axes.push_back(MeshAxis{MeshAxis::Kind::kShard, dim});
    } else {
      return InvalidArgument(where + "axis " + std::to_string(a) + ": expected kind 1 (Shard, with a dim) or 2 (Replicate)");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ShardingStage::Configure(Client& c, const Instruction& inst) {
  if (inst.signal.empty()) return InvalidArgument("configure: no signal name");
  ConfigureSpec spec = ReadConfigure(inst);
  if (spec.forget) {
    c.configs.erase(spec.signal);
    return Status::Ok();
  }
  Config config;
  config.sharded = spec.shard_axis.has_value();
  if (config.sharded) config.axis = *spec.shard_axis;
  for (int64_t w : spec.workers) {
    if (w < 0 || w > 1 << 20)
      return InvalidArgument("signal '" + spec.signal + "': shard.workers: bad worker index " + std::to_string(w));
    config.workers.push_back(static_cast<int>(w));
  }
  config.replicated = spec.replicated;
  if (!spec.mesh.empty()) {
    if (Status st = ReadMeshConfig(spec, config); !st.ok()) return st;
  }
  config.compile = spec.compile;
  config.backward = std::move(spec.backward);
  c.configs[spec.signal] = std::move(config);
  c.placing = true;  // from now on its tensors get records (older ones stay without)
  return Status::Ok();
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

// ---- ops -------------------------------------------------------------------

Status ShardingStage::Create(Client& c, Instruction inst, Emitter& out) {
  Result<TensorMeta> meta = InferResult(inst, {});
  if (!meta.ok()) return meta.status();
  const TensorId result = inst.results.at(0);
  auto config = inst.signal.empty() ? c.configs.end() : c.configs.find(inst.signal);
  Step s = StepFor(c, inst, out);
  // Auto-sharding: no config applies, so axis 0 over every live worker when it divides, else replicated.
  Config automatic;
  const size_t live = workers_.live().size();
  if (config == c.configs.end() && auto_shard_ && live > 1) {
    const Shape& shape = meta->shape;
    automatic.sharded = !shape.empty() && shape[0] % static_cast<int64_t>(live) == 0 && shape[0] > 0;
    automatic.replicated = !automatic.sharded;
  }
  const Config* chosen = config != c.configs.end() ? &config->second
                         : automatic.sharded || automatic.replicated ? &automatic
                                                                     : nullptr;
  if (chosen) {
    if (Status st = CheckConfig(inst.signal, *chosen, workers_, &meta->shape); !st.ok()) {
      c.failed.Record(result, inst.seq);
      return st;
    }
  }
  Config flat;  // a mesh layout whose axes cut the same dim (Shard(0) and Shard(-2), say) is one split over the mesh
  if (chosen && !chosen->mesh_shape.empty() && chosen->mesh_axes[0].shard() && chosen->mesh_axes[1].shard() &&
      Wrap(chosen->mesh_axes[0].dim, meta->shape.size()) == Wrap(chosen->mesh_axes[1].dim, meta->shape.size())) {
    flat.sharded = true;
    flat.axis = chosen->mesh_axes[0].dim;
    flat.workers = chosen->workers;
    chosen = &flat;
  }
  const bool on_mesh = chosen && !chosen->mesh_shape.empty() && !meta->shape.empty();  // a scalar is placed whole
  Result<Placement> p = on_mesh ? MeshCreation(s, *chosen, *meta)
                                : Creation(s, chosen && !chosen->mesh_shape.empty() ? nullptr : chosen, *meta);
  if (!p.ok()) {  // a later use names this op, not an unknown tensor
    FreeTemporaries(s);
    c.failed.Record(result, inst.seq);
    return p.status();
  }
  Explain(s, {}, *p);
  FreeTemporaries(s);
  c.tensors[result] = Tensor{*meta, std::move(*p)};
  if (!on_mesh && (inst.op == Op::kZeros || inst.op == Op::kOnes)) c.tensors[result].constant = inst.op;
  return Status::Ok();
}

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

Status ShardingStage::Inspect(Client& c, Instruction&& inst, Emitter& out) {
  if (Status f = c.failed.CheckOperands(inst); !f.ok()) return f;
  switch (inst.attrs.seed) {
    case 1: {  // a layout: {layout, axis, n, worker_1..n[, size_1..n when split]}
      if (inst.operands.size() != 1) return InvalidArgument(inst.Describe() + ": expected one operand");
      auto it = c.tensors.find(inst.operands[0]);
      Placement p;
      if (it != c.tensors.end()) {
        p = it->second.placement;
      } else {  // no record: whole on the client's worker, if it is there (a view of it fails if not)
        if (c.default_worker < 0 || !workers_.IsLive(c.default_worker))
          return InvalidArgument(inst.Describe() + ": unknown tensor " + TensorName(inst.operands[0]));
        p = Placement{Placement::Kind::kWhole, {c.default_worker}, {inst.operands[0]}, 0, {}};
        Step s = StepFor(c, inst, out);
        Attributes front;
        front.axes = {0};
        PerMember(s, p, Op::kUnsqueeze, front, [&](size_t) { return std::vector<TensorId>{inst.operands[0]}; }, true);
        FreeTemporaries(s);
      }
      std::vector<int64_t> values = {p.whole() ? 0 : p.sharded() ? 1 : p.replicated() ? 2 : p.partial() ? 3 : kMeshLayout,
                                     p.axis, static_cast<int64_t>(p.workers.size())};
      values.insert(values.end(), p.workers.begin(), p.workers.end());
      if (p.sharded()) values.insert(values.end(), p.sizes.begin(), p.sizes.end());
      if (p.mesh()) {  // {rows, columns, kind_0, dim_0, kind_1, dim_1}: kind 1 Shard, 2 Replicate, 3 Partial
        values.insert(values.end(), p.mesh_shape.begin(), p.mesh_shape.end());
        for (const MeshAxis& m : p.mesh_axes) values.insert(values.end(), {m.shard() ? 1 : m.partial() ? 3 : 2, m.dim});
      }
      Answer(c, inst, values, out);
      return Status::Ok();
    }
    case 2:  // record from here on
      c.recording = true;
      c.collective_log.clear();
      c.collectives_dropped = 0;
      return Status::Ok();
    case 3: {  // hand the record over: {entries, dropped, entry...}
      std::vector<int64_t> values = {0, static_cast<int64_t>(c.collectives_dropped)};
      for (size_t i = 0; i + 5 < c.collective_log.size(); i += 6 + static_cast<size_t>(c.collective_log[i + 5])) ++values[0];
      values.insert(values.end(), c.collective_log.begin(), c.collective_log.end());
      c.recording = false;
      c.collective_log = {};  // its memory too
      c.collectives_dropped = 0;
      Answer(c, inst, values, out);
      return Status::Ok();
    }
    default:
      return InvalidArgument(inst.Describe() + ": unknown inspect request " + std::to_string(inst.attrs.seed) +
                             " (1: layout, 2: start recording, 3: the recording)");
  }
}

void ShardingStage::Answer(Client& c, const Instruction& inst, const std::vector<int64_t>& values, Emitter& out) {
  Step s = StepFor(c, inst, out);
  const int worker = workers_.DefaultFor(c);
  Instruction make;
  make.op = Op::kFromBytes;
  make.attrs.shape = {static_cast<int64_t>(values.size())};
  make.attrs.dtype = DType::kInt64;
  make.payload = CopyToBlob(values.data(), values.size() * sizeof(int64_t));
  const TensorId id = NewId(c);
  make.results = {id};
  EmitOn(s, worker, std::move(make));
  s.temporaries.emplace_back(worker, id);
  EmitOn(s, worker, MakeFetch(inst.client, inst.seq, id));
  FreeTemporaries(s);
}

void ShardingStage::Settle(Client& c, Step& s, const Instruction& inst) {
  for (TensorId id : inst.operands) {
    auto it = c.tensors.find(id);
    if (it != c.tensors.end() && it->second.placement.partial()) SettleOne(c, s, it->second);
  }
  SettleMesh(c, s, inst);
}

void ShardingStage::MakeFamilyCopies(Client& c, Step& s, TensorId id) {
  const Tensor& t = c.tensors.at(id);
  const TensorId root = t.view_of.empty() ? id : t.view_of[0].operands.at(0);
  auto base = c.tensors.find(root);
  if (base != c.tensors.end() && base->second.placement.mesh()) MakeCopies(s, base->second);
  for (auto& [member_id, m] : c.tensors) {
    if (member_id == root || !m.placement.mesh() || m.view_of.empty() || m.view_of[0].operands.at(0) != root) continue;
    if (base == c.tensors.end()) {  // its base is gone: nothing can write through it
      MakeCopies(s, m);
      continue;
    }
    // Made again from the base's copies through each view between them (temporaries), then m.
    Placement view = base->second.placement;
    for (size_t i = 0; i < m.view_of.size(); ++i) {
      const bool last = i + 1 == m.view_of.size();
      view.ids = PerMember(s, view, m.view_of[i].op, m.view_of[i].attrs, [&view](size_t r) {
        return std::vector<TensorId>{view.ids[r]};
      }, !last);
    }
    for (size_t k = 0; k < m.placement.workers.size(); ++k) s.temporaries.emplace_back(m.placement.workers[k], m.placement.ids[k]);
    m.placement = view;
  }
}

void ShardingStage::SettleMesh(Client& c, Step& s, const Instruction& inst) {
  for (TensorId id : inst.operands) {
    auto it = c.tensors.find(id);
    if (it != c.tensors.end() && HasPartialAxis(it->second.placement)) SumMeshPartials(s, it->second);
  }
}

void ShardingStage::SettleOne(Client& c, Step& s, Tensor& t) {
  auto base = t.view_of.empty() ? c.tensors.end() : c.tensors.find(t.view_of[0].operands.at(0));
  if (base == c.tensors.end()) {  // not a view, or its base is gone (nothing can write into it then)
    Materialize(s, t);
    t.view_of.clear();
    return;
  }
  if (base->second.placement.partial()) SettleOne(c, s, base->second);
  for (size_t r = 0; r < t.placement.workers.size(); ++r) s.temporaries.emplace_back(t.placement.workers[r], t.placement.ids[r]);
  Placement view = base->second.placement;  // a copy on each of the same workers now
  for (size_t i = 0; i < t.view_of.size(); ++i) {  // the views between them, made again (temporaries), then t
    const bool last = i + 1 == t.view_of.size();
    view.ids = PerMember(s, view, t.view_of[i].op, t.view_of[i].attrs, [&view](size_t r) {
      return std::vector<TensorId>{view.ids[r]};
    }, !last);
  }
  t.placement = view;
  t.view_of.clear();
}

Status ShardingStage::SettleTogether(Client& c, Instruction&& inst, Emitter& out) {
  // The roots of the pending sums named (a view's base when it is there and
  // pending: the view is made again from it when it is needed), once each,
  // grouped by workers and dtype; a group of one is summed as Settle sums it.
  std::vector<Tensor*> roots, on_mesh;
  for (TensorId id : inst.operands) {
    auto it = c.tensors.find(id);
    if (it != c.tensors.end() && HasPartialAxis(it->second.placement) &&
        std::find(on_mesh.begin(), on_mesh.end(), &it->second) == on_mesh.end())
      on_mesh.push_back(&it->second);
    if (it == c.tensors.end() || !it->second.placement.partial()) continue;  // failed, whole or settled: nothing to do
    Tensor* t = &it->second;
    if (!t->view_of.empty()) {
      auto base = c.tensors.find(t->view_of[0].operands.at(0));
      if (base != c.tensors.end() && base->second.placement.partial()) t = &base->second;
    }
    if (std::find(roots.begin(), roots.end(), t) == roots.end()) roots.push_back(t);
  }
  if (roots.empty() && on_mesh.empty()) return Status::Ok();
  Step s = StepFor(c, inst, out);
  for (Tensor* t : on_mesh) SumMeshPartials(s, *t);  // each along its own groups
  if (roots.empty()) {
    Explain(s, {}, on_mesh[0]->placement);
    FreeTemporaries(s);
    return Status::Ok();
  }
  std::vector<bool> done(roots.size(), false);
  for (size_t i = 0; i < roots.size(); ++i) {
    if (done[i]) continue;
    std::vector<Tensor*> group;
    for (size_t j = i; j < roots.size(); ++j)
      if (!done[j] && roots[j]->placement.workers == roots[i]->placement.workers &&
          roots[j]->meta.dtype == roots[i]->meta.dtype) {
        group.push_back(roots[j]);
        done[j] = true;
      }
    if (group.size() == 1) SettleOne(c, s, *group[0]);
    else MaterializeTogether(s, group, group[0]->made_by);
    for (Tensor* t : group) t->view_of.clear();
  }
  Explain(s, {}, roots[0]->placement);  // "settle #N: -> replicated on [...]; collectives: all_reduce(sum) [...]"
  FreeTemporaries(s);
  return Status::Ok();
}

void ShardingStage::Adopt(Step& s, Tensor& x) {
  // The worker's redistribute kernel refuses an operand whose shape or dtype
  // is not the one stated; a copy that was never made stands in with the
  // stated shape in any collective, so no member waits or mismatches sizes.
  const int worker = x.placement.workers[0];
  Instruction check;
  check.op = Op::kRedistribute;
  check.attrs.axes = {0, 0, worker};
  check.attrs.shape = x.meta.shape;
  check.attrs.dtype = x.meta.dtype;
  check.operands = {x.placement.ids[0]};
  const TensorId copy = NewId(*s.client);
  check.results = {copy};
  EmitOn(s, worker, std::move(check));
  s.temporaries.emplace_back(worker, copy);
  x.placement.ids = {copy};
}

// A tensor stops being a constant when it may be written: as the destination
// of a write (whether or not it succeeds), as an operand of a unit, or when
// it is viewed (a view shares its data: a write through it writes the base).
void ShardingStage::ForgetConstants(Client& c, const Instruction& inst) {
  const Op op = inst.op;
  const bool views = IsView(op);
  const bool writes = KindOf(op) == OpKind::kMutate && op != Op::kAdamStep;  // operand 0 only
  if (!views && !writes && op != Op::kRunUnit && op != Op::kAdamStep) return;
  for (size_t i = 0; i < inst.operands.size() && (i == 0 || !writes); ++i) {
    auto it = c.tensors.find(inst.operands[i]);
    if (it != c.tensors.end()) it->second.constant.reset();
  }
}

Status ShardingStage::Compute(Client& c, Instruction inst, Emitter& out) {
  if (Status f = c.failed.CheckOperands(inst); !f.ok()) {
    for (TensorId r : inst.results) c.failed.RecordIfAbsent(r, inst.seq);
    return f;
  }
  std::vector<const Tensor*> in;
  bool unrecorded = false;
  for (TensorId id : inst.operands) {
    auto it = c.tensors.find(id);
    unrecorded = unrecorded || it == c.tensors.end();
    in.push_back(it == c.tensors.end() ? nullptr : &it->second);
  }
  ForgetConstants(c, inst);
  // A tensor from before the client's first config takes part, for this op
  // only, as the client describes it (Adopt: checked on its worker first).
  std::optional<Tensor> adopted;
  if (unrecorded && inst.op == Op::kRedistribute) {
    if (c.default_worker < 0 || !workers_.IsLive(c.default_worker)) {
      c.failed.Record(inst.results.at(0), inst.seq);
      return InvalidArgument(inst.Describe() + ": unknown tensor " + TensorName(inst.operands[0]));
    }
    adopted = Tensor{TensorMeta{inst.attrs.shape, inst.attrs.dtype},
                     Placement{Placement::Kind::kWhole, {c.default_worker}, {inst.operands[0]}, 0, {}}};
    in[0] = &*adopted;
    unrecorded = false;
  }
  if (unrecorded) return Unrecorded(c, std::move(inst), in, out);
  const bool produces = ProducesTensor(inst.op);
  TensorMeta meta;
  if (produces) {
    std::vector<const TensorMeta*> metas;
    for (const Tensor* t : in) metas.push_back(&t->meta);
    Result<TensorMeta> m = InferResult(inst, metas);
    if (!m.ok()) {
      for (TensorId r : inst.results) c.failed.Record(r, inst.seq);
      return m.status();
    }
    meta = *m;
  }
  Step s = StepFor(c, inst, out);
  if (adopted) Adopt(s, *adopted);
  const bool pending = std::any_of(in.begin(), in.end(), [](const Tensor* t) { return t->placement.partial(); });
  if (pending && !CarriesPartial(inst, in, meta)) Settle(c, s, inst);
  // On a 2-D mesh (mesh.h): the op runs piece by piece there, or its mesh
  // operands are gathered into copies for the 1-D strategies below.
  std::optional<Result<Placement>> placed;
  std::vector<Tensor> unmeshed, moved;
  const bool redistribute = inst.op == Op::kRedistribute;  // its target is its own, not the scope's
  const bool to_mesh = redistribute && !inst.attrs.axes.empty() && inst.attrs.axes[0] == kMeshLayout;
  if (to_mesh || std::any_of(in.begin(), in.end(), [](const Tensor* t) { return t->placement.mesh(); })) {
    if (!MeshCarries(inst, in, meta)) SettleMesh(c, s, inst);
    // An optimizer's state on the mesh, its parameter copies since a view made it so: the state
    // becomes copies alike (the 1-D update then runs where each lives).
    if (inst.op == Op::kAdamStep && in.size() == 4 && in[0]->placement.replicated())
      for (size_t i : {size_t{2}, size_t{3}})
        if (in[i]->placement.mesh() && in[i]->placement.workers == in[0]->placement.workers)
          MakeFamilyCopies(c, s, inst.operands[i]);
    if (redistribute) {
      placed = MeshRedistribute(s, *in[0], meta);
    } else if (MeshRuns(inst, in, meta)) {
      placed = MeshOp(s, in, meta);
    } else if (WritesMesh(inst, in)) {  // never into copies made for the op: the write would be lost
      placed = InvalidArgument(inst.Describe() + ": it writes a tensor on a mesh (" + in[0]->placement.ToString() +
                               ") with operands laid out unlike it (a parameter and its optimizer state must be "
                               "laid out alike)");
    } else if (IsView(inst.op)) {  // a view shares its operand's data: the records themselves become copies
      for (TensorId id : inst.operands) {
        auto it = c.tensors.find(id);
        if (it != c.tensors.end() && it->second.placement.mesh()) MakeFamilyCopies(c, s, id);
      }
    } else {
      unmeshed.reserve(in.size());  // `in` points into it
      for (const Tensor*& t : in) {
        if (!t->placement.mesh()) continue;
        unmeshed.push_back(Unmesh(s, *t));
        t = &unmeshed.back();
      }
    }
  }
  if (!placed) {
    Status forwarded = Status::Ok();
    placed = PlaceOnWorkers(c, s, inst, in, meta, moved, forwarded, out);
    if (!placed) return forwarded;  // sent on as it is
  }
  if (!placed->ok()) {
    FreeTemporaries(s);
    for (TensorId r : inst.results) c.failed.Record(r, inst.seq);
    return placed->status();
  }
  Explain(s, in, **placed);
  FreeTemporaries(s);
  if (produces) {
    Tensor& made = c.tensors[inst.results.at(0)] = Tensor{meta, std::move(**placed)};
    if (IsView(inst.op) && made.placement.mesh() && in[0]->placement.mesh()) {  // for MakeFamilyCopies
      made.view_of = in[0]->view_of;
      made.view_of.push_back(inst);
    }
    if (made.placement.partial() || HasPartialAxis(made.placement)) {  // carried through a linear op, it keeps the op that made its addends
      made.made_by = inst.seq;
      if (IsView(inst.op) && made.placement.partial()) {  // a view of a view keeps the first base and every op from it
        made.view_of = in[0]->view_of;
        made.view_of.push_back(inst);
      }
      for (const Tensor* t : in)
        if ((t->placement.partial() || HasPartialAxis(t->placement)) && t->made_by) {
          made.made_by = t->made_by;
          break;
        }
    }
  }
  return Status::Ok();
}

std::optional<Result<Placement>> ShardingStage::PlaceOnWorkers(Client& c, Step& s, Instruction& inst,
                                                               std::vector<const Tensor*>& in, TensorMeta& meta,
                                                               std::vector<Tensor>& moved, Status& forwarded,
                                                               Emitter& out) {
  // Inside a scope whose config names workers the op runs on them: operands
  // living elsewhere are moved in first (pipeline stages, backward signals).
  auto config = inst.signal.empty() ? c.configs.end() : c.configs.find(inst.signal);
  const bool redistribute = inst.op == Op::kRedistribute;  // its target is its own, not the scope's
  if (!redistribute && config != c.configs.end() && (config->second.sharded || config->second.replicated)) {
    moved.reserve(in.size());  // `in` points into it
    if (Status st = CheckConfig(inst.signal, config->second, workers_, nullptr); !st.ok()) return st;
    const bool mutate = KindOf(inst.op) == OpKind::kMutate;
    for (size_t i = mutate ? 1 : 0; i < in.size(); ++i) {
      std::optional<Tensor> m = MoveInto(s, *in[i], config->second);
      if (!m) continue;
      moved.push_back(std::move(*m));
      in[i] = &moved.back();
    }
  }
  bool all_whole = true;
  for (const Tensor* t : in) all_whole = all_whole && t->placement.whole();
  if (all_whole && moved.empty() && !in.empty() && !explain_ && !redistribute) {
    const int worker = in[0]->placement.workers[0];
    bool together = true;
    for (const Tensor* t : in) together = together && t->placement.workers[0] == worker;
    // Nothing to assemble: the op itself goes to their worker, uncopied.
    if (together) {
      forwarded = Forward(c, std::move(inst), worker, std::move(meta), out);
      return std::nullopt;
    }
  }
  // The strategy table (strategy_table.h) picks how the op runs on its operands' placements.
  return RunStrategy(s, in, meta);
}

Status ShardingStage::Forward(Client& c, Instruction&& inst, int worker, TensorMeta meta, Emitter& out) {
  if (ProducesTensor(inst.op)) {
    const TensorId result = inst.results.at(0);
    c.tensors[result] = Tensor{std::move(meta), Placement{Placement::Kind::kWhole, {worker}, {result}, 0, {}}};
  }
  inst.worker = worker;
  out.Emit(std::move(inst));
  return Status::Ok();
}

Status ShardingStage::Unrecorded(Client& c, Instruction inst, const std::vector<const Tensor*>& in, Emitter& out) {
  const int worker = c.default_worker;
  if (worker < 0 || !workers_.IsLive(worker)) {  // it never made a tensor, or they are gone: the router names it
    out.Emit(std::move(inst));
    return Status::Ok();
  }
  const Instruction original = inst;
  Step s = StepFor(c, original, out);
  Settle(c, s, original);
  // An optimizer step writes its state too: none of it may be a copy.
  if (inst.op == Op::kAdamStep) {
    for (size_t i : {size_t{0}, size_t{2}, size_t{3}})
      if (in[i] && !(in[i]->placement.whole() && in[i]->placement.workers[0] == worker))
        return FailedPrecondition(inst.Describe() + ": " + TensorName(inst.operands[i]) + " is " +
                                  in[i]->placement.ToString() + ", the others whole on worker " +
                                  std::to_string(worker) + "; a parameter and its optimizer state must be laid out alike");
  }
  if (KindOf(inst.op) == OpKind::kMutate && in[0] &&
      !(in[0]->placement.whole() && in[0]->placement.workers[0] == worker)) {
    for (size_t i = 1; i < in.size(); ++i)
      if (!in[i])
        return FailedPrecondition(inst.Describe() + ": cannot write " + TensorName(inst.operands[i]) +
                                  " (made before this client's first signal config; its shape is not known to the "
                                  "sharding stage) into a tensor that is " + in[0]->placement.ToString());
  }
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i]) inst.operands[i] = WholeOn(s, *in[i], worker);
  EmitOn(s, worker, std::move(inst));
  Explain(s, in, Placement{Placement::Kind::kWhole, {worker}, {}, 0, {}});
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
