#include "tensor_table.h"

#include <string>
#include <utility>

#include "instruction_checks.h"

namespace gt::torch_backend {

void TensorTable::Insert(Namespace& tensors, TensorId id, at::Tensor tensor) {
  Retain(tensor);
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

void TensorTable::Retain(const at::Tensor& tensor) {
  live_tensors_.fetch_add(1, std::memory_order_relaxed);
  const c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  if (storage_refs_[storage]++ == 0)
    resident_bytes_.fetch_add(tensor.storage().nbytes(), std::memory_order_relaxed);
}

void TensorTable::Release(const at::Tensor& tensor) {
  live_tensors_.fetch_sub(1, std::memory_order_relaxed);
  auto it = storage_refs_.find(tensor.storage().unsafeGetStorageImpl());
  if (it == storage_refs_.end() || --it->second > 0) return;
  resident_bytes_.fetch_sub(tensor.storage().nbytes(), std::memory_order_relaxed);
  storage_refs_.erase(it);
}

}  // namespace gt::torch_backend
