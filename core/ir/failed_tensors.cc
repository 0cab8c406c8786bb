#include "gt/failed_tensors.h"

#include <string>

namespace gt {

std::optional<FailedTensors::Use> FailedTensors::FindFailedOperand(const Instruction& inst) const {
  if (empty()) return std::nullopt;  // the common case: nothing ever failed
  for (TensorId id : inst.operands)
    if (std::optional<Use> use = Find(id)) return use;
  return std::nullopt;
}

std::optional<FailedTensors::Use> FailedTensors::Find(TensorId id) const {
  if (auto it = failed_.find(id); it != failed_.end()) return Use{id, it->second, {}};
  if (auto it = lost_.find(id); it != lost_.end()) return Use{id, 0, it->second};
  return std::nullopt;
}

Status FailedTensors::UseError(const Instruction& inst, const Use& use) {
  if (!use.lost_with.empty())
    return Unavailable(inst.Describe() + ": operand %" + std::to_string(use.operand) + " was lost with worker " +
                       use.lost_with + ", which died");
  return FailedPrecondition(inst.Describe() + ": operand %" + std::to_string(use.operand) +
                            " does not exist because op #" + std::to_string(use.failed_seq) + " failed");
}

Status FailedTensors::CheckOperands(const Instruction& inst) const {
  std::optional<Use> use = FindFailedOperand(inst);
  return use ? UseError(inst, *use) : Status::Ok();
}

}  // namespace gt
