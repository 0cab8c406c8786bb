#include "allocation_bound.h"

#include <algorithm>
#include <unordered_map>

#include "dtype_map.h"
#include "ir/shape_inference.h"

namespace gt::torch_backend {
namespace {

std::optional<TensorMeta> MetaOf(const at::Tensor& t) {
  std::optional<DType> dtype = FromScalarType(t.scalar_type());
  if (!dtype) return std::nullopt;
  return TensorMeta{Shape(t.sizes().begin(), t.sizes().end()), *dtype};
}

double Bytes(const TensorMeta& meta) {
  double elements = 1;  // in double: a hostile shape must not wrap to a small number
  for (int64_t d : meta.shape) elements *= static_cast<double>(std::max<int64_t>(d, 0));
  return elements * static_cast<double>(ElementSize(meta.dtype));
}

bool MayOutgrowOperands(const Instruction& inst) { return HasOpFlag(inst.op, kGrows); }

// The common elementwise case, without inferring: equal shapes, no broadcast.
bool SameShapes(const Instruction& inst, const TensorSource& operands) {
  if (KindOf(inst.op) != OpKind::kBinary || inst.operands.size() != 2) return false;
  const at::Tensor* a = operands.Find(inst.operands[0]);
  const at::Tensor* b = operands.Find(inst.operands[1]);
  return a && b && a->sizes() == b->sizes();
}

}  // namespace

Result<std::optional<double>> GrowingResultBytes(const Instruction& inst, const TensorSource& operands) {
  if (!MayOutgrowOperands(inst) || SameShapes(inst, operands)) return std::optional<double>();
  std::vector<TensorMeta> metas;
  metas.reserve(inst.operands.size());
  for (TensorId id : inst.operands) {
    const at::Tensor* t = operands.Find(id);
    std::optional<TensorMeta> meta = t ? MetaOf(*t) : std::nullopt;
    if (!meta) return std::optional<double>();  // the kernel names the missing operand
    metas.push_back(std::move(*meta));
  }
  std::vector<const TensorMeta*> pointers;
  for (const TensorMeta& m : metas) pointers.push_back(&m);
  Result<TensorMeta> result = InferResult(inst, pointers);
  if (!result.ok()) return result.status();
  return std::optional<double>(Bytes(*result));
}

Result<std::optional<double>> UnitPeakBytes(const UnitTemplate& unit, const std::vector<at::Tensor>& inputs) {
  // A unit refused before it runs would leave its collectives' other
  // members waiting for this one: such a unit is checked after it ran.
  for (const Instruction& body : unit.body)
    if (KindOf(body.op) == OpKind::kCollective) return std::optional<double>();
  std::unordered_map<TensorId, TensorMeta> metas;  // placeholder -> its metadata
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::optional<TensorMeta> meta = MetaOf(inputs[i]);
    if (!meta) return InvalidArgument("input " + std::to_string(i + 1) + " has a dtype gt cannot express");
    metas[static_cast<TensorId>(i + 1)] = std::move(*meta);
  }
  std::unordered_map<TensorId, double> made;  // the body's own live tensors -> bytes
  double live = 0, peak = 0;
  for (size_t i = 0; i < unit.body.size(); ++i) {
    const Instruction& body = unit.body[i];
    if (body.op == Op::kFree) {
      for (TensorId id : body.operands) {
        auto it = made.find(id);
        if (it == made.end()) continue;  // an input: the client's table still holds it
        live -= it->second;
        made.erase(it);
      }
      continue;
    }
    if (!ProducesTensor(body.op) || body.results.size() != 1) continue;
    std::vector<const TensorMeta*> operands;
    for (TensorId id : body.operands) {
      auto it = metas.find(id);
      if (it == metas.end()) return InvalidArgument("body instruction " + std::to_string(i) + " names no tensor " +
                                                    std::to_string(id));
      operands.push_back(&it->second);
    }
    Result<TensorMeta> result = InferResult(body, operands);
    if (!result.ok())
      return Status(result.status().code(), "body instruction " + std::to_string(i) + ": " + result.status().message());
    const double bytes = Bytes(*result);
    made[body.results[0]] = bytes;
    metas[body.results[0]] = std::move(*result);
    live += bytes;
    peak = std::max(peak, live);
  }
  return std::optional<double>(peak);
}

}  // namespace gt::torch_backend
