// The torch backend's tensor storage: one namespace per client
// (Instruction::client), each mapping TensorId to an at::Tensor, and the
// counts that Backend::Stats() reports.
//
// A stored tensor may share its storage with others (a view made by
// reshape/transpose/..., or a tensor wrapping a received payload), and
// mutations (kCopyInto, kMulInto, ...) write a stored tensor in place, which every tensor
// sharing its storage then sees, as in PyTorch. Resident bytes count each
// distinct storage once, so a view adds no bytes.
//
// Storing and freeing allocate nothing once the maps have grown (FlatMap):
// a pipelined loop stores one tensor and frees one per op. A freed tensor
// goes to the table's TensorCache, if it has one, which may keep its
// storage for a later result (tensor_cache.h).
//
// Thread-safety: everything but Stats() is called from one thread at a time
// (the worker's pipeline thread); Stats() may be called from any thread.
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "flat_map.h"
#include "gt/backend.h"
#include "gt/instruction.h"
#include "gt/status.h"
#include "tensor_cache.h"

namespace gt::torch_backend {

class TensorTable {
 public:
  // One client's tensors. Read through Find(); changed only through the
  // table, which keeps the counts.
  class Namespace {
   public:
    // The tensor `id`, or null. The pointer is valid until this namespace
    // next changes (an Insert or Erase may move its entries).
    const at::Tensor* Find(TensorId id) const {
      const at::Tensor* t = tensors_.Find(id);
      return t != nullptr && t->defined() ? t : nullptr;
    }
    // Bytes of the storages this client's tensors brought in (a storage
    // counts for the namespace that stored it first: a view adds nothing).
    uint64_t bytes() const { return bytes_; }

   private:
    friend class TensorTable;
    ClientId client_ = 0;
    FlatMap<at::Tensor> tensors_;
    uint64_t bytes_ = 0;
  };

  // `cache`, when not null, is offered every tensor a kFree releases.
  // REQUIRES: `cache` outlives this table.
  explicit TensorTable(TensorCache* cache = nullptr) : cache_(cache) {}
  TensorTable(const TensorTable&) = delete;
  TensorTable& operator=(const TensorTable&) = delete;

  // `client`'s namespace, or null when it holds none. The pointer stays
  // valid until Drop(client) (namespaces are never moved).
  const Namespace* Find(ClientId client) const {
    auto it = namespaces_.find(client);
    return it == namespaces_.end() ? nullptr : &it->second;
  }
  // `client`'s namespace, made empty when absent. Valid until Drop(client).
  Namespace& Open(ClientId client) {
    Namespace& ns = namespaces_[client];
    ns.client_ = client;
    return ns;
  }

  // Stores `tensor` under `id`.
  // REQUIRES: `tensors` is this table's; `id` is not in it; tensor.defined().
  void Insert(Namespace& tensors, TensorId id, at::Tensor tensor);
  // Forgets `id`; nothing happens when it is absent.
  void Erase(Namespace& tensors, TensorId id);

  // kFree: forgets every operand of `inst` in `inst.client`'s namespace.
  // NotFound naming the ids that were not there (the others are still freed).
  Status Free(const Instruction& inst);
  // Forgets `client`'s whole namespace (kDropClient); nothing if it has none.
  void Drop(ClientId client);

  // Every stored tensor of every namespace (Backend::Held).
  std::vector<HeldTensor> Held() const;

  // Tensors stored over all namespaces, and the bytes of the distinct
  // storages they use.
  BackendStats Stats() const {
    return {live_tensors_.load(std::memory_order_relaxed), resident_bytes_.load(std::memory_order_relaxed)};
  }

 private:
  // Called exactly once per tensor entering or leaving a namespace.
  void Retain(Namespace& tensors, const at::Tensor& tensor);
  void Release(const at::Tensor& tensor);

  struct StorageUse {
    int64_t refs = 0;
    ClientId owner = 0;  // whose namespace's bytes it counts in
  };
  static uint64_t StorageKey(const at::Tensor& t) {
    return reinterpret_cast<uintptr_t>(t.storage().unsafeGetStorageImpl());
  }

  TensorCache* const cache_;
  std::unordered_map<ClientId, Namespace> namespaces_;
  // How many stored tensors use each storage (by its StorageImpl's address);
  // its bytes count while > 0.
  FlatMap<StorageUse> storage_refs_;
  // Atomic only so that Stats() may read them from another thread.
  std::atomic<uint64_t> live_tensors_{0};
  std::atomic<uint64_t> resident_bytes_{0};
};

}  // namespace gt::torch_backend
