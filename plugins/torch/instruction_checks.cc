#include "instruction_checks.h"

#include <cstddef>
#include <cstdint>

#include "dtype_map.h"

namespace gt::torch_backend {

namespace {
std::string SeqSuffix(const Instruction& inst) { return " (seq #" + std::to_string(inst.seq) + ")"; }
}  // namespace

// Runs for every instruction: the error text is built only when one fails.
Status CheckEnums(const Instruction& inst) {
  if (static_cast<size_t>(inst.op) >= static_cast<size_t>(Op::kCount))
    return InvalidArgument("op " + std::to_string(static_cast<int>(inst.op)) + " is not a gt op" + SeqSuffix(inst));
  if (KindOf(inst.op) == OpKind::kCreate && !IsValid(inst.attrs.dtype))
    return InvalidArgument("dtype " + std::to_string(static_cast<int>(inst.attrs.dtype)) +
                           " is not a gt dtype" + SeqSuffix(inst));
  if (static_cast<uint8_t>(inst.attrs.scalar_side) > static_cast<uint8_t>(ScalarSide::kLeft))
    return InvalidArgument("scalar_side " + std::to_string(static_cast<int>(inst.attrs.scalar_side)) +
                           " is not a ScalarSide" + SeqSuffix(inst));
  return Status::Ok();
}

Status LibraryError(const Instruction& inst, std::string_view what) {
  return Invalid(inst, what.substr(0, what.find('\n')));
}

std::string IdName(TensorId id) { return "%" + std::to_string(id); }

Status UnknownTensor(const Instruction& inst, TensorId id) {
  return NotFound("unknown tensor " + IdName(id) + " in " + inst.Describe());
}

}  // namespace gt::torch_backend
