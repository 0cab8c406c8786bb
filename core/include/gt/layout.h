// Placement layouts on the wire: the one codec the client
// (client/src/distributed.cc), the dispatcher's sharding stage
// (modifiers/sharding/) and the Python bindings share.
//
// A layout travels as int64 values in two places (gt/op.h):
//   - a redistribute's target, in its attrs.axes (client -> sharding stage):
//       {kind, axis, worker...}                      kind kWhole, kSplit or kCopies
//       {kOnMesh, rows, columns, kind_0, dim_0, kind_1, dim_1, worker...}
//     (a whole target may name worker -1: where the operand's first piece lives);
//   - the answer to an inspect layout query (sharding stage -> client, sent by
//     the dispatcher itself as a fetch's DATA of an int64 vector):
//       {kind, axis, n, worker_1..n}                 then size_1..n when kSplit
//       {kOnMesh, 0, n, worker_1..n, rows, columns, kind_0, dim_0, kind_1, dim_1}
// A recorded collective (inspect kStopRecording) travels as
//   {entries, dropped, entry...}, each entry {seq, made_by, op, reduce, bytes, n, member_1..n}.
//
// The numbers below are wire numbers: never renumber them.
//
// Decoders check structure only (counts, kinds, mesh sizes) and return
// InvalidArgument naming what is wrong; whether a worker is live or a dim in
// range is for the code that acts on the layout.
//
// Thread-safety: plain functions on values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gt/op.h"
#include "gt/op_attrs.h"
#include "gt/status.h"

namespace gt::layout {

// How a tensor is laid out over its workers: the first value of every encoding.
enum class Kind : int64_t {
  kWhole = 0,       // on one worker
  kSplit = 1,       // split along `axis` over the workers, as torch.chunk
  kCopies = 2,      // a copy on each worker (DTensor's Replicate())
  kPendingSum = 3,  // each worker an addend (DTensor's Partial()); answers only
  kOnMesh = 4,      // a 2-D mesh with a placement per mesh axis
};

// One mesh axis's placement (DTensor's vocabulary).
enum class AxisKind : int64_t { kShard = 1, kReplicate = 2, kPartial = 3 };
struct AxisPlacement {
  AxisKind kind = AxisKind::kReplicate;
  int64_t dim = 0;  // kShard: the dim the axis cuts (in a target it may count from the end)
  friend bool operator==(const AxisPlacement&, const AxisPlacement&) = default;
};

struct Layout {
  Kind kind = Kind::kWhole;
  int64_t axis = 0;                      // kSplit: the split dim
  std::vector<int64_t> workers;          // worker indexes; row-major on a mesh
  std::vector<int64_t> sizes;            // kSplit, in an answer: each piece's length along axis
  std::vector<int64_t> mesh_shape;       // kOnMesh: {rows, columns}
  std::vector<AxisPlacement> mesh_axes;  // kOnMesh: one per mesh axis
  friend bool operator==(const Layout&, const Layout&) = default;
};

// The largest mesh side a target may name (keeps rows * columns in range).
inline constexpr int64_t kMaxMeshSide = int64_t{1} << 16;

// A redistribute's attrs.axes for `target`. REQUIRES: target.kind is not
// kPendingSum; on a mesh, two axes and rows * columns workers.
std::vector<int64_t> EncodeTarget(const Layout& target);
// The target a redistribute's attrs.axes names. InvalidArgument for too few
// values, an unknown kind (kPendingSum included: it cannot be asked for), a
// mesh whose sides or worker count do not match, or a mesh axis kind that is
// neither kShard nor kReplicate.
Result<Layout> DecodeTarget(std::span<const int64_t> axes);

// The answer to a layout query. REQUIRES: a split's sizes, one per worker; a
// mesh's shape and two axes.
std::vector<int64_t> EncodeAnswer(const Layout& layout);
// InvalidArgument for an answer whose counts do not add up.
Result<Layout> DecodeAnswer(std::span<const int64_t> values);

// One collective a recording noted.
struct RecordedCollective {
  uint64_t seq = 0;      // the instruction it ran for
  uint64_t made_by = 0;  // the instruction that made what it moves (a pending sum's maker)
  Op op = Op::kAllReduce;
  ReduceOp reduce = ReduceOp::kSum;  // kAllReduce's
  int64_t bytes = 0;                 // the whole tensor's bytes
  std::vector<int64_t> workers;      // its members, in rank order
};
// The values `entry` takes in a recording (6 + its members).
inline size_t RecordedValues(size_t members) { return 6 + members; }
// Appends `entry` to `log`, a recording's entries back to back.
void AppendRecorded(std::vector<int64_t>& log, const RecordedCollective& entry);

struct Recording {
  std::vector<RecordedCollective> entries;
  uint64_t dropped = 0;  // collectives past the recorder's cap, counted only
};
// The answer to kStopRecording: `log` (AppendRecorded's) and the dropped count.
std::vector<int64_t> EncodeRecording(std::span<const int64_t> log, uint64_t dropped);
// InvalidArgument for an answer whose counts do not add up or an unknown op.
Result<Recording> DecodeRecording(std::span<const int64_t> values);

}  // namespace gt::layout
