// The sharding stage's tags for the pieces it places (gt/stage.h PieceTag):
// what lets a restarted dispatcher's stage rebuild its records from what the
// workers hold (docs/ARCHITECTURE.md section 9).
//
// A tag is the whole record of the piece's client tensor (its logical id,
// shape, dtype and placement: kind, workers, piece ids, axis, sizes, mesh
// shape and axes) and which member of it the piece is. Every piece of one
// tensor carries the same record, so that a restore can check them against
// each other and against what each worker holds. Bounded: at most
// kMaxTagWorkers pieces, kMaxTagRank dims, gt::kMaxPieceTagBytes in all.
//
// Encoding (little-endian base-128 varints; signed values zigzagged):
//   'g' 'S' version(1) member
//   logical kind n workers[n] ids[n] axis nsizes sizes[nsizes]
//   nmesh mesh_shape[nmesh] naxes (axis_kind dim)[naxes] rank dims[rank] dtype
// What is not kept: a pending sum's view_of (a restored view of a pending
// sum is summed on its own), `constant` and `made_by` (hints only).
//
// Thread-safety: free functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "gt/status.h"
#include "placement.h"

namespace gt::sharding {

inline constexpr size_t kMaxTagWorkers = 4096;
inline constexpr size_t kMaxTagRank = 64;

// The record part of every piece's tag of `logical`, laid out as `t`.
std::string EncodeRecord(TensorId logical, const Tensor& t);
// The tag of member `member` of a tensor whose record is `record`.
std::string PieceTagOf(std::string_view record, size_t member);

struct DecodedTag {
  size_t member = 0;
  TensorId logical = 0;
  Tensor tensor;            // meta and placement; no constant, made_by or view_of
  std::string_view record;  // the record's bytes (into the tag): alike for every piece of one tensor
};
// The tag's contents, or InvalidArgument naming what is malformed (bad
// magic or version, a count over its bound, a value out of range, trailing
// bytes). Checks the record's own consistency too (CheckRecord).
Result<DecodedTag> DecodePieceTag(std::string_view tag);

// OK when `t`'s placement fits itself and its meta: one worker and id per
// piece, no worker twice, a whole tensor in one piece, shard sizes that add
// up to the cut dim, a mesh of rows * columns pieces with two axes; each
// piece id is a stage's physical id or the logical id itself.
Status CheckRecord(TensorId logical, const Tensor& t);

// The shape member `member` of `t` holds on its worker.
Shape PieceShape(const Tensor& t, size_t member);

}  // namespace gt::sharding
