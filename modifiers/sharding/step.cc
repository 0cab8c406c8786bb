#include "step.h"

#include <algorithm>

#include "gt/dtype.h"
#include "gt/layout.h"
#include "gt/op_attrs.h"
#include "mesh.h"

namespace gt::sharding {
namespace {

// The part of a collective every member shares: the group and the rendezvous.
CollectiveSpec GroupSpec(const Step& s, const std::vector<int>& group) {
  CollectiveSpec spec;
  spec.group.assign(group.begin(), group.end());
  SetRendezvous(spec, *s.rendezvous);
  spec.generation = s.workers->generation();
  return spec;
}

// A collective `op` for member `rank` of `spec`'s group.
Instruction Collective(Op op, CollectiveSpec spec, size_t rank) {
  spec.rank = static_cast<int64_t>(rank);
  return MakeCollective(op, spec);
}

// For a client that records its collectives (InspectMode::kStartRecording): one entry per
// collective, its bytes those of the whole tensor it moves or reduces.
void Note(Step& s, Op op, int reduce, const TensorMeta& meta, const std::vector<int>& members, uint64_t origin = 0) {
  if (!s.client->recording) return;
  std::vector<int64_t>& log = s.client->collective_log;
  if (log.size() + layout::RecordedValues(members.size()) > kMaxCollectiveLog) {
    ++s.client->collectives_dropped;
    return;
  }
  layout::RecordedCollective entry;
  entry.seq = s.inst->seq;
  entry.made_by = origin ? origin : entry.seq;
  entry.op = op;
  entry.reduce = static_cast<ReduceOp>(reduce);
  entry.bytes = NumElements(meta.shape) * static_cast<int64_t>(ElementSize(meta.dtype));
  entry.workers.assign(members.begin(), members.end());
  layout::AppendRecorded(log, entry);
}

}  // namespace

TensorId MakeConstant(Step& s, const Tensor& t, const Shape& shape, int worker) {
  Instruction make;
  make.op = *t.constant;
  make.attrs.shape = shape;
  make.attrs.dtype = t.meta.dtype;
  const TensorId id = NewId(*s.client);
  make.results = {id};
  EmitOn(s, worker, std::move(make));
  s.temporaries.emplace_back(worker, id);
  return id;
}

void Keep(Step& s, const std::vector<TensorId>& ids) {
  auto kept = [&ids](const std::pair<int, TensorId>& e) { return std::find(ids.begin(), ids.end(), e.second) != ids.end(); };
  s.temporaries.erase(std::remove_if(s.temporaries.begin(), s.temporaries.end(), kept), s.temporaries.end());
}

void EmitOn(Step& s, int worker, Instruction inst) {
  inst.client = s.inst->client;
  inst.seq = s.inst->seq;
  if (inst.signal.empty()) inst.signal = s.inst->signal;
  inst.worker = worker;
  s.out->Emit(std::move(inst));
}

void FreeTemporaries(Step& s) {
  for (auto& [w, id] : s.temporaries) {
    EmitOn(s, w, MakeFree(0, 0, {id}));
  }
  s.temporaries.clear();
}

std::vector<TensorId> EachMember(Step& s, const Placement& p) {
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

std::map<int, TensorId> Replicate(Step& s, const Tensor& t, const std::vector<int>& workers) {
  std::map<int, TensorId> out;
  const Placement& p = t.placement;
  if (p.mesh()) return Replicate(s, Unmesh(s, t), workers);  // gathered into copies on its mesh first
  if (p.partial()) {  // its value is the sum: all-reduced here (the stage materializes records itself)
    Tensor summed{t.meta,
                  Placement{Placement::Kind::kReplicated, p.workers, AllReduce(s, p, p.ids, t.meta, 0, t.made_by), 0, {}}};
    for (size_t r = 0; r < p.workers.size(); ++r) s.temporaries.emplace_back(p.workers[r], summed.placement.ids[r]);
    return Replicate(s, summed, workers);
  }
  if (t.constant) {
    std::vector<int> missing;
    for (int w : workers) {
      auto at = std::find(p.workers.begin(), p.workers.end(), w);
      if (!p.sharded() && at != p.workers.end()) out[w] = p.ids[static_cast<size_t>(at - p.workers.begin())];
      else missing.push_back(w);
    }
    for (int w : missing) out[w] = MakeConstant(s, t, t.meta.shape, w);
    if (!missing.empty()) s.collectives.push_back(std::string(OpName(*t.constant)) + " made on " + WorkerList(missing));
    return out;
  }
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
    s.collectives.push_back("broadcast " + WorkerList(group));
    Note(s, Op::kBroadcast, 0, t.meta, group);
    CollectiveSpec spec = GroupSpec(s, group);
    spec.root = 0;
    Instruction b = Collective(Op::kBroadcast, spec, 0);
    b.attrs.shape = t.meta.shape;
    b.attrs.dtype = t.meta.dtype;
    b.operands = {p.ids[0]};
    TensorId root_copy = NewId(*s.client);
    b.results = {root_copy};
    EmitOn(s, root, b);
    s.temporaries.emplace_back(root, root_copy);
    for (size_t r = 1; r < group.size(); ++r) {
      Instruction m = Collective(Op::kBroadcast, spec, r);
      m.attrs.shape = t.meta.shape;
      m.attrs.dtype = t.meta.dtype;
      TensorId id = NewId(*s.client);
      m.results = {id};
      EmitOn(s, group[r], m);
      s.temporaries.emplace_back(group[r], id);
      out[group[r]] = id;
    }
    return out;
  }
  // Sharded: all-gather among its workers, then copy on to the rest.
  s.collectives.push_back("all_gather " + WorkerList(p.workers));
  Note(s, Op::kAllGather, 0, t.meta, p.workers);
  Tensor gathered{t.meta, Placement{Placement::Kind::kReplicated, p.workers, {}, 0, {}}};
  CollectiveSpec spec = GroupSpec(s, p.workers);
  spec.dim = p.axis;
  spec.sizes = p.sizes;
  for (size_t r = 0; r < p.workers.size(); ++r) {
    Instruction g = Collective(Op::kAllGather, spec, r);
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

std::vector<TensorId> CopiesOn(Step& s, const Tensor& t, const std::vector<int>& workers) {
  std::map<int, TensorId> copies = Replicate(s, t, workers);
  std::vector<TensorId> ids;
  for (int w : workers) ids.push_back(copies[w]);
  return ids;
}

TensorId WholeOn(Step& s, const Tensor& t, int worker) {
  // The common case (no signals in play) needs no copy and no bookkeeping.
  if (t.placement.whole() && t.placement.workers[0] == worker) return t.placement.ids[0];
  return Replicate(s, t, {worker})[worker];
}

std::vector<TensorId> ShardLike(Step& s, const Tensor& t, int64_t axis, const Placement& like) {
  if (t.placement.sharded() && t.placement.axis == axis && t.placement.workers == like.workers &&
      t.placement.sizes == like.sizes)
    return t.placement.ids;
  if (t.constant) {
    std::vector<TensorId> out;
    for (size_t r = 0; r < like.workers.size(); ++r) {
      Shape piece = t.meta.shape;
      piece[static_cast<size_t>(axis)] = like.sizes[r];
      out.push_back(MakeConstant(s, t, piece, like.workers[r]));
    }
    s.collectives.push_back(std::string(OpName(*t.constant)) + " made as " + like.ToString());
    return out;
  }
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

std::vector<TensorId> AllReduce(Step& s, const Placement& p, const std::vector<TensorId>& ids, const TensorMeta& meta,
                                int op, uint64_t origin) {
  s.collectives.push_back(std::string("all_reduce(") + (op == 1 ? "max" : op == 2 ? "min" : "sum") + ") " + WorkerList(p.workers));
  Note(s, Op::kAllReduce, op, meta, p.workers, origin);
  CollectiveSpec spec = GroupSpec(s, p.workers);
  spec.reduce = static_cast<ReduceOp>(op);
  std::vector<TensorId> out;
  for (size_t r = 0; r < p.workers.size(); ++r) {
    Instruction a = Collective(Op::kAllReduce, spec, r);
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

void Materialize(Step& s, Tensor& t) {
  Placement& p = t.placement;
  for (size_t r = 0; r < p.workers.size(); ++r) s.temporaries.emplace_back(p.workers[r], p.ids[r]);
  std::vector<TensorId> summed = AllReduce(s, p, p.ids, t.meta, 0, t.made_by);
  p.kind = Placement::Kind::kReplicated;
  p.ids = std::move(summed);
}

void MaterializeTogether(Step& s, const std::vector<Tensor*>& bucket, uint64_t origin) {
  const Placement members = bucket[0]->placement;  // a copy: the records change below
  std::vector<std::vector<TensorId>> flat;        // [tensor][member]
  Attributes flatten;
  flatten.shape = {-1};
  int64_t total = 0;
  for (Tensor* t : bucket) {
    const std::vector<TensorId>& ids = t->placement.ids;
    flat.push_back(PerMember(s, members, Op::kReshape, flatten, [&ids](size_t r) { return std::vector<TensorId>{ids[r]}; }, true));
    total += NumElements(t->meta.shape);
  }
  Attributes along_0;
  along_0.axes = {0};
  const std::vector<TensorId> joined = PerMember(s, members, Op::kCat, along_0, [&flat](size_t r) {
    std::vector<TensorId> pieces;
    for (const std::vector<TensorId>& f : flat) pieces.push_back(f[r]);
    return pieces;
  }, true);
  const std::vector<TensorId> summed = AllReduce(s, members, joined, TensorMeta{{total}, bucket[0]->meta.dtype}, 0, origin);
  for (size_t r = 0; r < members.workers.size(); ++r) s.temporaries.emplace_back(members.workers[r], summed[r]);
  int64_t offset = 0;
  for (Tensor* t : bucket) {
    Placement& p = t->placement;
    for (size_t r = 0; r < p.workers.size(); ++r) s.temporaries.emplace_back(p.workers[r], p.ids[r]);  // the addends
    const int64_t n = NumElements(t->meta.shape);
    Attributes cut;
    cut.axes = {0, offset, offset + n, 1};
    Attributes shaped;
    shaped.shape = t->meta.shape;
    std::vector<TensorId> ids = PerMember(s, members, Op::kSlice, cut, [&summed](size_t r) { return std::vector<TensorId>{summed[r]}; }, true);
    ids = PerMember(s, members, Op::kReshape, shaped, [&ids](size_t r) { return std::vector<TensorId>{ids[r]}; }, true);
    p.ids = PerMember(s, members, Op::kClone, {}, [&ids](size_t r) { return std::vector<TensorId>{ids[r]}; }, false);
    p.kind = Placement::Kind::kReplicated;
    offset += n;
  }
}

std::vector<TensorId> ReduceScatter(Step& s, const Tensor& t, const Placement& like) {
  const Placement& p = t.placement;
  s.collectives.push_back("reduce_scatter " + WorkerList(p.workers) + " to " + like.ToString());
  Note(s, Op::kReduceScatter, 0, t.meta, p.workers, t.made_by);
  CollectiveSpec spec = GroupSpec(s, p.workers);
  spec.dim = like.axis;
  spec.sizes = like.sizes;
  std::vector<TensorId> out;
  for (size_t r = 0; r < p.workers.size(); ++r) {
    Instruction rs = Collective(Op::kReduceScatter, spec, r);
    rs.attrs.shape = t.meta.shape;  // the whole tensor (a member whose addend failed stands in with one)
    rs.attrs.dtype = t.meta.dtype;
    rs.operands = {p.ids[r]};
    TensorId id = NewId(*s.client);
    rs.results = {id};
    EmitOn(s, p.workers[r], rs);
    out.push_back(id);
  }
  return out;
}

std::vector<TensorId> PerMember(Step& s, const Placement& p, Op op, const Attributes& attrs,
                                const std::function<std::vector<TensorId>(size_t)>& operands, bool temporary) {
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

std::optional<Tensor> MoveInto(Step& s, const Tensor& t, const Config& config) {
  const std::vector<int> workers = s.workers->Of(config);
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

}  // namespace gt::sharding
