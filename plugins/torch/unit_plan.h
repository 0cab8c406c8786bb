// The interpreter's plan for a unit: the template's body rewritten once, when
// the unit is defined, so that every replay runs fewer kernels. A unit is a
// whole sequence seen at once, which eager execution never sees; the
// rewrites use exactly that:
//
//   constants      instructions that depend on no input (ones, zeros, arange
//                  and pure ops on those; e.g. the seed gradient of a loss)
//                  move to a prologue that runs on the first replay only;
//                  their results are kept and reused
//   common subexpressions
//                  a pure instruction equal to an earlier one (same op,
//                  attributes and operands, no mutation in between) reuses
//                  the earlier result (autograd's d(x*x) = g*x + g*x)
//   transpose pairs
//                  transpose(transpose(x)) over the same two dimensions is x
//   dead code      results that reach no output and no mutation are not made
//   fused kernels  two patterns that autograd and optimizers emit become one
//                  kernel each (see Fusion): eager execution, one
//                  instruction at a time, cannot see them
//   frees          every temporary is released right after its last use
//
// What is never rewritten: random creation (fresh numbers each time),
// collectives, clones, mutations. A unit that mutates a tensor it made
// itself, or whose output would be a constant, is left as it was: the
// rewrites above assume only inputs are mutated, so no kept constant and no
// shared result can change under them.
//
// Pure IR code: no LibTorch here (the tests check plans without tensors).
#pragma once

#include <cstddef>
#include <vector>

#include "gt/instruction.h"
#include "gt/unit.h"

namespace gt::torch_backend {

// How a body step is computed when the planner fused a pattern into it. The
// step stays an instruction (its operands are what the fused kernel reads,
// its result what it makes), so frees and lookups treat it like any other.
// The backend checks each fused kernel's preconditions on every run (equal
// dtypes and shapes, no partial overlap) and computes the pattern op by op
// when they do not hold.
enum class Fusion : uint8_t {
  kNone = 0,
  // copy_into(p, sub(p, mul(g, s))): p -= s * g in place, one pass over p
  // and g and no temporaries (torch.optim.SGD's update). The step is
  // kCopyInto {p, g} with attrs.scalar = s. Rounded as the pattern is.
  kScaledSubtractInto,
  // mul(g, gt(x, 0)), either operand order: relu's gradient, g where x > 0
  // and (g times) 0 elsewhere, in one pass without the mask. The step is
  // kMul {g, x}. Value for value what the pattern gives.
  kReluGradient,
};

struct UnitPlan {
  std::vector<Instruction> prologue;  // run once; every result kept as a constant
  std::vector<TensorId> constants;    // placeholders the prologue's results stay under
  std::vector<Instruction> body;      // run on every replay, frees included
  std::vector<Fusion> fusions;        // one per body instruction; empty: none fused
  size_t kernels_saved = 0;           // tensor instructions of the template that replays no longer run
};

// REQUIRES: `interface` is AnalyzeUnit(unit).
UnitPlan PlanUnit(const UnitTemplate& unit, const UnitInterface& interface);

}  // namespace gt::torch_backend
