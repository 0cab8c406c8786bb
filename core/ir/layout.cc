// The layout codec (gt/layout.h): the wire forms of a redistribute's target,
// a layout query's answer and a recording.
#include "gt/layout.h"

#include <string>

namespace gt::layout {
namespace {

int64_t Num(Kind kind) { return static_cast<int64_t>(kind); }
int64_t Num(AxisKind kind) { return static_cast<int64_t>(kind); }

// The per-axis {kind, dim} pairs of a mesh, appended to `out`.
void AppendAxes(std::vector<int64_t>& out, const std::vector<AxisPlacement>& axes) {
  for (const AxisPlacement& a : axes) out.insert(out.end(), {Num(a.kind), a.dim});
}

// Two {kind, dim} pairs from values[at]; kinds above `max_kind` refused.
Result<std::vector<AxisPlacement>> ReadAxes(std::span<const int64_t> values, size_t at, AxisKind max_kind) {
  std::vector<AxisPlacement> axes;
  for (size_t axis = 0; axis < 2; ++axis) {
    const int64_t kind = values[at + 2 * axis], dim = values[at + 2 * axis + 1];
    if (kind < Num(AxisKind::kShard) || kind > Num(max_kind))
      return InvalidArgument("mesh axis " + std::to_string(axis) + ": kind " + std::to_string(kind) +
                             (max_kind == AxisKind::kReplicate ? " is neither 1 (Shard) nor 2 (Replicate)"
                                                               : " is not 1 (Shard), 2 (Replicate) or 3 (Partial)"));
    axes.push_back(AxisPlacement{static_cast<AxisKind>(kind), dim});
  }
  return axes;
}

bool MeshSides(int64_t rows, int64_t columns) {
  return rows >= 1 && columns >= 1 && rows <= kMaxMeshSide && columns <= kMaxMeshSide;
}

Result<Layout> DecodeMeshTarget(std::span<const int64_t> a) {
  if (a.size() < 8 || !MeshSides(a[1], a[2]) || static_cast<int64_t>(a.size()) != 7 + a[1] * a[2])
    return InvalidArgument("expected mesh attrs {4, rows, columns, kind_0, dim_0, kind_1, dim_1, worker...} "
                           "with rows * columns workers");
  Result<std::vector<AxisPlacement>> axes = ReadAxes(a, 3, AxisKind::kReplicate);
  if (!axes.ok()) return axes.status();
  Layout out;
  out.kind = Kind::kOnMesh;
  out.mesh_shape = {a[1], a[2]};
  out.mesh_axes = std::move(*axes);
  out.workers.assign(a.begin() + 7, a.end());
  return out;
}

Status Malformed(const std::string& why) { return InvalidArgument("malformed layout answer: " + why); }

}  // namespace

std::vector<int64_t> EncodeTarget(const Layout& target) {
  std::vector<int64_t> out;
  if (target.kind == Kind::kOnMesh) {
    out = {Num(Kind::kOnMesh), target.mesh_shape.at(0), target.mesh_shape.at(1)};
    AppendAxes(out, target.mesh_axes);
  } else {
    out = {Num(target.kind), target.axis};
  }
  out.insert(out.end(), target.workers.begin(), target.workers.end());
  return out;
}

Result<Layout> DecodeTarget(std::span<const int64_t> axes) {
  if (!axes.empty() && axes[0] == Num(Kind::kOnMesh)) return DecodeMeshTarget(axes);
  if (axes.size() < 3 || axes[0] < Num(Kind::kWhole) || axes[0] > Num(Kind::kCopies))
    return InvalidArgument("expected attrs {layout (0 whole, 1 split, 2 copies), axis, worker...}");
  Layout out;
  out.kind = static_cast<Kind>(axes[0]);
  out.axis = axes[1];
  out.workers.assign(axes.begin() + 2, axes.end());
  return out;
}

std::vector<int64_t> EncodeAnswer(const Layout& layout) {
  std::vector<int64_t> out = {Num(layout.kind), layout.axis, static_cast<int64_t>(layout.workers.size())};
  out.insert(out.end(), layout.workers.begin(), layout.workers.end());
  if (layout.kind == Kind::kSplit) out.insert(out.end(), layout.sizes.begin(), layout.sizes.end());
  if (layout.kind == Kind::kOnMesh) {
    out.insert(out.end(), layout.mesh_shape.begin(), layout.mesh_shape.end());
    AppendAxes(out, layout.mesh_axes);
  }
  return out;
}

Result<Layout> DecodeAnswer(std::span<const int64_t> v) {
  if (v.size() < 4 || v[2] < 1 || static_cast<uint64_t>(v[2]) > v.size() - 3)
    return Malformed("expected {layout, axis, n, worker_1..n, ...} with n >= 1");
  if (v[0] < Num(Kind::kWhole) || v[0] > Num(Kind::kOnMesh)) return Malformed("unknown layout " + std::to_string(v[0]));
  const size_t n = static_cast<size_t>(v[2]);
  Layout out;
  out.kind = static_cast<Kind>(v[0]);
  out.axis = v[1];
  out.workers.assign(v.begin() + 3, v.begin() + static_cast<std::ptrdiff_t>(3 + n));
  const std::span<const int64_t> rest = v.subspan(3 + n);
  if (out.kind == Kind::kSplit) {
    if (rest.size() != n) return Malformed("a split names one size per worker");
    out.sizes.assign(rest.begin(), rest.end());
  } else if (out.kind == Kind::kOnMesh) {
    if (rest.size() != 6 || !MeshSides(rest[0], rest[1]) || static_cast<uint64_t>(rest[0] * rest[1]) != n)
      return Malformed("a mesh layout names {rows, columns, kind_0, dim_0, kind_1, dim_1} for rows * columns workers");
    Result<std::vector<AxisPlacement>> axes = ReadAxes(rest, 2, AxisKind::kPartial);
    if (!axes.ok()) return Malformed(axes.status().message());
    out.mesh_shape = {rest[0], rest[1]};
    out.mesh_axes = std::move(*axes);
  } else if (!rest.empty()) {
    return Malformed("values after the workers");
  }
  return out;
}

void AppendRecorded(std::vector<int64_t>& log, const RecordedCollective& entry) {
  log.insert(log.end(), {static_cast<int64_t>(entry.seq), static_cast<int64_t>(entry.made_by),
                         static_cast<int64_t>(entry.op), static_cast<int64_t>(entry.reduce), entry.bytes,
                         static_cast<int64_t>(entry.workers.size())});
  log.insert(log.end(), entry.workers.begin(), entry.workers.end());
}

std::vector<int64_t> EncodeRecording(std::span<const int64_t> log, uint64_t dropped) {
  std::vector<int64_t> out = {0, static_cast<int64_t>(dropped)};
  for (size_t i = 0; i + 5 < log.size(); i += RecordedValues(static_cast<size_t>(log[i + 5]))) ++out[0];
  out.insert(out.end(), log.begin(), log.end());
  return out;
}

Result<Recording> DecodeRecording(std::span<const int64_t> v) {
  if (v.size() < 2 || v[0] < 0 || v[1] < 0) return Malformed("expected {entries, dropped, entry...}");
  Recording out;
  out.dropped = static_cast<uint64_t>(v[1]);
  size_t at = 2;
  for (int64_t i = 0; i < v[0]; ++i) {
    if (at + 6 > v.size() || v[at + 5] < 0 || static_cast<uint64_t>(v[at + 5]) > v.size() - at - 6)
      return Malformed("recorded collective " + std::to_string(i) + " runs past the end");
    const int64_t op = v[at + 2];
    if (op < 0 || op >= static_cast<int64_t>(Op::kCount)) return Malformed("unknown op " + std::to_string(op));
    RecordedCollective c;
    c.seq = static_cast<uint64_t>(v[at]);
    c.made_by = static_cast<uint64_t>(v[at + 1]);
    c.op = static_cast<Op>(op);
    c.reduce = static_cast<ReduceOp>(v[at + 3]);
    c.bytes = v[at + 4];
    const size_t n = static_cast<size_t>(v[at + 5]);
    c.workers.assign(v.begin() + static_cast<std::ptrdiff_t>(at + 6), v.begin() + static_cast<std::ptrdiff_t>(at + 6 + n));
    at += RecordedValues(n);
    out.entries.push_back(std::move(c));
  }
  return out;
}

}  // namespace gt::layout
