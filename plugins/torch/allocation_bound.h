// Bounds on what an instruction will allocate, worked out from shapes
// before it runs, so that a client's memory quota (torch backend option
// max_client_mib) refuses an op before its result exists, not after: a
// broadcast of two small tensors or a unit's body can ask for far more than
// the client holds.
//
// Thread-safety: plain functions.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <vector>

#include "gt/instruction.h"
#include "gt/status.h"
#include "gt/unit.h"
#include "kernels.h"

namespace gt::torch_backend {

// The bytes of the result of `inst` (a tensor op whose result can be larger
// than its largest operand: broadcasting, contraction, concatenation), from
// its operands in `operands` (and indexing, whose index may pick a row many
// times). nullopt where it cannot outgrow its operands or an operand is
// missing (the kernel names it); an error where the shapes do not work out,
// which refuses the op: what gt cannot bound, it does not run.
Result<std::optional<double>> GrowingResultBytes(const Instruction& inst, const TensorSource& operands);

// The most bytes `unit`'s body holds at once beyond its inputs, run on
// `inputs` (in placeholder order). nullopt when it takes part in a
// collective (refusing it would stall the other members); an error naming
// the body instruction whose shapes do not work out.
Result<std::optional<double>> UnitPeakBytes(const UnitTemplate& unit, const std::vector<at::Tensor>& inputs);

}  // namespace gt::torch_backend
