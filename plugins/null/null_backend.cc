#include "null_backend.h"

#include <memory>
#include <string>
#include <vector>

namespace gt::null_backend {
namespace {

// Zeroed bytes of one fetch's answer.
class ZeroBlob final : public Blob {
 public:
  explicit ZeroBlob(size_t size) : bytes_(std::make_unique<std::byte[]>(size)), size_(size) {}
  const std::byte* data() const override { return bytes_.get(); }
  size_t size() const override { return size_; }

 private:
  std::unique_ptr<std::byte[]> bytes_;  // value-initialized: zeros
  size_t size_;
};

Status Unknown(const Instruction& inst, TensorId id) {
  return NotFound(inst.Describe() + ": tensor %" + std::to_string(id) + " is not on this (null) worker");
}

}  // namespace

Status NullBackend::Execute(const Instruction& inst, ReplySink& replies) {
  if (inst.op == Op::kDropClient) {
    if (auto it = clients_.find(inst.client); it != clients_.end()) {
      live_ -= it->second.size();
      clients_.erase(it);
    }
    return Status::Ok();
  }
  Table& table = clients_[inst.client];
  switch (inst.op) {
    case Op::kFree:
      for (TensorId id : inst.operands) live_ -= table.erase(id);
      return Status::Ok();
    case Op::kFetch:
      return Fetch(table, inst, replies);
    default:
      return Record(table, inst);
  }
}

BackendStats NullBackend::Stats() const { return BackendStats{live_, 0}; }

Status NullBackend::Fetch(const Table& table, const Instruction& inst, ReplySink& replies) const {
  if (inst.operands.size() != 1) return InvalidArgument(inst.Describe() + ": a fetch takes one operand");
  auto it = table.find(inst.operands[0]);
  if (it == table.end()) return Unknown(inst, inst.operands[0]);
  const TensorMeta& meta = it->second;
  const size_t bytes = static_cast<size_t>(NumElements(meta.shape)) * ElementSize(meta.dtype);
  replies.SendData(inst, meta.dtype, meta.shape, std::make_shared<ZeroBlob>(bytes));
  return Status::Ok();
}

// Every result of `inst` enters the table (an op without results, a mutation
// or a marker, changes nothing).
Status NullBackend::Record(Table& table, const Instruction& inst) {
  if (inst.results.empty()) return Status::Ok();
  Result<TensorMeta> meta = ResultMeta(table, inst);
  if (!meta.ok()) return meta.status();
  for (TensorId id : inst.results) live_ += table.insert_or_assign(id, *meta).second;
  return Status::Ok();
}

Result<TensorMeta> NullBackend::ResultMeta(const Table& table, const Instruction& inst) const {
  if (KindOf(inst.op) == OpKind::kCollective) {
    if (!inst.attrs.shape.empty()) return TensorMeta{inst.attrs.shape, inst.attrs.dtype};
    auto it = inst.operands.empty() ? table.end() : table.find(inst.operands[0]);
    return it != table.end() ? it->second : TensorMeta{{}, DType::kFloat32};  // all_reduce: its operand's
  }
  if (!ProducesTensor(inst.op)) return TensorMeta{{}, DType::kFloat32};
  std::vector<const TensorMeta*> operands;
  operands.reserve(inst.operands.size());
  for (TensorId id : inst.operands) {
    auto it = table.find(id);
    if (it == table.end()) return Unknown(inst, id);
    operands.push_back(&it->second);
  }
  return InferResult(inst, operands);
}

}  // namespace gt::null_backend
