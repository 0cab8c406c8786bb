// Where a logical tensor of a client lives (the sharding modifier's view).
//
//   whole        one tensor on one worker; its id is the client's own
//   sharded      split along `axis` over `workers` like torch.chunk (sizes
//                may differ; the last ones may be smaller); one id per shard
//   replicated   a full copy on each of `workers`; one id per copy
//
//   partial      a pending sum: each of `workers` holds an addend of the
//                whole shape; one id per worker. Made by a contraction or a
//                sum over a split dim; all-reduced when an op needs its value
//                (the record then says replicated), reduce-scattered when a
//                redistribute splits it, and carried through the ops that are
//                linear in it (adding another alike, scaling, negating,
//                copying), as DTensor's Partial.
//
//   mesh         laid out on a 2-D mesh (`workers` row-major, `mesh_shape`
//                {rows, columns}) by one MeshAxis per mesh axis, as a DTensor
//                with different placements per axis: [Shard(0), Replicate()],
//                [Shard(0), Shard(1)], [Partial(), Shard(0)], ... Worker (i, j)
//                holds the box torch.chunk gives for its coordinates; a Partial
//                axis sums over it. Two Shard axes never cut the same dim (that
//                is one split over the flattened mesh: sharded). One id per
//                worker. See mesh.h.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gt/instruction.h"
#include "ir/shape_inference.h"

namespace gt::sharding {

// One axis of a mesh placement (DTensor's Shard(dim) / Replicate() / Partial()).
struct MeshAxis {
  enum class Kind : uint8_t { kShard, kReplicate, kPartial };
  Kind kind = Kind::kReplicate;
  int64_t dim = 0;  // kShard
  bool shard() const { return kind == Kind::kShard; }
  bool replicate() const { return kind == Kind::kReplicate; }
  bool partial() const { return kind == Kind::kPartial; }
  friend bool operator==(const MeshAxis&, const MeshAxis&) = default;
};

struct Placement {
  enum class Kind : uint8_t { kWhole, kSharded, kReplicated, kPartial, kMesh };
  Kind kind = Kind::kWhole;
  std::vector<int> workers;    // kWhole: exactly one
  std::vector<TensorId> ids;   // one per worker, same order
  int64_t axis = 0;            // kSharded
  std::vector<int64_t> sizes;  // kSharded: each shard's size along axis
  std::vector<int64_t> mesh_shape;  // kMesh: {rows, columns}
  std::vector<MeshAxis> mesh_axes;  // kMesh: one per mesh axis

  bool whole() const { return kind == Kind::kWhole; }
  bool sharded() const { return kind == Kind::kSharded; }
  bool replicated() const { return kind == Kind::kReplicated; }
  bool partial() const { return kind == Kind::kPartial; }
  bool mesh() const { return kind == Kind::kMesh; }
  // "whole on 0", "sharded(axis 0) on [0, 1] sizes [64, 64]", "replicated on [0, 1]",
  // "partial(sum) on [0, 1]", "mesh [[0, 1], [2, 3]] [Shard(0), Replicate()]".
  std::string ToString() const;
};

// A client tensor with a record here: its logical shape and dtype, and
// where its pieces live.
struct Tensor {
  TensorMeta meta;
  Placement placement;
  // kZeros or kOnes when the tensor was made so and never written since:
  // a copy or a piece of it elsewhere is made there, not sent (the zeros
  // and ones of gradient formulas meet shards without a collective).
  std::optional<Op> constant = std::nullopt;
  // A pending sum: the seq of the op that made it (a record of collectives
  // names it beside the op whose need for the value all-reduced it).
  uint64_t made_by = 0;
  // A pending sum that is a view of another (a reshape, transpose, slice,
  // ... of each addend): the view ops from the first pending sum it views
  // (operand 0 of the first: that base's client id) to it. When either is
  // summed, the view is made again from the summed base, so that the two
  // still share data (a write into one shows in the other), even when the
  // views between them are gone.
  std::vector<Instruction> view_of = {};
};

// torch.chunk sizes of `length` split `parts` ways (fewer pieces when
// `length` is small; none for 0).
std::vector<int64_t> ChunkSizes(int64_t length, size_t parts);

// Same kind on the same workers, and for shards the same axis and sizes:
// member r of each holds the same part of its tensor.
bool SameLayout(const Placement& a, const Placement& b);

// "[0, 1, 2]".
std::string WorkerList(const std::vector<int>& workers);
// "%12", as errors name a tensor.
std::string TensorName(TensorId id);
bool Contains(const std::vector<int>& v, int x);

}  // namespace gt::sharding
