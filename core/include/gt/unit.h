// Compiled units: a sequence of instructions defined once (kDefineUnit) and
// then replayed by one instruction (kRunUnit) that names only its inputs and
// outputs.
//
// A unit's template is its instructions with tensor ids replaced by
// placeholders: 1..inputs name the unit's inputs (tensors that exist before it
// runs, in order of first use); inputs+1, inputs+2, ... name the tensors its
// body produces, in the order it produces them. A template holds tensor ops,
// mutations (kCopyInto, kFill) and kFree, never a payload (kFromBytes) or any
// other control op.
//
// From a template follows its interface: the outputs (produced placeholders
// the body does not free, in production order; a kRunUnit's results map to
// them one to one) and the consumed inputs (inputs the body frees; a
// kRunUnit lists their operand indexes in attrs.axes, so that hosts can
// forget those tensors without decoding the template).
//
// Thread-safety: plain functions on values.
#pragma once

#include <cstdint>
#include <vector>

#include "gt/instruction.h"
#include "gt/status.h"

namespace gt {

struct UnitTemplate {
  uint32_t inputs = 0;
  std::vector<Instruction> body;  // placeholder ids; client, seq and signal unused
};

struct UnitInterface {
  uint32_t inputs = 0;
  uint32_t produced = 0;               // tensors the body makes (outputs and temporaries)
  std::vector<TensorId> outputs;       // placeholders, in production order
  std::vector<int64_t> consumed;       // input indexes (0-based) the body frees, ascending
};

// The template as the payload of a kDefineUnit (a serialized wire.proto Unit).
BlobPtr EncodeUnit(const UnitTemplate& unit);
// The operands a kRunUnit consumes (its attrs.axes as tensor ids; indexes
// out of range skipped, each id once): what a host that refuses or cannot
// run it must still free, since the client has forgotten them.
std::vector<TensorId> ConsumedOperands(const Instruction& run);

// Inverse of EncodeUnit. InvalidArgument when the bytes are not a Unit or
// name an unknown op or dtype.
Result<UnitTemplate> DecodeUnit(const Blob& bytes);
// Checks the template's wiring (every operand a placeholder that exists at
// that point, results numbered in production order, one result per tensor
// op, allowed ops only, nothing used after it is freed) and derives its
// interface. InvalidArgument naming the body instruction at fault.
Result<UnitInterface> AnalyzeUnit(const UnitTemplate& unit);

}  // namespace gt
