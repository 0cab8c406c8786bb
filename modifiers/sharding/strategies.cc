#include "strategies.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "gt/op_attrs.h"

namespace gt::sharding {
namespace {

// Addends `ids` on `workers`: a pending sum, or with one worker its value.
Placement Pending(const std::vector<int>& workers, std::vector<TensorId> ids) {
  const auto kind = workers.size() == 1 ? Placement::Kind::kReplicated : Placement::Kind::kPartial;
  return Placement{kind, workers, std::move(ids), 0, {}};
}

// softmax(x) = exp(x - max) / sum(exp(x - max)) and
// log_softmax(x) = (x - max) - log(sum(exp(x - max))), with the max and the
// sum over the whole dim: local ones all-reduced (max, then sum).
Result<Placement> SoftmaxAlongShards(Step& s, const Tensor& t) {
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

}  // namespace

// Every operand assembled whole on one worker (the first operand's, or the
// first worker of its placement); the op runs there.
Result<Placement> Whole(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  Instruction inst = *s.inst;
  int worker = in.empty() ? s.workers->DefaultFor(*s.client) : in[0]->placement.workers[0];
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

Result<Placement> SumOfSquares(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  std::map<int, std::vector<TensorId>> held;  // worker -> what it squares
  for (const Tensor* t : in) {
    const Placement& p = t->placement;
    if (p.whole() || p.replicated()) {
      held[p.workers[0]].push_back(p.ids[0]);
    } else if (p.sharded()) {
      for (size_t r = 0; r < p.workers.size(); ++r) held[p.workers[r]].push_back(p.ids[r]);
    } else {
      return Whole(s, in, meta);  // the stage settles pending sums and meshes before a strategy runs
    }
  }
  std::vector<int> workers;
  std::vector<TensorId> sums;
  for (auto& [worker, ids] : held) {
    Instruction piece = *s.inst;
    piece.operands = std::move(ids);
    piece.results = {NewId(*s.client)};
    workers.push_back(worker);
    sums.push_back(piece.results[0]);
    EmitOn(s, worker, std::move(piece));
  }
  return Pending(workers, std::move(sums));
}

Result<Placement> Elementwise(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const Instruction& inst = *s.inst;
  const bool mutate = KindOf(inst.op) == OpKind::kMutate;
  const Shape& out_shape = mutate ? in[0]->meta.shape : meta.shape;
  const int64_t out_rank = static_cast<int64_t>(out_shape.size());
  // The lead: the destination of a mutation, else the first sharded operand
  // that does not broadcast along its cut dim, else the first replicated one.
  const Tensor* lead = nullptr;
  if (mutate) lead = in[0];
  for (const Tensor* t : in) {
    const int64_t rank = static_cast<int64_t>(t->meta.shape.size());
    const bool full = t->placement.sharded() && t->meta.shape[static_cast<size_t>(t->placement.axis)] ==
                                                     out_shape[static_cast<size_t>(t->placement.axis + out_rank - rank)];
    if (!lead && full) lead = t;
  }
  for (const Tensor* t : in)
    if (!lead && t->placement.replicated()) lead = t;
  return ElementwiseLedBy(s, in, meta, lead);
}

Result<Placement> ElementwiseLedBy(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta,
                                   const Tensor* lead) {
  const Instruction& inst = *s.inst;
  const bool mutate = KindOf(inst.op) == OpKind::kMutate;
  const int64_t out_rank = static_cast<int64_t>((mutate ? in[0]->meta.shape : meta.shape).size());
  if (!lead || lead->placement.whole()) return Whole(s, in, meta);
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
    operand_ids.push_back(CopiesOn(s, *t, result.workers));
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

// An optimizer step writes its parameter and both moment estimates: the
// three must be laid out alike (each member updates its own pieces); the
// gradient is cut or copied like the parameter.
Result<Placement> FusedUpdate(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const Placement& p = in[0]->placement;
  for (size_t i : {size_t{2}, size_t{3}})
    if (!SameLayout(in[i]->placement, p))
      return InvalidArgument(s.inst->Describe() + ": optimizer state " + TensorName(s.inst->operands[i]) + " is " +
                             in[i]->placement.ToString() + " but its parameter is " + p.ToString() +
                             "; they must be laid out alike");
  return p.whole() ? Whole(s, in, meta) : Elementwise(s, in, meta);
}

// A @ B over (..., M, K) @ (..., K, N), batch dims broadcasting: an
// operand cut on a batch dim, a row dim of A or a column dim of B runs
// shard-local; one cut on K gives partial products and an all-reduce.
Result<Placement> Matmul(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  const int64_t ra = static_cast<int64_t>(a.meta.shape.size());
  const int64_t rb = static_cast<int64_t>(b.meta.shape.size());
  const int64_t ro = static_cast<int64_t>(meta.shape.size());
  if (ra < 2 || rb < 2) return Whole(s, in, meta);
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
  // Partial products: a pending sum, all-reduced when (and if) its value is needed.
  auto summed = [&](const Placement& p, const std::vector<TensorId>& ia, const std::vector<TensorId>& ib) {
    return Pending(p.workers, emit(p.workers, ia, ib));
  };
  // A batch dim cut (attention heads, a data-parallel batch): the other
  // operand cut alike along its matching dim, or copied where it broadcasts.
  // The cut operand must not broadcast along its cut dim itself.
  auto batch_cut = [&](const Tensor& t, int64_t rank) {
    const Placement& p = t.placement;
    return p.sharded() && p.axis < rank - 2 &&
           t.meta.shape[static_cast<size_t>(p.axis)] == meta.shape[static_cast<size_t>(p.axis + ro - rank)];
  };
  const bool a_batch = batch_cut(a, ra);
  if (a_batch || (batch_cut(b, rb) && !pa.sharded())) {
    const Tensor& lead = a_batch ? a : b;
    const Tensor& other = a_batch ? b : a;
    const int64_t rl = a_batch ? ra : rb, rother = a_batch ? rb : ra;
    Placement out = lead.placement;
    out.axis = lead.placement.axis + ro - rl;
    const int64_t matching = out.axis - (ro - rother);
    const bool cut = matching >= 0 && matching < rother - 2 && other.meta.shape[matching] > 1;
    std::vector<TensorId> other_ids = cut ? ShardLike(s, other, matching, lead.placement) : CopiesOn(s, other, out.workers);
    out.ids = a_batch ? emit(out.workers, lead.placement.ids, other_ids) : emit(out.workers, other_ids, lead.placement.ids);
    return out;
  }
  // Rows of A sharded: B whole on every shard's worker (all-gathered when sharded).
  if (pa.sharded() && pa.axis == ra - 2) {
    Placement out = pa;
    out.ids = emit(pa.workers, pa.ids, CopiesOn(s, b, pa.workers));
    out.axis = pa.axis + (ro - ra);
    return out;
  }
  // Inner dimension of A sharded: B's rows cut the same way, partial products summed.
  if (pa.sharded() && pa.axis == ra - 1) return summed(pa, pa.ids, ShardLike(s, b, rb - 2, pa));
  // Columns of B sharded: A whole on every shard's worker.
  if (pb.sharded() && pb.axis == rb - 1) {
    Placement out = pb;
    out.axis = ro - 1;
    out.ids = emit(pb.workers, CopiesOn(s, a, pb.workers), pb.ids);
    return out;
  }
  // B's rows sharded with A whole: cut A's columns to match, then as above.
  if (pb.sharded() && pb.axis == rb - 2 && !pa.sharded()) return summed(pb, ShardLike(s, a, ra - 1, pb), pb.ids);
  // Replicated with replicated (or whole): computed on every replica.
  const Placement& lead = pa.replicated() ? pa : pb;
  if (lead.replicated()) {
    Placement out{Placement::Kind::kReplicated, lead.workers, {}, 0, {}};
    out.ids = emit(lead.workers, CopiesOn(s, a, lead.workers), CopiesOn(s, b, lead.workers));
    return out;
  }
  return Whole(s, in, meta);
}

// Softmax normalises along one dim: with the shards cut along another,
// each shard holds whole rows of it; cut along it, the shards agree on the
// maximum and the sum by all-reduces and stay where they are.
Result<Placement> Softmax(Step& s, const Tensor& t, const TensorMeta& meta) {
  const Placement& p = t.placement;
  const bool along_shards = p.sharded() && Wrap(s.inst->attrs.axes.at(0), t.meta.shape.size()) == p.axis;
  const bool empty_shard = std::find(p.sizes.begin(), p.sizes.end(), 0) != p.sizes.end();
  if (along_shards && !empty_shard) return SoftmaxAlongShards(s, t);
  if (p.whole() || along_shards) return Whole(s, {&t}, meta);
  Placement out = p;
  out.ids = EachMember(s, p);
  return out;
}

// Joined along a dim that is not cut: member r joins its pieces. The lead
// is the first sharded operand (none: replicas joined on every replica); an
// operand laid out otherwise is cut like it (the zeros padding a slice's
// gradient are then made in pieces where they are needed).
Result<Placement> Cat(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  const Tensor* lead = nullptr;
  for (const Tensor* t : in)
    if (!lead && t->placement.sharded()) lead = t;
  const Placement& p = lead ? lead->placement : in[0]->placement;
  const int64_t dim = Wrap(s.inst->attrs.axes.at(0), in[0]->meta.shape.size());
  if (p.whole() || (p.sharded() && dim == p.axis)) return Whole(s, in, meta);
  std::vector<std::vector<TensorId>> pieces;
  for (const Tensor* t : in) {
    if (SameLayout(t->placement, p)) pieces.push_back(t->placement.ids);
    else if (p.sharded()) pieces.push_back(ShardLike(s, *t, p.axis, p));
    else return Whole(s, in, meta);
  }
  Placement out = p;
  out.ids.clear();
  for (size_t r = 0; r < p.workers.size(); ++r) {
    Instruction piece = *s.inst;
    for (size_t i = 0; i < in.size(); ++i) piece.operands[i] = pieces[i][r];
    TensorId id = NewId(*s.client);
    piece.results = {id};
    EmitOn(s, p.workers[r], std::move(piece));
    out.ids.push_back(id);
  }
  return out;
}

Result<Placement> Reduce(Step& s, const Tensor& t, const TensorMeta& meta) {
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
  // A sum's partial results stay a pending sum (a mean's scaled by 1/count
  // first); a max's or min's are all-reduced at once.
  const Op partial_op = inst.op == Op::kMean ? Op::kSum : inst.op;
  std::vector<TensorId> partial = local(partial_op);
  if (inst.op == Op::kSum) return Pending(p.workers, partial);
  if (inst.op == Op::kMean) {
    double count = 1;
    for (int64_t a : *axes) count *= static_cast<double>(t.meta.shape[a]);
    Placement out = Pending(p.workers, {});
    for (size_t r = 0; r < p.workers.size(); ++r) {
      s.temporaries.emplace_back(p.workers[r], partial[r]);
      Instruction scale = MakeScalarBinary(Op::kDiv, count, ScalarSide::kRight);
      scale.operands = {partial[r]};
      TensorId id = NewId(*s.client);
      scale.results = {id};
      EmitOn(s, p.workers[r], scale);
      out.ids.push_back(id);
    }
    return out;
  }
  for (size_t r = 0; r < partial.size(); ++r) s.temporaries.emplace_back(p.workers[r], partial[r]);
  const int reduce = inst.op == Op::kMax ? 1 : inst.op == Op::kMin ? 2 : 0;
  return Placement{Placement::Kind::kReplicated, p.workers, AllReduce(s, p, partial, meta, reduce), 0, {}};
}

bool CarriesPartial(const Instruction& inst, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  switch (inst.op) {
    case Op::kRedistribute:
      return true;
    case Op::kClone:
    case Op::kNeg:
    case Op::kSum:  // sums and views of a pending sum: the gradient formulas' reshapes and transposes
    case Op::kMean:
    case Op::kReshape:
    case Op::kTranspose:
    case Op::kPermute:
    case Op::kUnsqueeze:
    case Op::kSqueeze:
    case Op::kSlice:
    case Op::kSelect:
      return in.size() == 1;
    case Op::kMul:  // by a finite number (inf times a zero addend is NaN, not the sum's inf)
      return in.size() == 1 && inst.attrs.scalar_side != ScalarSide::kNone && std::isfinite(inst.attrs.scalar);
    case Op::kDiv:
      return in.size() == 1 && inst.attrs.scalar_side == ScalarSide::kRight && std::isfinite(inst.attrs.scalar) &&
             inst.attrs.scalar != 0;
    case Op::kIndexAdd: {  // into zeros, at an index each member holds: the sum of each addend's index_add
      if (in.size() != 3 || !in[0] || !in[1] || !in[2] || in[0]->constant != Op::kZeros || !in[2]->placement.partial())
        return false;
      const Placement& index = in[1]->placement;
      return (index.replicated() && index.workers == in[2]->placement.workers) || in[1]->constant.has_value();
    }
    case Op::kAdd:
    case Op::kSub:
      if (in.size() != 2 || inst.attrs.scalar_side != ScalarSide::kNone) return false;
      for (const Tensor* t : in)
        if (!t || !t->placement.partial() || t->placement.workers != in[0]->placement.workers ||
            t->meta.shape != meta.shape || t->meta.dtype != meta.dtype)
          return false;
      return true;
    default:
      return false;
  }
}

Result<Placement> CarryPartial(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  (void)meta;
  // The members: the pending sum's (the first one's). Every other operand is
  // a pending sum or copies on the same workers (CarriesPartial), or a
  // constant made again on each member.
  const Tensor* lead = *std::find_if(in.begin(), in.end(), [](const Tensor* t) { return t->placement.partial(); });
  const Placement& p = lead->placement;
  Placement out{Placement::Kind::kPartial, p.workers, {}, 0, {}};
  out.ids = PerMember(s, p, s.inst->op, s.inst->attrs, [&](size_t r) {
    std::vector<TensorId> ids;
    for (const Tensor* t : in) {
      const bool here = (t->placement.partial() || t->placement.replicated()) && t->placement.workers == p.workers;
      ids.push_back(here ? t->placement.ids[r] : MakeConstant(s, *t, t->meta.shape, p.workers[r]));
    }
    return ids;
  }, false);
  return out;
}

}  // namespace gt::sharding
