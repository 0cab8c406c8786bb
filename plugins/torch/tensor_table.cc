#include "tensor_table.h"

#include <algorithm>
#include <string>
#include <utility>

#include "dtype_map.h"
#include "instruction_checks.h"

namespace gt::torch_backend {

void TensorTable::Insert(Namespace& tensors, TensorId id, at::Tensor tensor) {
  Retain(tensors, tensor);
  tensors.tensors_.Open(id) = std::move(tensor);
}

void TensorTable::Erase(Namespace& tensors, TensorId id) {
  at::Tensor gone = tensors.tensors_.Take(id);
  if (gone.defined()) Release(gone);
}

Status TensorTable::Free(const Instruction& inst) {
  auto ns = namespaces_.find(inst.client);
  std::string unknown;
  for (TensorId id : inst.operands) {
    at::Tensor gone = ns == namespaces_.end() ? at::Tensor() : ns->second.tensors_.Take(id);
    if (!gone.defined()) {
      unknown += (unknown.empty() ? "" : ", ") + IdName(id);
      continue;
    }
    Release(gone);
    if (cache_) cache_->Offer(inst.client, std::move(gone));
  }
  // The known ids are freed either way; the error only reports the rest.
  if (unknown.empty()) return Status::Ok();
  return NotFound("unknown tensor " + unknown + " in " + inst.Describe());
}

void TensorTable::Drop(ClientId client) {
  auto ns = namespaces_.find(client);
  if (ns == namespaces_.end()) return;
  ns->second.tensors_.ForEach([this](uint64_t, const at::Tensor& tensor) { Release(tensor); });
  namespaces_.erase(ns);
}

std::vector<HeldTensor> TensorTable::Held() const {
  std::vector<HeldTensor> held;
  for (const auto& [client, ns] : namespaces_)
    ns.tensors_.ForEach([&held, client = client](uint64_t id, const at::Tensor& tensor) {
      std::optional<DType> dtype = FromScalarType(tensor.scalar_type());
      if (!dtype) return;  // not a dtype the wire names: no client could have made it
      held.push_back(HeldTensor{client, id, *dtype, Shape(tensor.sizes().begin(), tensor.sizes().end())});
    });
  return held;
}

void TensorTable::Retain(Namespace& tensors, const at::Tensor& tensor) {
  live_tensors_.fetch_add(1, std::memory_order_relaxed);
  StorageUse& use = storage_refs_.Open(StorageKey(tensor));
  if (use.refs++ > 0) return;
  use.owner = tensors.client_;
  tensors.bytes_ += tensor.storage().nbytes();
  resident_bytes_.fetch_add(tensor.storage().nbytes(), std::memory_order_relaxed);
}

void TensorTable::Release(const at::Tensor& tensor) {
  live_tensors_.fetch_sub(1, std::memory_order_relaxed);
  const uint64_t key = StorageKey(tensor);
  StorageUse* use = storage_refs_.Find(key);
  if (use == nullptr || --use->refs > 0) return;
  const uint64_t bytes = tensor.storage().nbytes();
  resident_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  // The owner is gone when a namespace dropped before another's view of its storage.
  if (auto owner = namespaces_.find(use->owner); owner != namespaces_.end())
    owner->second.bytes_ -= std::min(owner->second.bytes_, bytes);
  storage_refs_.Take(key);
}

}  // namespace gt::torch_backend
