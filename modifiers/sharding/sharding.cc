#include "sharding.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <set>
#include <sstream>

#include "gt/metrics.h"
#include "gt/unit.h"

namespace gt::sharding {
namespace {

std::string List(const std::vector<int>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string Name(TensorId id) { return "%" + std::to_string(id); }

bool Contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// `dim` counted from the front (a negative one counts from the back).
int64_t Wrap(int64_t dim, size_t rank) { return dim < 0 ? dim + static_cast<int64_t>(rank) : dim; }

// Same kind on the same workers, and for shards the same axis and sizes:
// member r of each holds the same part of its tensor.
bool SameLayout(const Placement& a, const Placement& b) {
  if (a.kind != b.kind || a.workers != b.workers) return false;
  return !a.sharded() || (a.axis == b.axis && a.sizes == b.sizes);
}

}  // namespace

std::string Placement::ToString() const {
  switch (kind) {
    case Kind::kWhole: return "whole on " + std::to_string(workers.empty() ? -1 : workers[0]);
    case Kind::kReplicated: return "replicated on " + List(workers);
    case Kind::kSharded: {
      std::vector<int> sizes_as_int(sizes.begin(), sizes.end());
      return "sharded(axis " + std::to_string(axis) + ") on " + List(workers) + " sizes " + List(sizes_as_int);
    }
  }
  return "?";
}

std::vector<int64_t> ChunkSizes(int64_t length, size_t parts) {
  std::vector<int64_t> out;
  if (length <= 0 || parts == 0) return out;
  const int64_t chunk = (length + static_cast<int64_t>(parts) - 1) / static_cast<int64_t>(parts);
  for (int64_t start = 0; start < length; start += chunk) out.push_back(std::min(chunk, length - start));
  return out;
}

// ---- setup -----------------------------------------------------------------

Result<std::unique_ptr<Stage>> ShardingStage::Create(const StageContext& context) {
  const std::string host = context.options->GetString(kOptionRendezvousHost);
  const int64_t port = context.options->GetInt(kOptionRendezvousPort);
  bool explain = context.options->GetBool(kOptionExplain);
  if (const char* env = std::getenv("GT_EXPLAIN"); env && *env && std::string(env) != "0") explain = true;
  bool auto_shard = context.options->GetBool(kOptionAutoShard);
  if (const char* env = std::getenv("GT_AUTO_SHARD"); env && *env && std::string(env) != "0") auto_shard = true;
  std::shared_ptr<c10d::TCPStore> store;
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(port);
    options.isServer = true;
    options.waitWorkers = false;
    store = std::make_shared<c10d::TCPStore>(host, options);
  } catch (const std::exception& e) {
    return Unavailable("sharding: cannot host the rendezvous store on " + host + ":" + std::to_string(port) + ": " +
                       e.what());
  }
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
  std::string rendezvous = host + ":" + std::to_string(store->getPort());
  return std::unique_ptr<Stage>(
      new ShardingStage(std::move(rendezvous), explain, auto_shard, std::move(store), gauges));
}

ShardingStage::ShardingStage(std::string rendezvous, bool explain, bool auto_shard,
                             std::shared_ptr<c10d::TCPStore> store, Gauges gauges)
    : rendezvous_(std::move(rendezvous)),
      explain_(explain),
      auto_shard_(auto_shard),
      store_(std::move(store)),
      gauges_(gauges) {}
ShardingStage::~ShardingStage() = default;

// ---- the stream --------------------------------------------------------------

// The dispatcher announces its workers before any client instruction
// reaches its stages; should every worker be lost, a client's ops fail here
// at once (reported to that client) rather than wait.
Status ShardingStage::Process(Instruction&& inst, Emitter& out) {
  switch (inst.op) {
    case Op::kMembership: live_.assign(inst.attrs.shape.begin(), inst.attrs.shape.end()); break;
    case Op::kDropClient: clients_.erase(inst.client); break;  // the client left: forget everything of it
    default: return Handle(std::move(inst), out);
  }
  out.Emit(std::move(inst));
  return Status::Ok();
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
        return InvalidArgument(inst.Describe() + ": tensor ids from " + Name(kPhysicalIdBase) + " up are reserved");
  if (live_.empty()) {
    for (TensorId r : inst.results) c.failed.emplace(r, inst.seq);
    return Unavailable(inst.Describe() + ": no live worker");
  }
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
    if (Status f = Failed(c, inst); !f.ok()) {
      for (TensorId r : inst.results) c.failed.emplace(r, inst.seq);
      if (inst.op == Op::kRunUnit) FreeConsumed(c, inst, out);
      return f;
    }
  }
  // What takes no tensor is made where the client's tensors are (a unit of a
  // compile scope can take none).
  if (KindOf(inst.op) == OpKind::kCreate || (inst.op == Op::kRunUnit && inst.operands.empty()))
    inst.worker = DefaultWorker(c);
  out.Emit(std::move(inst));
  return Status::Ok();
}

void ShardingStage::FreeConsumed(Client& c, const Instruction& run, Emitter& out) {
  Instruction free;
  free.op = Op::kFree;
  free.client = run.client;
  free.seq = run.seq;
  free.operands = ConsumedOperands(run);
  if (!free.operands.empty()) (void)Free(c, std::move(free), out);
}

Status ShardingStage::Configure(Client& c, const Instruction& inst) {
  if (inst.signal.empty()) return InvalidArgument("configure: no signal name");
  if (inst.attrs.scalar == 1) {
    c.configs.erase(inst.signal);
    return Status::Ok();
  }
  Config config;
  config.sharded = !inst.attrs.axes.empty();
  if (config.sharded) config.axis = inst.attrs.axes[0];
  for (int64_t w : inst.attrs.shape) {
    if (w < 0 || w > 1 << 20)
      return InvalidArgument("signal '" + inst.signal + "': shard.workers: bad worker index " + std::to_string(w));
    config.workers.push_back(static_cast<int>(w));
  }
  config.replicated = inst.attrs.keepdims;
  config.compile = inst.attrs.seed != 0;
  if (inst.payload) config.backward.assign(reinterpret_cast<const char*>(inst.payload->data()), inst.payload->size());
  c.configs[inst.signal] = std::move(config);
  c.placing = true;  // from now on its tensors get records (older ones stay without)
  return Status::Ok();
}

std::vector<int> ShardingStage::WorkersOf(const Config& config) const {
  return config.workers.empty() ? live_ : config.workers;
}

Status ShardingStage::CheckConfig(const std::string& signal, const Config& config, const Client& c,
                                  const Shape* shape) const {
  const std::string where = "signal '" + signal + "': ";
  for (size_t i = 0; i < config.workers.size(); ++i)
    if (!Contains(live_, config.workers[i]))
      return InvalidArgument(where + "shard.workers[" + std::to_string(i) + "]: worker index " +
                             std::to_string(config.workers[i]) + " is not a live worker (live: " + List(live_) + ")");
  if (shape && config.sharded && !shape->empty()) {  // a scalar is placed whole
    const int64_t rank = static_cast<int64_t>(shape->size());
    if (config.axis < -rank || config.axis >= rank)
      return InvalidArgument(where + "shard.axis: " + std::to_string(config.axis) + " is out of range for a tensor of shape " +
                             ShapeToString(*shape));
  }
  return Status::Ok();
}

int ShardingStage::DefaultWorker(Client& c) {
  if (c.default_worker >= 0 && Contains(live_, c.default_worker)) return c.default_worker;
  c.default_worker = live_[next_default_++ % live_.size()];
  return c.default_worker;
}

Status ShardingStage::Failed(const Client& c, const Instruction& inst) const {
  for (TensorId id : inst.operands)
    if (auto f = c.failed.find(id); f != c.failed.end())
      return FailedPrecondition(inst.Describe() + ": operand " + Name(id) + " does not exist because op #" +
                                std::to_string(f->second) + " failed");
  return Status::Ok();
}

// ---- emitting --------------------------------------------------------------

void ShardingStage::Keep(Step& s, const std::vector<TensorId>& ids) {
  auto kept = [&ids](const std::pair<int, TensorId>& e) { return std::find(ids.begin(), ids.end(), e.second) != ids.end(); };
  s.temporaries.erase(std::remove_if(s.temporaries.begin(), s.temporaries.end(), kept), s.temporaries.end());
}

void ShardingStage::EmitOn(Step& s, int worker, Instruction inst) {
  inst.client = s.inst->client;
  inst.seq = s.inst->seq;
  if (inst.signal.empty()) inst.signal = s.inst->signal;
  inst.worker = worker;
  s.out->Emit(std::move(inst));
}

void ShardingStage::FreeTemporaries(Step& s) {
  for (auto& [w, id] : s.temporaries) {
    Instruction f;
    f.op = Op::kFree;
    f.operands = {id};
    EmitOn(s, w, f);
  }
  s.temporaries.clear();
}

std::vector<TensorId> ShardingStage::EachMember(Step& s, const Placement& p) {
  std::vector<TensorId> ids;
  for (size_t r = 0; r < p.workers.size(); ++r) {
    Instruction piece = *s.inst;
    piece.operands = {p.ids[r]};
    TensorId id = NewId(*s.client);
    piece.results = {id};
    EmitOn(s, p.workers[r], std::move(piece));
    ids.push_back(id);
  }
  return ids;
}

Instruction ShardingStage::Collective(Step& s, Op op, const std::vector<int>& group, int rank) {
  Instruction inst;
  inst.op = op;
  for (int w : group) inst.attrs.numbers.push_back(w);
  inst.attrs.axes = {rank};
  inst.payload = CopyToBlob(rendezvous_.data(), rendezvous_.size());
  (void)s;
  return inst;
}

std::map<int, TensorId> ShardingStage::Replicate(Step& s, const Tensor& t, const std::vector<int>& workers) {
  std::map<int, TensorId> out;
  const Placement& p = t.placement;
  if (p.replicated() || p.whole()) {
    std::vector<int> missing;
    for (int w : workers) {
      auto at = std::find(p.workers.begin(), p.workers.end(), w);
      if (at != p.workers.end()) out[w] = p.ids[static_cast<size_t>(at - p.workers.begin())];
      else missing.push_back(w);
    }
    if (missing.empty()) return out;
    const int root = p.workers[0];
    std::vector<int> group = {root};
    group.insert(group.end(), missing.begin(), missing.end());
    s.collectives.push_back("broadcast " + List(group));
    Instruction b = Collective(s, Op::kBroadcast, group, 0);
    b.attrs.axes = {0, 0};
    b.attrs.shape = t.meta.shape;
    b.attrs.dtype = t.meta.dtype;
    b.operands = {p.ids[0]};
    TensorId root_copy = NewId(*s.client);
    b.results = {root_copy};
    EmitOn(s, root, b);
    s.temporaries.emplace_back(root, root_copy);
    for (size_t r = 1; r < group.size(); ++r) {
      Instruction m = b;
      m.attrs.axes = {static_cast<int64_t>(r), 0};
      m.operands.clear();
      TensorId id = NewId(*s.client);
      m.results = {id};
      EmitOn(s, group[r], m);
      s.temporaries.emplace_back(group[r], id);
      out[group[r]] = id;
    }
    return out;
  }
  // Sharded: all-gather among its workers, then copy on to the rest.
  s.collectives.push_back("all_gather " + List(p.workers));
  Tensor gathered{t.meta, Placement{Placement::Kind::kReplicated, p.workers, {}, 0, {}}};
  for (size_t r = 0; r < p.workers.size(); ++r) {
    Instruction g = Collective(s, Op::kAllGather, p.workers, static_cast<int>(r));
    g.attrs.axes = {static_cast<int64_t>(r), p.axis};
    g.attrs.axes.insert(g.attrs.axes.end(), p.sizes.begin(), p.sizes.end());
    g.attrs.shape = t.meta.shape;  // this member's piece (a member whose piece failed stands in with one)
    g.attrs.shape[static_cast<size_t>(p.axis)] = p.sizes[r];
    g.attrs.dtype = t.meta.dtype;
    g.operands = {p.ids[r]};
    TensorId id = NewId(*s.client);
    g.results = {id};
    EmitOn(s, p.workers[r], g);
    s.temporaries.emplace_back(p.workers[r], id);
    gathered.placement.ids.push_back(id);
  }
  return Replicate(s, gathered, workers);
}

TensorId ShardingStage::WholeOn(Step& s, const Tensor& t, int worker) {
  // The common case (no signals in play) needs no copy and no bookkeeping.
  if (t.placement.whole() && t.placement.workers[0] == worker) return t.placement.ids[0];
  return Replicate(s, t, {worker})[worker];
}

std::vector<TensorId> ShardingStage::ShardLike(Step& s, const Tensor& t, int64_t axis, const Placement& like) {
  if (t.placement.sharded() && t.placement.axis == axis && t.placement.workers == like.workers &&
      t.placement.sizes == like.sizes)
    return t.placement.ids;
  std::map<int, TensorId> copies = Replicate(s, t, like.workers);
  std::vector<TensorId> out;
  int64_t start = 0;
  for (size_t r = 0; r < like.workers.size(); ++r) {
    Instruction slice;
    slice.op = Op::kSlice;
    slice.attrs.axes = {axis, start, start + like.sizes[r], 1};
    start += like.sizes[r];
    slice.operands = {copies[like.workers[r]]};
    TensorId id = NewId(*s.client);
    slice.results = {id};
    EmitOn(s, like.workers[r], slice);
    s.temporaries.emplace_back(like.workers[r], id);
    out.push_back(id);
  }
  s.collectives.push_back("slice to " + like.ToString());
  return out;
}

std::vector<TensorId> ShardingStage::AllReduce(Step& s, const Placement& p, const std::vector<TensorId>& ids,
                                               const TensorMeta& meta, int op) {
  s.collectives.push_back(std::string("all_reduce(") + (op == 1 ? "max" : op == 2 ? "min" : "sum") + ") " + List(p.workers));
  std::vector<TensorId> out;
  for (size_t r = 0; r < p.workers.size(); ++r) {
    Instruction a = Collective(s, Op::kAllReduce, p.workers, static_cast<int>(r));
    a.attrs.scalar = op;
    a.attrs.shape = meta.shape;  // announced for a member whose operand failed (it stands in with one)
    a.attrs.dtype = meta.dtype;
    a.operands = {ids[r]};
    TensorId id = NewId(*s.client);
    a.results = {id};
    EmitOn(s, p.workers[r], a);
    out.push_back(id);
  }
  return out;
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
  Step s{&c, &inst, &out, {}, {}};
  Placement p;
  // Auto-sharding: no config applies, so axis 0 over every live worker when it divides, else replicated.
  Config automatic;
  if (config == c.configs.end() && auto_shard_ && live_.size() > 1) {
    const Shape& shape = meta->shape;
    automatic.sharded = !shape.empty() && shape[0] % static_cast<int64_t>(live_.size()) == 0 && shape[0] > 0;
    automatic.replicated = !automatic.sharded;
  }
  const Config* chosen = config != c.configs.end() ? &config->second
                         : automatic.sharded || automatic.replicated ? &automatic
                                                                     : nullptr;
  if (chosen) {
    const Config& cfg = *chosen;
    if (Status st = CheckConfig(inst.signal, cfg, c, &meta->shape); !st.ok()) {
      c.failed[result] = inst.seq;
      return st;
    }
    std::vector<int> workers = cfg.replicated || cfg.sharded ? WorkersOf(cfg) : std::vector<int>{};
    const bool local_ok = inst.op == Op::kZeros || inst.op == Op::kOnes ||
                          ((inst.op == Op::kRandn || inst.op == Op::kRand) && inst.attrs.seed == 0);
    if (cfg.sharded && meta->shape.empty()) {
      // A scalar cannot be split: whole on the scope's first worker.
      Instruction whole = inst;
      EmitOn(s, workers[0], whole);
      p = Placement{Placement::Kind::kWhole, {workers[0]}, {result}, 0, {}};
    } else if (cfg.sharded) {
      const int64_t rank = static_cast<int64_t>(meta->shape.size());
      const int64_t axis = cfg.axis < 0 ? cfg.axis + rank : cfg.axis;
      std::vector<int64_t> sizes = ChunkSizes(meta->shape[axis], workers.size());
      if (sizes.size() >= 1) {
        workers.resize(sizes.size());
        p.kind = Placement::Kind::kSharded;
        p.workers = workers;
        p.axis = axis;
        p.sizes = sizes;
        const bool split_payload = inst.op == Op::kFromBytes && axis == 0 && inst.payload;
        if (local_ok || split_payload) {
          const size_t row_bytes = meta->shape[0] == 0 ? 0 : (inst.payload ? inst.payload->size() / meta->shape[0] : 0);
          int64_t start = 0;
          for (size_t r = 0; r < workers.size(); ++r) {
            Instruction piece = inst;
            piece.attrs.shape[axis] = sizes[r];
            if (split_payload) {
              if (inst.payload->size() != row_bytes * meta->shape[0])
                return InvalidArgument(inst.Describe() + ": payload size does not match shape and dtype");
              piece.payload = CopyToBlob(inst.payload->data() + start * row_bytes, sizes[r] * row_bytes);
            }
            start += sizes[r];
            TensorId id = NewId(c);
            piece.results = {id};
            EmitOn(s, workers[r], piece);
            p.ids.push_back(id);
          }
          s.collectives.push_back(split_payload ? "payload split by the dispatcher" : "created in place");
        } else {
          // Values that must match a one-worker run: made whole, then scattered.
          Instruction whole = inst;
          TensorId id = NewId(c);
          whole.results = {id};
          EmitOn(s, workers[0], whole);
          s.temporaries.emplace_back(workers[0], id);
          Tensor t{*meta, Placement{Placement::Kind::kWhole, {workers[0]}, {id}, 0, {}}};
          p.ids = ShardLike(s, t, axis, p);
          Keep(s, p.ids);  // the slices are the shards
        }
      }
    } else if (cfg.replicated) {
      p.kind = Placement::Kind::kReplicated;
      p.workers = workers;
      if (local_ok && inst.op != Op::kRandn && inst.op != Op::kRand) {
        for (int w : workers) {
          Instruction copy = inst;
          TensorId id = NewId(c);
          copy.results = {id};
          EmitOn(s, w, copy);
          p.ids.push_back(id);
        }
      } else {
        Instruction whole = inst;
        whole.results = {result};
        EmitOn(s, workers[0], whole);
        Tensor t{*meta, Placement{Placement::Kind::kWhole, {workers[0]}, {result}, 0, {}}};
        std::map<int, TensorId> copies = Replicate(s, t, workers);
        for (int w : workers) p.ids.push_back(copies[w]);
        Keep(s, p.ids);  // the broadcast's results are the replicas
      }
    }
  }
  if (p.ids.empty()) {  // whole: no config, or nothing to split
    p = Placement{Placement::Kind::kWhole, {DefaultWorker(c)}, {result}, 0, {}};
    EmitOn(s, p.workers[0], inst);
  }
  Explain(s, {}, p);
  FreeTemporaries(s);
  c.tensors[result] = Tensor{*meta, std::move(p)};
  return Status::Ok();
}

// Whole tensors stay in `inst` (compacted in place), which goes on to the
// router; every shard or copy gets a free on its worker.
Status ShardingStage::Free(Client& c, Instruction inst, Emitter& out) {
  Step s{&c, &inst, &out, {}, {}};
  size_t kept = 0;
  for (size_t i = 0; i < inst.operands.size(); ++i) {
    const TensorId id = inst.operands[i];
    if (c.failed.erase(id)) continue;  // never made: nothing to free
    auto it = c.tensors.find(id);
    if (it == c.tensors.end() || it->second.placement.whole()) {
      if (it != c.tensors.end()) c.tensors.erase(it);
      inst.operands[kept++] = id;
      continue;
    }
    const Placement& p = it->second.placement;
    for (size_t r = 0; r < p.workers.size(); ++r) {
      Instruction f;
      f.op = Op::kFree;
      f.operands = {p.ids[r]};
      EmitOn(s, p.workers[r], f);
    }
    c.tensors.erase(it);
  }
  inst.operands.resize(kept);
  if (kept) out.Emit(std::move(inst));
  return Status::Ok();
}

Status ShardingStage::Fetch(Client& c, Instruction inst, Emitter& out) {
  if (Status f = Failed(c, inst); !f.ok()) return f;
  if (inst.operands.size() != 1) {
    out.Emit(std::move(inst));
    return Status::Ok();
  }
  auto it = c.tensors.find(inst.operands[0]);
  if (it == c.tensors.end() || it->second.placement.whole()) {
    out.Emit(std::move(inst));
    return Status::Ok();
  }
  Step s{&c, &inst, &out, {}, {}};
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

Status ShardingStage::Compute(Client& c, Instruction inst, Emitter& out) {
  if (Status f = Failed(c, inst); !f.ok()) {
    for (TensorId r : inst.results) c.failed[r] = c.failed.count(r) ? c.failed[r] : inst.seq;
    return f;
  }
  std::vector<const Tensor*> in;
  bool unrecorded = false;
  for (TensorId id : inst.operands) {
    auto it = c.tensors.find(id);
    unrecorded = unrecorded || it == c.tensors.end();
    in.push_back(it == c.tensors.end() ? nullptr : &it->second);
  }
  if (unrecorded) return Unrecorded(c, std::move(inst), in, out);
  const bool produces = ProducesTensor(inst.op);
  TensorMeta meta;
  if (produces) {
    std::vector<const TensorMeta*> metas;
    for (const Tensor* t : in) metas.push_back(&t->meta);
    Result<TensorMeta> m = InferResult(inst, metas);
    if (!m.ok()) {
      for (TensorId r : inst.results) c.failed[r] = inst.seq;
      return m.status();
    }
    meta = *m;
  }
  Step s{&c, &inst, &out, {}, {}};
  // Inside a scope whose config names workers the op runs on them: operands
  // living elsewhere are moved in first (pipeline stages, backward signals).
  std::vector<Tensor> moved;
  auto config = inst.signal.empty() ? c.configs.end() : c.configs.find(inst.signal);
  if (config != c.configs.end() && (config->second.sharded || config->second.replicated)) {
    moved.reserve(in.size());  // `in` points into it
    if (Status st = CheckConfig(inst.signal, config->second, c, nullptr); !st.ok()) {
      for (TensorId r : inst.results) c.failed[r] = inst.seq;
      return st;
    }
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
  if (all_whole && moved.empty() && !in.empty() && !explain_) {
    const int worker = in[0]->placement.workers[0];
    bool together = true;
    for (const Tensor* t : in) together = together && t->placement.workers[0] == worker;
    // Nothing to assemble: the op itself goes to their worker, uncopied.
    if (together) return Forward(c, std::move(inst), worker, std::move(meta), out);
  }
  Result<Placement> placed = Internal("no strategy");
  if (all_whole || in.empty()) {
    placed = Whole(s, in, meta);
  } else if (inst.op == Op::kSoftmax || inst.op == Op::kLogSoftmax) {
    placed = Softmax(s, *in[0], meta);
  } else if (KindOf(inst.op) == OpKind::kBinary || KindOf(inst.op) == OpKind::kMutate ||
             KindOf(inst.op) == OpKind::kUnary) {
    placed = Elementwise(s, in, meta);
  } else if (inst.op == Op::kMatmul) {
    placed = Matmul(s, in, meta);
  } else if (KindOf(inst.op) == OpKind::kReduce) {
    placed = Reduce(s, *in[0], meta);
  } else if (inst.op == Op::kCat) {
    placed = Cat(s, in, meta);
  } else if (inst.op == Op::kSlice || inst.op == Op::kSelect) {
    placed = SliceOrSelect(s, *in[0], meta);
  } else if (KindOf(inst.op) == OpKind::kMovement && in.size() == 1) {
    placed = Movement(s, *in[0], meta);
  } else {
    placed = Whole(s, in, meta);
  }
  if (!placed.ok()) {
    for (TensorId r : inst.results) c.failed[r] = inst.seq;
    return placed.status();
  }
  Explain(s, in, *placed);
  FreeTemporaries(s);
  if (produces) c.tensors[inst.results.at(0)] = Tensor{meta, std::move(*placed)};
  return Status::Ok();
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
  if (worker < 0 || !Contains(live_, worker)) {  // it never made a tensor, or they are gone: the router names it
    out.Emit(std::move(inst));
    return Status::Ok();
  }
  const Instruction original = inst;
  Step s{&c, &original, &out, {}, {}};
  if (KindOf(inst.op) == OpKind::kMutate && in[0] &&
      !(in[0]->placement.whole() && in[0]->placement.workers[0] == worker)) {
    for (size_t i = 1; i < in.size(); ++i)
      if (!in[i])
        return FailedPrecondition(inst.Describe() + ": cannot write " + Name(inst.operands[i]) +
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
      if (!c.tensors.count(r)) c.failed.emplace(r, inst.seq);  // a live tensor keeps its id
    FreeConsumed(c, inst, out);  // the client has forgotten them
    return status;
  };
  if (Status f = Failed(c, inst); !f.ok()) return refuse(f);
  const int home = DefaultWorker(c);
  for (TensorId id : inst.operands) {
    auto it = c.tensors.find(id);
    if (it == c.tensors.end()) continue;  // unrecorded: whole on `home`
    const Placement& p = it->second.placement;
    if (!p.whole() || p.workers[0] != home)
      return refuse(InvalidArgument(inst.Describe() + ": operand " + Name(id) + " is " + p.ToString() +
                                    "; a compiled unit takes only tensors whole on the client's worker " +
                                    std::to_string(home) + " (where this stage places a client's tensors, units "
                                    "are made after it, not by the client)"));
  }
  for (TensorId r : inst.results)
    if (c.tensors.count(r)) return refuse(InvalidArgument(inst.Describe() + ": result " + Name(r) + " already names a live tensor"));
  for (TensorId id : ConsumedOperands(inst)) c.tensors.erase(id);
  inst.worker = home;
  out.Emit(std::move(inst));
  return Status::Ok();
}

std::optional<ShardingStage::Tensor> ShardingStage::MoveInto(Step& s, const Tensor& t, const Config& config) {
  const std::vector<int> workers = WorkersOf(config);
  bool inside = true;
  for (int w : t.placement.workers) inside = inside && Contains(workers, w);
  if (inside) return std::nullopt;
  Tensor out{t.meta, {}};
  if (t.placement.whole()) {
    out.placement = Placement{Placement::Kind::kWhole, {workers[0]}, {WholeOn(s, t, workers[0])}, 0, {}};
    return out;
  }
  const int64_t rank = static_cast<int64_t>(t.meta.shape.size());
  const int64_t axis = config.axis < 0 ? config.axis + rank : config.axis;
  if (t.placement.sharded() && config.sharded && axis >= 0 && axis < rank) {
    std::vector<int64_t> sizes = ChunkSizes(t.meta.shape[axis], workers.size());
    if (!sizes.empty()) {
      Placement like{Placement::Kind::kSharded, workers, {}, axis, sizes};
      like.workers.resize(sizes.size());
      like.ids = ShardLike(s, t, axis, like);
      out.placement = std::move(like);
      return out;
    }
  }
  std::map<int, TensorId> copies = Replicate(s, t, workers);
  out.placement = Placement{Placement::Kind::kReplicated, workers, {}, 0, {}};
  for (int w : workers) out.placement.ids.push_back(copies[w]);
  return out;
}

// Every operand assembled whole on one worker (the first operand's, or the
// first worker of its placement); the op runs there.
Result<Placement> ShardingStage::Whole(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  Instruction inst = *s.inst;
  int worker = in.empty() ? DefaultWorker(*s.client) : in[0]->placement.workers[0];
  // A mutation changes its destination where it lives.
  if (KindOf(inst.op) == OpKind::kMutate && !in[0]->placement.whole()) return Elementwise(s, in, meta);
  for (size_t i = 0; i < in.size(); ++i) inst.operands[i] = WholeOn(s, *in[i], worker);
  if (!ProducesTensor(inst.op)) {
    EmitOn(s, worker, std::move(inst));
    return Placement{Placement::Kind::kWhole, {worker}, {}, 0, {}};
  }
  const TensorId result = inst.results[0];
  EmitOn(s, worker, std::move(inst));
  return Placement{Placement::Kind::kWhole, {worker}, {result}, 0, {}};
}

Result<Placement> ShardingStage::Elementwise(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const Instruction& inst = *s.inst;
  const bool mutate = KindOf(inst.op) == OpKind::kMutate;
  const Shape& out_shape = mutate ? in[0]->meta.shape : meta.shape;
  const int64_t out_rank = static_cast<int64_t>(out_shape.size());
  // The lead: the destination of a mutation, else the first sharded operand,
  // else the first replicated one.
  const Tensor* lead = nullptr;
  if (mutate) lead = in[0];
  for (const Tensor* t : in)
    if (!lead && t->placement.sharded()) lead = t;
  for (const Tensor* t : in)
    if (!lead && t->placement.replicated()) lead = t;
  if (lead->placement.whole()) return Whole(s, in, meta);
  Placement result = lead->placement;
  result.ids.clear();
  if (result.sharded()) result.axis = lead->placement.axis + (out_rank - static_cast<int64_t>(lead->meta.shape.size()));
  std::vector<std::vector<TensorId>> operand_ids;  // [operand][member]
  for (const Tensor* t : in) {
    if (t == lead) {
      operand_ids.push_back(t->placement.ids);
      continue;
    }
    const int64_t rank = static_cast<int64_t>(t->meta.shape.size());
    if (result.sharded()) {
      const int64_t aligned = result.axis - (out_rank - rank);
      if (aligned >= 0 && t->meta.shape[aligned] > 1) {  // must be cut the same way
        Placement like = result;
        operand_ids.push_back(ShardLike(s, *t, aligned, like));
        continue;
      }
    }
    std::map<int, TensorId> copies = Replicate(s, *t, result.workers);
    std::vector<TensorId> ids;
    for (int w : result.workers) ids.push_back(copies[w]);
    operand_ids.push_back(ids);
  }
  for (size_t r = 0; r < result.workers.size(); ++r) {
    Instruction piece = inst;
    for (size_t i = 0; i < in.size(); ++i) piece.operands[i] = operand_ids[i][r];
    if (!mutate) {
      TensorId id = NewId(*s.client);
      piece.results = {id};
      result.ids.push_back(id);
    }
    EmitOn(s, result.workers[r], piece);
  }
  if (mutate) result = lead->placement;
  return result;
}

Result<Placement> ShardingStage::Matmul(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  const int64_t ra = static_cast<int64_t>(a.meta.shape.size());
  const int64_t rb = static_cast<int64_t>(b.meta.shape.size());
  if (ra < 2 || rb != 2) return Whole(s, in, meta);
  const Placement& pa = a.placement;
  const Placement& pb = b.placement;
  auto emit = [&](const std::vector<int>& workers, const std::vector<TensorId>& ia, const std::vector<TensorId>& ib) {
    std::vector<TensorId> ids;
    for (size_t r = 0; r < workers.size(); ++r) {
      Instruction piece = *s.inst;
      piece.operands = {ia[r], ib[r]};
      TensorId id = NewId(*s.client);
      piece.results = {id};
      EmitOn(s, workers[r], piece);
      ids.push_back(id);
    }
    return ids;
  };
  auto copies = [&](const Tensor& t, const std::vector<int>& workers) {
    std::map<int, TensorId> m = Replicate(s, t, workers);
    std::vector<TensorId> ids;
    for (int w : workers) ids.push_back(m[w]);
    return ids;
  };
  // Rows (or any batch/row axis) of A sharded: B whole on every shard's worker.
  if (pa.sharded() && pa.axis < ra - 1) {
    Placement out = pa;
    out.ids = emit(pa.workers, pa.ids, copies(b, pa.workers));  // B sharded: all-gathered first
    out.axis = pa.axis + (static_cast<int64_t>(meta.shape.size()) - ra);
    return out;
  }
  // Inner dimension of A sharded: B's rows cut the same way, partial products summed.
  if (pa.sharded() && pa.axis == ra - 1) {
    std::vector<TensorId> ib = ShardLike(s, b, 0, pa);
    std::vector<TensorId> partial = emit(pa.workers, pa.ids, ib);
    for (size_t r = 0; r < partial.size(); ++r) s.temporaries.emplace_back(pa.workers[r], partial[r]);
    Placement out{Placement::Kind::kReplicated, pa.workers, {}, 0, {}};
    out.ids = AllReduce(s, pa, partial, meta, 0);
    return out;
  }
  // Columns of B sharded: A whole on every shard's worker.
  if (pb.sharded() && pb.axis == 1) {
    Placement out = pb;
    out.axis = static_cast<int64_t>(meta.shape.size()) - 1;
    out.ids = emit(pb.workers, copies(a, pb.workers), pb.ids);
    return out;
  }
  // B's rows sharded with A whole: cut A's columns to match, then as above.
  if (pb.sharded() && pb.axis == 0 && !pa.sharded()) {
    std::vector<TensorId> ia = ShardLike(s, a, ra - 1, pb);
    std::vector<TensorId> partial = emit(pb.workers, ia, pb.ids);
    for (size_t r = 0; r < partial.size(); ++r) s.temporaries.emplace_back(pb.workers[r], partial[r]);
    Placement out{Placement::Kind::kReplicated, pb.workers, {}, 0, {}};
    out.ids = AllReduce(s, pb, partial, meta, 0);
    return out;
  }
  // Replicated with replicated (or whole): computed on every replica.
  const Placement& lead = pa.replicated() ? pa : pb;
  if (lead.replicated()) {
    Placement out{Placement::Kind::kReplicated, lead.workers, {}, 0, {}};
    out.ids = emit(lead.workers, copies(a, lead.workers), copies(b, lead.workers));
    return out;
  }
  return Whole(s, in, meta);
}

// A replicated tensor moves on every replica; a sharded one is transposed
// shard-local (its sharded axis follows the swap); the rest is made whole.
Result<Placement> ShardingStage::Movement(Step& s, const Tensor& t, const TensorMeta& meta) {
  const Placement& p = t.placement;
  auto local = [&] { return EachMember(s, p); };
  if (p.replicated()) return Placement{Placement::Kind::kReplicated, p.workers, local(), 0, {}};
  const int64_t rank = static_cast<int64_t>(t.meta.shape.size());
  if (p.sharded() && s.inst->op == Op::kTranspose && rank >= 2) {
    const auto& axes = s.inst->attrs.axes;
    int64_t d0 = rank - 2, d1 = rank - 1;
    if (axes.size() == 2) {
      d0 = axes[0] < 0 ? axes[0] + rank : axes[0];
      d1 = axes[1] < 0 ? axes[1] + rank : axes[1];
    }
    Placement out = p;
    out.axis = p.axis == d0 ? d1 : p.axis == d1 ? d0 : p.axis;
    out.ids = local();
    return out;
  }
  // A reshape that keeps every dimension up to the sharded one reshapes
  // each shard alike (e.g. a gradient reshaped to its own shape).
  if (p.sharded() && s.inst->op == Op::kReshape && static_cast<int64_t>(meta.shape.size()) > p.axis &&
      std::equal(t.meta.shape.begin(), t.meta.shape.begin() + p.axis + 1, meta.shape.begin())) {
    Placement out = p;
    out.ids = ReshapeEach(s, p, meta.shape, p.axis, p.sizes);
    return out;
  }
  if (p.sharded() && s.inst->op == Op::kReshape) {
    if (std::optional<Placement> out = ReshapeRows(s, t, meta)) return *out;
  }
  if (p.sharded() && (s.inst->op == Op::kUnsqueeze || s.inst->op == Op::kSqueeze || s.inst->op == Op::kPermute)) {
    if (std::optional<int64_t> axis = AxisAfter(*s.inst, p.axis, rank)) {
      Placement out = p;
      out.axis = *axis;
      out.ids = local();
      return out;
    }
  }
  return Whole(s, {&t}, meta);
}

// Where the sharded axis goes under unsqueeze / squeeze / permute, or none
// when the op touches it (squeezing it, or squeezing every size-1 dim, which
// could squeeze a shard of size 1).
std::optional<int64_t> ShardingStage::AxisAfter(const Instruction& inst, int64_t axis, int64_t rank) {
  const std::vector<int64_t>& a = inst.attrs.axes;
  if (inst.op == Op::kUnsqueeze && a.size() == 1) {
    const int64_t dim = a[0] < 0 ? a[0] + rank + 1 : a[0];
    return dim <= axis ? axis + 1 : axis;
  }
  if (inst.op == Op::kSqueeze && a.size() == 1) {
    const int64_t dim = a[0] < 0 ? a[0] + rank : a[0];
    if (dim == axis) return std::nullopt;
    return dim < axis ? axis - 1 : axis;
  }
  if (inst.op == Op::kPermute && static_cast<int64_t>(a.size()) == rank) {
    for (int64_t i = 0; i < rank; ++i)
      if ((a[i] < 0 ? a[i] + rank : a[i]) == axis) return i;
  }
  return std::nullopt;
}

// A tensor sharded on axis 0 holds a contiguous range of its elements per
// shard (row-major). A reshape keeps the shards where they are when every
// shard's range is whole rows of the new first non-1 dim: e.g. [B, T, D]
// sharded on B to [B*T, D] (sizes times T), or back when each size divides.
std::optional<Placement> ShardingStage::ReshapeRows(Step& s, const Tensor& t, const TensorMeta& meta) {
  const Placement& p = t.placement;
  if (p.axis != 0 || meta.shape.empty()) return std::nullopt;
  int64_t inner_old = 1;
  for (size_t d = 1; d < t.meta.shape.size(); ++d) inner_old *= t.meta.shape[d];
  size_t b = 0;
  while (b + 1 < meta.shape.size() && meta.shape[b] == 1) ++b;
  int64_t inner_new = 1;
  for (size_t d = b + 1; d < meta.shape.size(); ++d) inner_new *= meta.shape[d];
  if (inner_old == 0 || inner_new == 0) return std::nullopt;
  std::vector<int64_t> sizes;
  for (int64_t size : p.sizes) {  // each shard's start is a sum of sizes: whole rows if every size is
    if ((size * inner_old) % inner_new != 0) return std::nullopt;
    sizes.push_back(size * inner_old / inner_new);
  }
  Placement out = p;
  out.axis = static_cast<int64_t>(b);
  out.sizes = sizes;
  out.ids = ReshapeEach(s, p, meta.shape, out.axis, sizes);
  return out;
}

// Reshapes member r's piece of `p` to `shape` with `sizes[r]` along `axis`.
std::vector<TensorId> ShardingStage::ReshapeEach(Step& s, const Placement& p, const Shape& shape, int64_t axis,
                                                 const std::vector<int64_t>& sizes) {
  std::vector<TensorId> ids;
  for (size_t r = 0; r < p.workers.size(); ++r) {
    Instruction piece = *s.inst;
    piece.attrs.shape = shape;
    piece.attrs.shape[static_cast<size_t>(axis)] = sizes[r];
    piece.operands = {p.ids[r]};
    TensorId id = NewId(*s.client);
    piece.results = {id};
    EmitOn(s, p.workers[r], piece);
    ids.push_back(id);
  }
  return ids;
}

// Softmax normalises along one dim: with the shards cut along another,
// each shard holds whole rows of it; cut along it, the shards agree on the
// maximum and the sum by all-reduces and stay where they are.
Result<Placement> ShardingStage::Softmax(Step& s, const Tensor& t, const TensorMeta& meta) {
  const Placement& p = t.placement;
  const bool along_shards = p.sharded() && Wrap(s.inst->attrs.axes.at(0), t.meta.shape.size()) == p.axis;
  const bool empty_shard = std::find(p.sizes.begin(), p.sizes.end(), 0) != p.sizes.end();
  if (along_shards && !empty_shard) return SoftmaxAlongShards(s, t);
  if (p.whole() || along_shards) return Whole(s, {&t}, meta);
  Placement out = p;
  out.ids = EachMember(s, p);
  return out;
}

std::vector<TensorId> ShardingStage::PerMember(Step& s, const Placement& p, Op op, const Attributes& attrs,
                                               const std::function<std::vector<TensorId>(size_t)>& operands,
                                               bool temporary) {
  std::vector<TensorId> ids;
  for (size_t r = 0; r < p.workers.size(); ++r) {
    Instruction piece;
    piece.op = op;
    piece.attrs = attrs;
    piece.operands = operands(r);
    TensorId id = NewId(*s.client);
    piece.results = {id};
    EmitOn(s, p.workers[r], std::move(piece));
    if (temporary) s.temporaries.emplace_back(p.workers[r], id);
    ids.push_back(id);
  }
  return ids;
}

// softmax(x) = exp(x - max) / sum(exp(x - max)) and
// log_softmax(x) = (x - max) - log(sum(exp(x - max))), with the max and the
// sum over the whole dim: local ones all-reduced (max, then sum).
Result<Placement> ShardingStage::SoftmaxAlongShards(Step& s, const Tensor& t) {
  const Placement& p = t.placement;
  Attributes over_dim;
  over_dim.axes = {p.axis};
  over_dim.keepdims = true;
  TensorMeta reduced = t.meta;
  reduced.shape[static_cast<size_t>(p.axis)] = 1;
  auto each = [](const std::vector<TensorId>& ids) { return [&ids](size_t r) { return std::vector<TensorId>{ids[r]}; }; };
  auto pairs = [](const std::vector<TensorId>& a, const std::vector<TensorId>& b) {
    return [&a, &b](size_t r) { return std::vector<TensorId>{a[r], b[r]}; };
  };
  const std::vector<TensorId> local_max = PerMember(s, p, Op::kMax, over_dim, each(p.ids), true);
  const std::vector<TensorId> max = AllReduce(s, p, local_max, reduced, 1);
  for (size_t r = 0; r < max.size(); ++r) s.temporaries.emplace_back(p.workers[r], max[r]);
  const std::vector<TensorId> shifted = PerMember(s, p, Op::kSub, {}, pairs(p.ids, max), true);
  const std::vector<TensorId> exp = PerMember(s, p, Op::kExp, {}, each(shifted), true);
  const std::vector<TensorId> local_sum = PerMember(s, p, Op::kSum, over_dim, each(exp), true);
  const std::vector<TensorId> sum = AllReduce(s, p, local_sum, reduced, 0);
  for (size_t r = 0; r < sum.size(); ++r) s.temporaries.emplace_back(p.workers[r], sum[r]);
  Placement out = p;
  if (s.inst->op == Op::kSoftmax) {
    out.ids = PerMember(s, p, Op::kDiv, {}, pairs(exp, sum), false);
  } else {
    const std::vector<TensorId> log_sum = PerMember(s, p, Op::kLog, {}, each(sum), true);
    out.ids = PerMember(s, p, Op::kSub, {}, pairs(shifted, log_sum), false);
  }
  return out;
}

// A slice along the sharded dim: each shard slices what of the range it
// holds, and the result stays sharded over the shards that hold any of it
// (no communication).
Result<Placement> ShardingStage::SliceAlongShards(Step& s, const Tensor& t, const TensorMeta& meta) {
  const Placement& p = t.placement;
  const std::vector<int64_t>& a = s.inst->attrs.axes;  // {dim, start, stop, step}: clamped, step > 0
  const int64_t start = a.at(1), stop = a.at(2), step = a.at(3);
  struct Piece {
    size_t member;
    int64_t first, end, count;  // local to the shard
  };
  std::vector<Piece> pieces;
  int64_t offset = 0;
  for (size_t r = 0; r < p.workers.size(); offset += p.sizes[r], ++r) {
    const int64_t end = std::min(stop, offset + p.sizes[r]);
    // The first index of the range at or after this shard's first row.
    const int64_t first = offset <= start ? start : start + (offset - start + step - 1) / step * step;
    if (first < end) pieces.push_back({r, first - offset, end - offset, (end - first + step - 1) / step});
  }
  if (pieces.empty()) return Whole(s, {&t}, meta);  // an empty range: made whole, as before
  // One piece: the result is whole on that worker, under the client's id.
  const bool whole = pieces.size() == 1;
  Placement out{whole ? Placement::Kind::kWhole : Placement::Kind::kSharded, {}, {}, whole ? 0 : p.axis, {}};
  for (const Piece& piece : pieces) {
    Instruction slice = *s.inst;
    slice.attrs.axes = {p.axis, piece.first, piece.end, step};
    slice.operands = {p.ids[piece.member]};
    if (!whole) slice.results = {NewId(*s.client)};
    out.workers.push_back(p.workers[piece.member]);
    out.ids.push_back(slice.results.at(0));
    if (!whole) out.sizes.push_back(piece.count);
    EmitOn(s, p.workers[piece.member], std::move(slice));
  }
  return out;
}

// Along an unsharded dim every shard is sliced (or indexed) alike; a select
// along the sharded dim needs only the shard holding the index.
Result<Placement> ShardingStage::SliceOrSelect(Step& s, const Tensor& t, const TensorMeta& meta) {
  const Placement& p = t.placement;
  const std::vector<int64_t>& a = s.inst->attrs.axes;  // checked by shape inference
  const bool select = s.inst->op == Op::kSelect;
  if (p.whole()) return Whole(s, {&t}, meta);
  const int64_t dim = p.sharded() ? Wrap(a.at(0), t.meta.shape.size()) : -1;
  if (p.replicated() || dim != p.axis) {
    Placement out = p;
    out.ids = EachMember(s, p);
    if (select && p.sharded() && dim < p.axis) --out.axis;  // the dropped dim was before the sharded one
    return out;
  }
  if (!select) return SliceAlongShards(s, t, meta);
  const int64_t index = a.at(1) < 0 ? a.at(1) + t.meta.shape[static_cast<size_t>(dim)] : a.at(1);
  int64_t start = 0;
  for (size_t r = 0; r < p.workers.size(); start += p.sizes[r], ++r) {
    if (index >= start + p.sizes[r]) continue;
    Instruction piece = *s.inst;
    piece.attrs.axes = {dim, index - start};
    piece.operands = {p.ids[r]};
    EmitOn(s, p.workers[r], std::move(piece));
    return Placement{Placement::Kind::kWhole, {p.workers[r]}, {s.inst->results.at(0)}, 0, {}};
  }
  return Internal(s.inst->Describe() + ": index " + std::to_string(index) + " lies in no shard of " + p.ToString());
}

// Operands laid out alike and joined along a dim that is not cut: member r
// joins its pieces.
Result<Placement> ShardingStage::Cat(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const Placement& p = in[0]->placement;
  bool alike = !p.whole();
  for (const Tensor* t : in) alike = alike && SameLayout(t->placement, p);
  if (alike && p.sharded()) alike = Wrap(s.inst->attrs.axes.at(0), in[0]->meta.shape.size()) != p.axis;
  if (!alike) return Whole(s, in, meta);
  Placement out = p;
  out.ids.clear();
  for (size_t r = 0; r < p.workers.size(); ++r) {
    Instruction piece = *s.inst;
    for (size_t i = 0; i < in.size(); ++i) piece.operands[i] = in[i]->placement.ids[r];
    TensorId id = NewId(*s.client);
    piece.results = {id};
    EmitOn(s, p.workers[r], std::move(piece));
    out.ids.push_back(id);
  }
  return out;
}

Result<Placement> ShardingStage::Reduce(Step& s, const Tensor& t, const TensorMeta& meta) {
  const Instruction& inst = *s.inst;
  const Placement& p = t.placement;
  const size_t rank = t.meta.shape.size();
  Result<std::vector<int64_t>> axes = NormalizeAxes(inst.attrs.axes, rank);
  if (!axes.ok()) return axes.status();
  auto local = [&](Op op) {
    return PerMember(s, p, op, inst.attrs, [&p](size_t r) { return std::vector<TensorId>{p.ids[r]}; }, false);
  };
  if (p.replicated()) return Placement{Placement::Kind::kReplicated, p.workers, local(inst.op), 0, {}};
  const bool over_shard_axis = std::find(axes->begin(), axes->end(), p.axis) != axes->end();
  // Positions need the whole axis (local ones would count from each shard's start).
  const bool positions = inst.op == Op::kArgMax || inst.op == Op::kArgMin;
  if (positions && over_shard_axis) return Whole(s, {&t}, meta);
  if (!over_shard_axis) {
    Placement out = p;
    out.ids = local(inst.op);
    if (!inst.attrs.keepdims)
      out.axis -= std::count_if(axes->begin(), axes->end(), [&](int64_t a) { return a < p.axis; });
    return out;
  }
  // Partial results, then an all-reduce; a mean is a sum scaled by 1/count.
  const Op partial_op = inst.op == Op::kMean ? Op::kSum : inst.op;
  std::vector<TensorId> partial = local(partial_op);
  for (size_t r = 0; r < partial.size(); ++r) s.temporaries.emplace_back(p.workers[r], partial[r]);
  const int reduce = inst.op == Op::kMax ? 1 : inst.op == Op::kMin ? 2 : 0;
  Placement out{Placement::Kind::kReplicated, p.workers, {}, 0, {}};
  std::vector<TensorId> reduced = AllReduce(s, p, partial, meta, reduce);
  if (inst.op != Op::kMean) {
    out.ids = reduced;
    return out;
  }
  double count = 1;
  for (int64_t a : *axes) count *= static_cast<double>(t.meta.shape[a]);
  for (size_t r = 0; r < p.workers.size(); ++r) {
    s.temporaries.emplace_back(p.workers[r], reduced[r]);
    Instruction scale;
    scale.op = Op::kDiv;
    scale.attrs.scalar = count;
    scale.attrs.scalar_side = ScalarSide::kRight;
    scale.operands = {reduced[r]};
    TensorId id = NewId(*s.client);
    scale.results = {id};
    EmitOn(s, p.workers[r], scale);
    out.ids.push_back(id);
  }
  return out;
}

}  // namespace gt::sharding
