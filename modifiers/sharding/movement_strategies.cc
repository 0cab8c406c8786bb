#include <algorithm>
#include <optional>

#include "strategies.h"

namespace gt::sharding {
namespace {

// Where the sharded axis goes under unsqueeze / squeeze / permute, or none
// when the op touches it (squeezing it, or squeezing every size-1 dim, which
// could squeeze a shard of size 1).
std::optional<int64_t> AxisAfter(const Instruction& inst, int64_t axis, int64_t rank) {
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

// Reshapes member r's piece of `p` to `shape` with `sizes[r]` along `axis`.
std::vector<TensorId> ReshapeEach(Step& s, const Placement& p, const Shape& shape, int64_t axis,
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

// Within one index of the dims before the sharded axis, a shard holds a
// contiguous range of the trailing elements (row-major). A reshape that
// keeps those leading dims keeps the shards where they are when every
// shard's range is whole rows of the first non-1 trailing dim of the new
// shape: e.g. [B, T, D] sharded on B to [B*T, D] (sizes times T), or
// [B, T, H*d] sharded on the last dim to [B, T, H, d] (sizes over d: whole
// attention heads), or back when each size divides.
std::optional<Placement> ReshapeRows(Step& s, const Tensor& t, const TensorMeta& meta) {
  const Placement& p = t.placement;
  const Shape& from = t.meta.shape;
  const Shape& to = meta.shape;
  const size_t axis = static_cast<size_t>(p.axis);
  if (to.size() <= axis || !std::equal(from.begin(), from.begin() + p.axis, to.begin())) return std::nullopt;
  int64_t inner_old = 1;
  for (size_t d = axis + 1; d < from.size(); ++d) inner_old *= from[d];
  size_t b = axis;
  while (b + 1 < to.size() && to[b] == 1) ++b;
  int64_t inner_new = 1;
  for (size_t d = b + 1; d < to.size(); ++d) inner_new *= to[d];
  if (inner_old == 0 || inner_new == 0) return std::nullopt;
  std::vector<int64_t> sizes;
  for (int64_t size : p.sizes) {  // each shard's start is a sum of sizes: whole rows if every size is
    if ((size * inner_old) % inner_new != 0) return std::nullopt;
    sizes.push_back(size * inner_old / inner_new);
  }
  Placement out = p;
  out.axis = static_cast<int64_t>(b);
  out.sizes = sizes;
  out.ids = ReshapeEach(s, p, to, out.axis, sizes);
  return out;
}

// A reshape that leaves the sharded dim and every dim after it as they are
// (merging or splitting only dims before it) reshapes each shard alike:
// e.g. a gradient [B, T, F] cut on F to [B*T, F].
std::optional<Placement> ReshapeLeading(Step& s, const Tensor& t, const TensorMeta& meta) {
  const Placement& p = t.placement;
  const Shape& from = t.meta.shape;
  const Shape& to = meta.shape;
  const size_t tail = from.size() - static_cast<size_t>(p.axis);
  if (to.size() < tail || !std::equal(from.end() - static_cast<int64_t>(tail), from.end(), to.end() - static_cast<int64_t>(tail)))
    return std::nullopt;
  Placement out = p;
  out.axis = static_cast<int64_t>(to.size() - tail);
  out.ids = ReshapeEach(s, p, to, out.axis, p.sizes);
  return out;
}

// A slice along the sharded dim: each shard slices what of the range it
// holds, and the result stays sharded over the shards that hold any of it
// (no communication).
Result<Placement> SliceAlongShards(Step& s, const Tensor& t, const TensorMeta& meta) {
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

}  // namespace

// A replicated tensor moves on every replica; a sharded one is transposed
// shard-local (its sharded axis follows the swap); the rest is made whole.
Result<Placement> Movement(Step& s, const Tensor& t, const TensorMeta& meta) {
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
  if (p.sharded() && s.inst->op == Op::kReshape) {
    if (std::optional<Placement> out = ReshapeRows(s, t, meta)) return *out;
    if (std::optional<Placement> out = ReshapeLeading(s, t, meta)) return *out;
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

// Along an unsharded dim every shard is sliced (or indexed) alike; a select
// along the sharded dim needs only the shard holding the index.
Result<Placement> SliceOrSelect(Step& s, const Tensor& t, const TensorMeta& meta) {
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

namespace {

// The layout a redistribute names: {layout, axis, worker...} (gt/op.h).
Result<Placement> TargetLayout(const Instruction& inst, const Tensor& x, const Workers& workers) {
  const TensorMeta& meta = x.meta;
  const std::vector<int64_t>& a = inst.attrs.axes;
  const std::string where = inst.Describe() + ": ";
  if (a.size() < 3 || a[0] < 0 || a[0] > 2)
    return InvalidArgument(where + "expected attrs {layout (0 whole, 1 split, 2 copies), axis, worker...}");
  Placement out;
  out.kind = a[0] == 0 ? Placement::Kind::kWhole : a[0] == 1 ? Placement::Kind::kSharded : Placement::Kind::kReplicated;
  if (a[0] == 0 && a.size() == 3 && a[2] == -1)  // whole where x's first piece lives
    return Placement{Placement::Kind::kWhole, {x.placement.workers.at(0)}, {}, 0, {}};
  Result<std::vector<int>> members = LiveWorkerList(a, 2, workers, where);
  if (!members.ok()) return members.status();
  out.workers = std::move(*members);
  if (out.whole() && out.workers.size() != 1) return InvalidArgument(where + "a whole tensor lives on one worker");
  if (out.sharded()) {
    const int64_t rank = static_cast<int64_t>(meta.shape.size());
    const int64_t axis = Wrap(a[1], meta.shape.size());
    if (axis < 0 || axis >= rank)
      return InvalidArgument(where + "axis " + std::to_string(a[1]) + " is out of range for a tensor of shape " +
                             ShapeToString(meta.shape));
    out.axis = axis;
    out.sizes = ChunkSizes(meta.shape[static_cast<size_t>(axis)], out.workers.size());
    if (out.sizes.empty()) return InvalidArgument(where + "cannot split dim " + std::to_string(axis) + " of size 0");
    out.workers.resize(out.sizes.size());
  }
  if (out.workers.size() == 1) out = Placement{Placement::Kind::kWhole, out.workers, {}, 0, {}};
  return out;
}

}  // namespace

Result<Placement> Redistribute(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta) {
  (void)meta;  // x's own
  const Tensor& x = *in.at(0);
  Result<Placement> target = TargetLayout(*s.inst, x, *s.workers);
  if (!target.ok()) return target.status();
  Placement out = std::move(*target);
  // A pending sum split over its own workers is reduce-scattered, copied to
  // them all-reduced; anywhere else, summed first (Replicate does).
  if (x.placement.partial() && out.workers == x.placement.workers) {
    if (out.sharded()) {
      out.ids = ReduceScatter(s, x, out);
      return out;
    }
    if (out.replicated()) {
      out.ids = AllReduce(s, x.placement, x.placement.ids, x.meta, 0, x.made_by);
      return out;
    }
  }
  std::vector<TensorId> pieces;
  if (out.whole()) pieces = {WholeOn(s, x, out.workers[0])};
  if (out.replicated()) pieces = CopiesOn(s, x, out.workers);
  if (out.sharded()) pieces = ShardLike(s, x, out.axis, out);
  // Each piece copied into a tensor of the result's own: x keeps its pieces,
  // and a slice of a temporary copy would keep all of that copy alive.
  if (out.whole()) {
    Instruction clone;
    clone.op = Op::kClone;
    clone.operands = {pieces[0]};
    clone.results = {s.inst->results.at(0)};
    EmitOn(s, out.workers[0], std::move(clone));
    out.ids = {s.inst->results.at(0)};
    return out;
  }
  out.ids = PerMember(s, out, Op::kClone, {}, [&pieces](size_t r) { return std::vector<TensorId>{pieces[r]}; }, false);
  return out;
}

}  // namespace gt::sharding
