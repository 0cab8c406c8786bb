// How the torch backend checks an instruction before anything looks at it,
// and how its error messages are worded (one line, naming the instruction;
// Invalid() is gt/instruction_errors.h's, shared with the hosts).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "gt/instruction.h"
#include "gt/instruction_errors.h"
#include "gt/status.h"

namespace gt::torch_backend {

// OK when the fields that Describe() and KindOf() index tables with (op,
// a creation op's dtype, scalar_side) are inside their enums; a malformed
// value would make them throw, so this runs before anything else reads `inst`.
// InvalidArgument naming the field and the instruction's seq otherwise.
Status CheckEnums(const Instruction& inst);

// A library exception as InvalidArgument naming `inst`. LibTorch messages run
// to many lines (context, hints); the first says what went wrong, and error
// replies are one line, so only that one is kept.
Status LibraryError(const Instruction& inst, std::string_view what);

// "%<id>", as ids are written in error messages.
std::string IdName(TensorId id);

// NotFound: "unknown tensor %<id> in <inst.Describe()>", for an operand that
// is not where it is looked up.
Status UnknownTensor(const Instruction& inst, TensorId id);

}  // namespace gt::torch_backend
