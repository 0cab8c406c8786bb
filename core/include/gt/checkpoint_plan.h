// The plan a distributed checkpoint op carries (kCheckpointWrite /
// kCheckpointRead, gt/ops.def): which file each piece of a tensor is written
// to, or which byte ranges of which saved pieces fill it. The client
// (python/gt/distributed_checkpoint) writes it, the dispatcher's sharding
// stage resolves its paths under checkpoint_root and splits it by piece, and
// the worker's torch backend carries it out. No tensor bytes are in a plan.
//
// Text, one line each, fields separated by one space, the path last (it may
// hold spaces, never a newline):
//   write <piece> <path>                         piece <piece> of the operand to <path>
//   read <piece> <ndim> <file_shape> <from> <to> <size> <path>
//        (ndim values each) the box <size> at <from> of the row-major file
//        <path>, whose whole shape is <file_shape>, into piece <piece> at <to>
//   metadata <path>                              the metadata file; in a
//        write, every byte after this first line is its text
// <piece> indexes the operand's pieces in the order a layout query answers
// its workers (gt/layout.h).
//
// Thread-safety: plain functions on values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gt/instruction.h"
#include "gt/status.h"

namespace gt::checkpoint {

struct PlanLine {
  enum class Kind : uint8_t { kWrite, kRead, kMetadata };
  Kind kind = Kind::kWrite;
  int64_t piece = 0;
  std::string path;
  // kRead: the box.
  Shape file_shape, from, to, size;
};

struct Plan {
  std::vector<PlanLine> lines;
  std::string content;  // a metadata write's text
};

// InvalidArgument naming the line for an unknown verb, a missing or
// negative number, a box outside its file's shape, or an empty path.
Result<Plan> ParsePlan(std::string_view text);
std::string FormatPlan(const Plan& plan);

// `path` (absolute, or relative to `root`) made absolute and normal, when it
// lies inside `root`; InvalidArgument naming both when it does not ("..",
// another tree). Lexical: `root` itself is the operator's to keep free of
// links that lead out of it.
Result<std::string> ResolveUnder(const std::string& root, const std::string& path);

}  // namespace gt::checkpoint
