#include <algorithm>
#include <functional>

#include "strategies.h"

namespace gt::sharding {
namespace {

// The op once on every worker of `on`, member r's operands being
// operand_ids[i][r]; `adjust` may change member r's instruction. The
// results, one per member, are the op's.
std::vector<TensorId> EmitEach(Step& s, const std::vector<int>& on, const std::vector<std::vector<TensorId>>& operand_ids,
                               const std::function<void(size_t, Instruction&)>& adjust = nullptr) {
  std::vector<TensorId> ids;
  for (size_t r = 0; r < on.size(); ++r) {
    Instruction piece = *s.inst;
    for (size_t i = 0; i < operand_ids.size(); ++i) piece.operands[i] = operand_ids[i][r];
    if (adjust) adjust(r, piece);
    TensorId id = NewId(*s.client);
    piece.results = {id};
    EmitOn(s, on[r], std::move(piece));
    ids.push_back(id);
  }
  return ids;
}

// No operand cut, one replicated: the op on each replica, the others copied there.
Result<Placement> OnReplicas(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const Tensor* lead = nullptr;
  for (const Tensor* t : in) {
    if (t->placement.sharded()) return Whole(s, in, meta);
    if (!lead && t->placement.replicated()) lead = t;
  }
  if (!lead) return Whole(s, in, meta);
  const std::vector<int> workers = lead->placement.workers;
  std::vector<std::vector<TensorId>> operand_ids;
  for (const Tensor* t : in) operand_ids.push_back(CopiesOn(s, *t, workers));
  return Placement{Placement::Kind::kReplicated, workers, EmitEach(s, workers, operand_ids), 0, {}};
}

int64_t IndexedDim(const Step& s, const Tensor& x) { return Wrap(s.inst->attrs.axes.at(0), x.meta.shape.size()); }

// A zero tensor shaped and typed like `t` on each of `workers`, temporaries.
std::vector<TensorId> ZerosOn(Step& s, const Tensor& t, const std::vector<int>& workers) {
  std::vector<TensorId> ids;
  for (int w : workers) {
    Instruction zeros;
    zeros.op = Op::kZeros;
    zeros.attrs.shape = t.meta.shape;
    zeros.attrs.dtype = t.meta.dtype;
    TensorId id = NewId(*s.client);
    zeros.results = {id};
    EmitOn(s, w, std::move(zeros));
    s.temporaries.emplace_back(w, id);
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

// index_select(x, dim, index): rows picked by a cut index are cut alike
// (an embedding of a data-parallel batch); a cut of x on another dim
// keeps its shards, each picking from its own.
Result<Placement> IndexSelect(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const Tensor& x = *in[0];
  const Tensor& index = *in[1];
  const int64_t dim = IndexedDim(s, x);
  if (index.placement.sharded() && !x.placement.sharded()) {
    Placement out = index.placement;
    out.axis = dim;
    out.ids = EmitEach(s, out.workers, {CopiesOn(s, x, out.workers), index.placement.ids});
    return out;
  }
  if (x.placement.sharded() && x.placement.axis != dim && !index.placement.sharded()) {
    Placement out = x.placement;
    out.ids = EmitEach(s, out.workers, {x.placement.ids, CopiesOn(s, index, out.workers)});
    return out;
  }
  return OnReplicas(s, in, meta);
}

// index_add(base, dim, index, source): with the index cut, each member adds
// its part of the source into zeros (one holding the base into it) and an
// all-reduce sums them (an embedding's gradient under data parallelism);
// with the base cut on another dim, each shard adds its own part.
Result<Placement> IndexAdd(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const Tensor& base = *in[0];
  const Tensor& index = *in[1];
  const Tensor& source = *in[2];
  const int64_t dim = IndexedDim(s, base);
  const Placement& pi = index.placement;
  if (pi.sharded()) {
    // The member adding into the base: one that holds it already, if any.
    size_t holder = 0;
    while (holder + 1 < pi.workers.size() && (base.placement.sharded() || !Contains(base.placement.workers, pi.workers[holder])))
      ++holder;
    if (base.placement.sharded() || !Contains(base.placement.workers, pi.workers[holder])) holder = 0;
    std::vector<int> others = pi.workers;
    others.erase(others.begin() + static_cast<int64_t>(holder));
    std::vector<TensorId> bases = ZerosOn(s, base, others);
    bases.insert(bases.begin() + static_cast<int64_t>(holder), WholeOn(s, base, pi.workers[holder]));
    const std::vector<TensorId> sources = ShardLike(s, source, dim, pi);
    // A pending sum (the base counted once, on the holder), reduced when its value is needed.
    std::vector<TensorId> partial = EmitEach(s, pi.workers, {bases, pi.ids, sources});
    if (pi.workers.size() == 1) return Placement{Placement::Kind::kReplicated, pi.workers, std::move(partial), 0, {}};
    return Placement{Placement::Kind::kPartial, pi.workers, std::move(partial), 0, {}};
  }
  const Placement& pb = base.placement;
  if (pb.sharded() && pb.axis != dim) {
    Placement out = pb;
    out.ids = EmitEach(s, pb.workers, {pb.ids, CopiesOn(s, index, pb.workers), ShardLike(s, source, pb.axis, pb)});
    return out;
  }
  return OnReplicas(s, in, meta);
}

// gather(x, dim, index) and scatter_add(base, dim, index, source): operands
// cut alike on a dim other than `dim` (and equally long there) run
// shard-local: a cross-entropy's picked log-probabilities per batch shard.
Result<Placement> GatherOrScatter(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const int64_t dim = IndexedDim(s, *in[0]);
  const Tensor* lead = nullptr;
  for (const Tensor* t : in)
    if (!lead && t->placement.sharded()) lead = t;
  if (!lead) return OnReplicas(s, in, meta);
  const int64_t axis = lead->placement.axis;
  const int64_t length = lead->meta.shape[static_cast<size_t>(axis)];
  bool alike = axis != dim;
  for (const Tensor* t : in) alike = alike && t->meta.shape[static_cast<size_t>(axis)] == length;
  if (!alike) return Whole(s, in, meta);
  std::vector<std::vector<TensorId>> operand_ids;
  for (const Tensor* t : in) operand_ids.push_back(ShardLike(s, *t, axis, lead->placement));
  Placement out = lead->placement;
  out.ids = EmitEach(s, out.workers, operand_ids);
  return out;
}

// tril / triu keep elements by row minus column: a shard cut on the rows
// starting at row o keeps what the whole would with the diagonal moved by
// +o; cut on the columns, by -o; cut on a batch dim, as it is.
Result<Placement> Triangle(Step& s, const Tensor& t, const TensorMeta& meta) {
  const Placement& p = t.placement;
  if (p.replicated()) return Placement{Placement::Kind::kReplicated, p.workers, EachMember(s, p), 0, {}};
  if (!p.sharded()) return Whole(s, {&t}, meta);
  const int64_t rank = static_cast<int64_t>(t.meta.shape.size());
  const int64_t sign = p.axis == rank - 2 ? 1 : p.axis == rank - 1 ? -1 : 0;
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (int64_t size : p.sizes) {
    starts.push_back(start);
    start += size;
  }
  Placement out = p;
  out.ids = EmitEach(s, p.workers, {p.ids}, [&](size_t r, Instruction& piece) {
    piece.attrs.axes = {s.inst->attrs.axes.at(0) + sign * starts[r]};
  });
  return out;
}

}  // namespace gt::sharding
