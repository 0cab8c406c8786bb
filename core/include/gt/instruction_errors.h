// How an error about one instruction is worded, for the hosts and every
// plugin alike: one line that starts with the instruction
// (Instruction::Describe(), "add #12 (%3, %4) -> %5"), then what is wrong.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "gt/instruction.h"
#include "gt/status.h"

namespace gt {

// InvalidArgument: "<inst.Describe()>: <why>".
inline Status Invalid(const Instruction& inst, std::string_view why) {
  return InvalidArgument(inst.Describe() + ": " + std::string(why));
}

// ResourceExhausted: a per-client quota refused `inst`, worded the same
// wherever the quota is kept (the dispatcher's limits, a backend's memory):
// "<inst.Describe()>: client <inst.client> <state>, <limit>: <remedy>", e.g.
// state "would hold 12 tensors on the workers", limit "over its limit
// (limits.max_live_tensors = 10)", remedy "free some first".
// REQUIRES: inst.client is the client the quota counts.
inline Status QuotaRefusal(const Instruction& inst, std::string_view state, std::string_view limit,
                           std::string_view remedy) {
  return ResourceExhausted(inst.Describe() + ": client " + std::to_string(inst.client) + " " + std::string(state) +
                           ", " + std::string(limit) + ": " + std::string(remedy));
}

}  // namespace gt
