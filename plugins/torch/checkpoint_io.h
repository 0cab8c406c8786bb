// The worker's part of a distributed checkpoint (kCheckpointWrite /
// kCheckpointRead, gt/ops.def): its own piece of a tensor written to one
// file, or filled in place from the byte ranges of saved pieces it needs,
// and the metadata file written or answered. The plan (gt/checkpoint_plan.h)
// arrives with absolute paths already checked by the dispatcher's sharding
// stage against its checkpoint_root.
//
// Files are the pieces' raw bytes, row-major, native byte order, then an
// 8-byte trailer ("gtc1" and their CRC-32), checked when a read takes the
// whole file (a ranged read cannot check it). Every file
// is written under a temporary name and renamed when complete, so a file
// with its final name is always whole. Errors name the path and what failed
// (the client's error names this worker's host).
//
// Thread-safety: plain functions; the backend calls them from its one thread.
#pragma once

#include <ATen/ATen.h>

#include "gt/backend.h"
#include "gt/instruction.h"
#include "gt/status.h"

namespace gt::torch_backend {

// kCheckpointWrite: `piece` (the operand; undefined for the metadata) to
// the plan's path.
Status CheckpointWrite(const Instruction& inst, const at::Tensor* piece);
// kCheckpointRead: `piece` filled in place from the plan's boxes, or, with
// no operand, the metadata file's bytes sent to the client.
Status CheckpointRead(const Instruction& inst, const at::Tensor* piece, ReplySink& replies);

}  // namespace gt::torch_backend
