// Device meshes and placements, with PyTorch DTensor's names: where a
// tensor's pieces live, said by the program instead of a signal config.
//
//   gt::distributed::DeviceMesh mesh({0, 1, 2, 3}, "data");
//   gt::Tensor x = gt::distributed::distribute_tensor(gt::randn({8, 4}), mesh, {gt::distributed::Shard(0)});
//   gt::distributed::Layout l = gt::distributed::layout(x);   // mesh [0, 1, 2, 3], [Shard(dim=0)]
//   gt::Tensor y = gt::distributed::redistribute(x, mesh, {gt::distributed::Replicate()});  // an all-gather
//
// A placement per mesh axis: Shard(dim) splits dim over the axis as
// torch.chunk does (fewer pieces than workers when the dim is short: the
// last workers then hold none), Replicate() puts a copy on each worker of
// the axis. Partial() is a pending sum, each worker holding an addend: a
// matmul contracting a split dim, or a sum over one, makes it (no
// communication yet); the first op that needs its value all-reduces it once
// (the tensor is Replicate() from then on), a redistribute to Shard(d)
// reduce-scatters it (half the bytes), and ops linear in it (adding another
// alike, scaling by a number, negating, copying) keep it pending, as
// DTensor's. It cannot be asked for.
//
// The dispatcher's sharding stage performs every change of layout (one
// `redistribute` instruction, gt/op.h) with the collectives it needs:
// whole or replicated -> split: a broadcast to the workers missing a copy,
// then each slices its piece; split -> replicated or whole: an all-gather;
// split along one dim -> along another: an all-gather, then slices;
// partial -> split over its workers: a reduce-scatter; -> replicated: an
// all-reduce. The
// result is a new tensor; ops on it follow its placement (the table in
// modifiers/sharding/sharding.h), and its gradient keeps the layout it
// arrives in.
//
// Meshes: 1-D or 2-D. On a 2-D mesh placements alike on both axes are one
// split or one copy over the flattened mesh ([Shard(d), Shard(d)],
// [Replicate(), Replicate()]); different ones ([Shard(0), Replicate()],
// [Shard(0), Shard(1)], [Replicate(), Shard(1)]) are a DTensor-style layout
// per mesh axis: worker (i, j) holds the box torch.chunk gives for its
// coordinates, collectives run within the groups along one axis, and ops
// propagate the placements per axis ([Shard(0), Replicate()] @
// [Replicate(), Shard(1)] -> [Shard(0), Shard(1)]; a contraction over a dim
// one axis cuts -> Partial() along that axis). The ops that run piece by
// piece there, and what every other op does, are in
// modifiers/sharding/mesh.h. A Shard(d) along an axis of n workers needs
// dim d to give n pieces (torch.chunk).
//
// Recording: between start_recording() and stop_recording() the sharding
// stage notes every collective the client's ops cause (its kind, members and
// bytes); stop_recording() returns them with the op, phase and source of
// the instruction that caused each.
//
// Thread-safety: as gt::Tensor (any thread; the session serialises).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gt/config.h"
#include "gt/gt.h"
#include "gt/layout.h"

namespace gt::distributed {

struct Placement {
  // The layout codec's per-axis kinds (gt/layout.h), so that a placement
  // crosses the wire and the Python bindings under one set of numbers.
  using Kind = layout::AxisKind;
  Kind kind = Kind::kReplicate;
  int64_t dim = 0;  // kShard: the split dimension (negative counts from the end)

  bool is_shard() const { return kind == Kind::kShard; }
  bool is_replicate() const { return kind == Kind::kReplicate; }
  bool is_partial() const { return kind == Kind::kPartial; }
  // "Shard(dim=0)", "Replicate()", "Partial(sum)" (DTensor's spelling).
  std::string ToString() const;
  friend bool operator==(const Placement&, const Placement&) = default;
};
Placement Shard(int64_t dim);
Placement Replicate();
Placement Partial();

// Worker indexes laid out on named axes (row-major for 2-D).
class DeviceMesh {
 public:
  // 1-D. Throws gt::Error (invalid_argument) for an empty list, a negative
  // or repeated index.
  explicit DeviceMesh(std::vector<int> workers, std::string axis_name = "workers");
  // 2-D: rows of equal length; one name per axis, distinct.
  DeviceMesh(const std::vector<std::vector<int>>& workers, std::vector<std::string> axis_names);

  const std::vector<int64_t>& shape() const { return shape_; }
  size_t ndim() const { return shape_.size(); }
  // Workers along `axis` (REQUIRES: 0 <= axis < ndim()).
  int64_t size(size_t axis) const { return shape_.at(axis); }
  // Every worker, row-major.
  const std::vector<int>& workers() const { return workers_; }
  const std::vector<std::string>& axis_names() const { return axis_names_; }
  // "DeviceMesh([[0, 1], [2, 3]], axes=(data, model))".
  std::string ToString() const;
  friend bool operator==(const DeviceMesh&, const DeviceMesh&) = default;

 private:
  // Appends `row` to workers_: non-empty, no negative or repeated index.
  void AddRow(const std::vector<int>& row);

  std::vector<int64_t> shape_;
  std::vector<int> workers_;
  std::vector<std::string> axis_names_;
};

// A copy of `t` laid out on `mesh` by `placements` (one per mesh axis).
// Throws gt::Error (invalid_argument) for a count that does not match the
// mesh, a Shard dim out of range, Partial(); a dim too short to give a
// piece to each worker of its mesh axis is refused by the dispatcher. A worker that is not live is reported by the
// dispatcher at the next sync point. `t` may live anywhere.
Tensor distribute_tensor(const Tensor& t, const DeviceMesh& mesh, const std::vector<Placement>& placements);
// The same for a tensor already distributed (DTensor's redistribute).
Tensor redistribute(const Tensor& t, const DeviceMesh& mesh, const std::vector<Placement>& placements);
// `t` whole, on the first worker holding a piece of it.
Tensor full_tensor(const Tensor& t);

// Where a tensor lives: a whole tensor is a 1-worker mesh, [Replicate()].
struct Layout {
  DeviceMesh mesh;
  std::vector<Placement> placements;
  std::vector<int64_t> shard_sizes;  // a split's piece sizes along its dim, per worker; else empty
};
// Asks the dispatcher (a sync point: waits for `t`'s op). Throws gt::Error
// (invalid_argument) when the dispatcher runs no sharding stage.
Layout layout(const Tensor& t);

// One collective a recorded op caused.
struct CollectiveRecord {
  std::string kind;          // "all_reduce", "all_gather", "broadcast"
  std::string reduce;        // all_reduce: "sum", "max" or "min"; else empty
  std::vector<int> workers;  // its members, in rank order
  int64_t bytes = 0;         // the whole tensor's bytes it reduces, gathers or broadcasts
  uint64_t seq = 0;          // the instruction it ran for
  // The instruction that made what it moves: `seq`'s own, or for a pending
  // sum reduced later, the op that made the sum (a matmul in backward, say).
  uint64_t made_by = 0;
  std::string op;            // made_by's op ("matmul", "redistribute", ...)
  std::string signal;        // its signal scope; empty outside any
  bool backward = false;     // made_by was issued by backward()
  std::string source;        // made_by's source location (see set_source_hook); may be empty
  std::string needed_by;     // a pending sum's: "op at source" of seq, the op that needed its value; else empty
};
// Starts recording this client's collectives (anything recorded before is
// dropped). Queued like an op: no wait.
void start_recording();
// Stops recording and returns what was recorded, in stream order (a sync point).
std::vector<CollectiveRecord> stop_recording();
// The signal config that places what a scope makes as `placements` on
// `mesh` (the YAML `placements:` of gt/config.h): alike on every axis, a
// split for Shard(d), a copy on each mesh worker for Replicate(); different
// per axis, a MeshConfig (made whole, then laid out so). Throws as
// distribute_tensor (the Shard dim is checked where a tensor is made, as
// shard.axis is).
SignalConfig signal_config(const DeviceMesh& mesh, const std::vector<Placement>& placements);

// While recording, called once per op issued, before it is queued, for its
// CollectiveRecord::source (the Python package passes the caller's
// file:line). Empty function: none.
void set_source_hook(std::function<std::string()> hook);

}  // namespace gt::distributed
