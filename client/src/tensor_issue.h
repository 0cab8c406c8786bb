// How gt::Tensor's methods make instructions (tensor.cc): one instruction
// per call, handed to the session and recorded for autograd. Shared by the
// Tensor files of the client (tensor.cc, tensor_ops.cc, tensor_state.cc).
//
// Thread-safety: as gt::Tensor (the signal scope an instruction is issued in
// is the calling thread's).
#pragma once

#include <vector>

#include "gt/gt.h"
#include "session.h"
#include "tensor_impl.h"

namespace gt::client_internal {

// `t`'s record; InvalidArgument naming `what` for an undefined tensor.
const TensorRecord& Require(const Tensor& t, const char* what);

// Issues `inst` on `inputs` (in the innermost signal scope) and records it
// for autograd.
Tensor Issue(Instruction inst, const std::vector<Tensor>& inputs);

// Issue() for the common shapes of an instruction.
Tensor Unary(const Tensor& t, Op op);
Tensor Binary(const Tensor& a, const Tensor& b, Op op);
Tensor WithScalar(const Tensor& a, double s, Op op, ScalarSide side);
Tensor Reduce(const Tensor& t, Op op, std::vector<int64_t> axes, bool keepdims);
Tensor WithAxes(const Tensor& t, Op op, std::vector<int64_t> axes);

// In-place ops cannot be recorded: throws FailedPrecondition naming `what`
// when `t` requires grad under grad mode (or, with `source`, when the source
// does: its gradient would be lost).
void CheckInPlaceAllowed(const Tensor& t, const char* what);
void CheckInPlaceAllowed(const Tensor& t, const Tensor& source, const char* what);

// Sends the mutation `inst` of operands[0] and bumps its data version.
void Mutate(Instruction inst, const std::vector<const TensorRecord*>& operands);

}  // namespace gt::client_internal
