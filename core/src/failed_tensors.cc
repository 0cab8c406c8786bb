#include "gt/failed_tensors.h"

#include <string>

namespace gt {

std::optional<FailedTensors::Use> FailedTensors::FindFailedOperand(const Instruction& inst) const {
  if (failed_.empty()) return std::nullopt;  // the common case: nothing ever failed
  for (TensorId id : inst.operands)
    if (auto it = failed_.find(id); it != failed_.end()) return Use{id, it->second};
  return std::nullopt;
}

Status FailedTensors::UseError(const Instruction& inst, const Use& use) {
  return FailedPrecondition(inst.Describe() + ": operand %" + std::to_string(use.operand) +
                            " does not exist because op #" + std::to_string(use.failed_seq) + " failed");
}

Status FailedTensors::CheckOperands(const Instruction& inst) const {
  std::optional<Use> use = FindFailedOperand(inst);
  return use ? UseError(inst, *use) : Status::Ok();
}

}  // namespace gt
