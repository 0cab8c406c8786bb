#include "tensor_table.h"

#include <string>
#include <utility>

#include "dtype_map.h"
#include "instruction_checks.h"

namespace gt::torch_backend {

void TensorTable::Insert(Namespace& tensors, TensorId id, at::Tensor tensor) {
  Retain(tensors, tensor);
  tensors.tensors_.emplace(id, std::move(tensor));
}

void TensorTable::Erase(Namespace& tensors, TensorId id) {
  auto found = tensors.tensors_.find(id);
  if (found == tensors.tensors_.end()) return;
  Release(found->second);
  tensors.tensors_.erase(found);
}

Status TensorTable::Free(const Instruction& inst) {
  auto ns = namespaces_.find(inst.client);
  Namespace none;
  auto& tensors = (ns == namespaces_.end() ? none : ns->second).tensors_;
  std::string unknown;
  for (TensorId id : inst.operands) {
    auto it = tensors.find(id);
    if (it == tensors.end()) {
      unknown += (unknown.empty() ? "" : ", ") + IdName(id);
      continue;
    }
    Release(it->second);
    tensors.erase(it);
  }
  // The known ids are freed either way; the error only reports the rest.
  if (unknown.empty()) return Status::Ok();
  return NotFound("unknown tensor " + unknown + " in " + inst.Describe());
}

void TensorTable::Drop(ClientId client) {
  auto ns = namespaces_.find(client);
  if (ns == namespaces_.end()) return;
  for (const auto& [id, tensor] : ns->second.tensors_) Release(tensor);
  namespaces_.erase(ns);
}

std::vector<HeldTensor> TensorTable::Held() const {
  std::vector<HeldTensor> held;
  for (const auto& [client, ns] : namespaces_)
    for (const auto& [id, tensor] : ns.tensors_) {
      std::optional<DType> dtype = FromScalarType(tensor.scalar_type());
      if (!dtype) continue;  // not a dtype the wire names: no client could have made it
      held.push_back({client, id, *dtype, Shape(tensor.sizes().begin(), tensor.sizes().end())});
    }
  return held;
}

void TensorTable::Retain(Namespace& tensors, const at::Tensor& tensor) {
  live_tensors_.fetch_add(1, std::memory_order_relaxed);
  StorageUse& use = storage_refs_[tensor.storage().unsafeGetStorageImpl()];
  if (use.refs++ > 0) return;
  use.owner = tensors.client_;
  tensors.bytes_ += tensor.storage().nbytes();
  resident_bytes_.fetch_add(tensor.storage().nbytes(), std::memory_order_relaxed);
}

void TensorTable::Release(const at::Tensor& tensor) {
  live_tensors_.fetch_sub(1, std::memory_order_relaxed);
  auto it = storage_refs_.find(tensor.storage().unsafeGetStorageImpl());
  if (it == storage_refs_.end() || --it->second.refs > 0) return;
  const uint64_t bytes = tensor.storage().nbytes();
  resident_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  // The owner is gone when a namespace dropped before another's view of its storage.
  if (auto owner = namespaces_.find(it->second.owner); owner != namespaces_.end())
    owner->second.bytes_ -= std::min(owner->second.bytes_, bytes);
  storage_refs_.erase(it);
}

}  // namespace gt::torch_backend
