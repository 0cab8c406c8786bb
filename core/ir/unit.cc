// Encoding and analysis of compiled-unit templates (gt/unit.h).
#include "gt/unit.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "ir/codec.h"

namespace gt {

std::vector<TensorId> ConsumedOperands(const Instruction& run) {
  std::vector<TensorId> ids;
  for (int64_t index : run.attrs.axes) {
    if (index < 0 || static_cast<size_t>(index) >= run.operands.size()) continue;
    const TensorId id = run.operands[static_cast<size_t>(index)];
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

namespace {

// An optimizer step writes three tensors: units track one written operand.
// A redistribute is the sharding stage's to carry out, not a worker's.
bool AllowedInUnit(Op op) {
  if (ProducesTensor(op)) return op != Op::kFromBytes && op != Op::kRedistribute;
  return (KindOf(op) == OpKind::kMutate && op != Op::kAdamStep) || op == Op::kFree;
}

Status BodyError(size_t index, const Instruction& inst, const std::string& why) {
  return InvalidArgument("unit body instruction " + std::to_string(index) + " (" + inst.Describe() + "): " + why);
}

}  // namespace

BlobPtr EncodeUnit(const UnitTemplate& unit) {
  wire::Unit message;
  message.set_inputs(unit.inputs);
  std::vector<BlobPtr> payloads;  // a template has none (AnalyzeUnit refuses them)
  for (const Instruction& inst : unit.body) EncodeInstruction(inst, message.add_body(), &payloads);
  std::string bytes = message.SerializeAsString();
  return CopyToBlob(bytes.data(), bytes.size());
}

Result<UnitTemplate> DecodeUnit(const Blob& bytes) {
  wire::Unit message;
  if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return InvalidArgument("unit template of " + std::to_string(bytes.size()) + " bytes does not decode");
  UnitTemplate unit;
  unit.inputs = message.inputs();
  unit.body.reserve(static_cast<size_t>(message.body_size()));
  for (const wire::Instruction& w : message.body()) {
    Result<Instruction> inst = DecodeInstruction(w, {});
    if (!inst.ok()) return InvalidArgument("unit template: " + inst.status().message());
    unit.body.push_back(std::move(*inst));
  }
  return unit;
}

Result<UnitInterface> AnalyzeUnit(const UnitTemplate& unit) {
  // Inputs are numbered in order of first use, so there are no more of them
  // than operand references; the count comes from the wire, and hosts size
  // tables (a worker's graph inputs, its unit environment) by it.
  size_t references = 0;
  for (const Instruction& inst : unit.body) references += inst.operands.size();
  if (unit.inputs > references)
    return InvalidArgument("unit declares " + std::to_string(unit.inputs) + " inputs, but its body uses at most " +
                           std::to_string(references));
  UnitInterface out;
  out.inputs = unit.inputs;
  TensorId next = TensorId{unit.inputs} + 1;
  std::unordered_set<TensorId> freed;
  std::vector<TensorId> produced;
  for (size_t i = 0; i < unit.body.size(); ++i) {
    const Instruction& inst = unit.body[i];
    if (!AllowedInUnit(inst.op)) return BodyError(i, inst, "op not allowed in a unit");
    if (inst.payload) return BodyError(i, inst, "a unit carries no payloads");
    for (TensorId id : inst.operands) {
      if (id == 0 || id >= next) return BodyError(i, inst, "operand %" + std::to_string(id) + " is not defined yet");
      if (freed.count(id)) return BodyError(i, inst, "operand %" + std::to_string(id) + " was freed before");
    }
    if (inst.op == Op::kFree)
      for (TensorId id : inst.operands) freed.insert(id);
    const size_t want = ProducesTensor(inst.op) ? 1 : 0;
    if (inst.results.size() != want) return BodyError(i, inst, "expects " + std::to_string(want) + " result(s)");
    if (want) {
      if (inst.results[0] != next) return BodyError(i, inst, "result should be %" + std::to_string(next));
      produced.push_back(next++);
    }
  }
  out.produced = static_cast<uint32_t>(produced.size());
  for (TensorId id : produced)
    if (!freed.count(id)) out.outputs.push_back(id);
  // From the freed set, not by counting to `inputs`: that count comes from
  // the wire, and 4 billion of them kept a host busy for minutes.
  for (TensorId id : freed)
    if (id <= unit.inputs) out.consumed.push_back(static_cast<int64_t>(id - 1));
  std::sort(out.consumed.begin(), out.consumed.end());
  return out;
}

}  // namespace gt
