// The client's primitives of a distributed checkpoint (the user-facing API
// is Python's gt.distributed.checkpoint, which plans; docs/CHECKPOINTS.md).
// Each queues one instruction whose payload is a plan (gt/checkpoint_plan.h,
// paths relative to the dispatcher's checkpoint_root or absolute inside it);
// the dispatcher's sharding stage sends each piece's part to the worker
// holding it, which writes or reads the file itself: no tensor byte passes
// through this process or the dispatcher.
//
// Errors (a path outside checkpoint_root, a worker that cannot write or
// read, a file cut short) come at the next sync point, naming the worker
// and the path.
#pragma once

#include <string>

#include "gt/gt.h"

namespace gt::checkpoint {

// Queues the write of `t`'s pieces by `plan`'s write lines.
void write_pieces(const Tensor& t, const std::string& plan);
// Queues the fill of `t`'s pieces, in place, by `plan`'s read lines.
void read_pieces(const Tensor& t, const std::string& plan);
// Queues the write of the metadata file `path` with `text` (through a
// temporary name: once there it is whole). Sync first: the pieces it names
// must be there before it is.
void write_metadata(const std::string& path, const std::string& text);
// The metadata file `path`'s bytes, read by this client's worker. A sync point.
std::string read_metadata(const std::string& path);

}  // namespace gt::checkpoint
