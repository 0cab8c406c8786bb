// Freed tensors kept for reuse: a bounded cache of CPU tensor storage, so
// that a result of the size and dtype of a tensor its client just freed is
// written into that tensor (an ATen *_out kernel) instead of a fresh one.
// In a pipelined loop (`x = x + y`, the old x freed after each add) this
// takes the allocation, and the free, of the data, the storage and the
// tensor object out of every op.
//
// What is kept: a tensor its client freed that nobody else holds (no view
// shares its storage, no fetch is still sending it), contiguous, filling
// its whole storage, made by ATen's CPU allocator (not a received payload).
// Each client has its own kept tensors: they count in its bytes held
// (max_client_mib, gt_worker_client_bytes_held), and are given back when
// that client would otherwise be refused, and when it leaves.
//
// Bounds: at most `max_bytes` kept in all (the torch backend option
// tensor_cache_mib; 0 keeps nothing), at most kKeptPerSize of one client's
// per dtype and size, kSizesPerClient sizes per client (the least recently
// used size goes first). A tensor offered past the byte bound is not kept.
//
// Thread-safety: the pipeline thread calls everything but bytes(), which
// any thread may read.
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include "gt/instruction.h"

namespace gt::torch_backend {

// The cache's metrics (null entries: not counted); plugin.cc declares them.
struct TensorCacheCounters {
  prometheus::Gauge* bytes = nullptr;          // held now
  prometheus::Counter* hits = nullptr;         // results written into a kept tensor
  prometheus::Counter* misses = nullptr;       // results with a size nothing was kept for
  prometheus::Counter* evicted_bytes = nullptr;  // given back (bounds, quota, a client leaving)
};

class TensorCache {
 public:
  static constexpr size_t kKeptPerSize = 4;
  static constexpr size_t kSizesPerClient = 32;

  explicit TensorCache(uint64_t max_bytes, TensorCacheCounters counters = {})
      : max_bytes_(max_bytes), counters_(counters) {}
  TensorCache(const TensorCache&) = delete;
  TensorCache& operator=(const TensorCache&) = delete;

  // Keeps `tensor`, just freed from `client`'s namespace, when it may be
  // reused (see above); else lets it go.
  void Offer(ClientId client, at::Tensor&& tensor);

  // A contiguous tensor of `dtype` and `sizes`, whose elements are
  // unspecified, made from one `client` freed; undefined when none was kept.
  // The caller must write every element before anybody reads it.
  at::Tensor Take(ClientId client, at::ScalarType dtype, at::IntArrayRef sizes);

  // Gives back everything kept for `client` (it left, or it needs the room).
  void Drop(ClientId client);

  // Bytes kept for `client`; all clients together.
  uint64_t BytesOf(ClientId client) const;
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  uint64_t max_bytes() const { return max_bytes_; }

 private:
  struct Size {
    at::ScalarType dtype = at::kFloat;
    size_t nbytes = 0;
    uint64_t last_use = 0;         // the client's use tick: least recent goes first
    std::vector<at::Tensor> kept;  // at most kKeptPerSize
  };
  struct Client {
    std::vector<Size> sizes;  // at most kSizesPerClient
    uint64_t bytes = 0;
    uint64_t tick = 0;
  };

  static bool Reusable(const at::Tensor& tensor);
  Client* Find(ClientId client);
  Size& SizeFor(Client& c, at::ScalarType dtype, size_t nbytes);
  void Forget(Client& c, Size& size);
  void Count(int64_t delta);

  const uint64_t max_bytes_;
  const TensorCacheCounters counters_;
  std::unordered_map<ClientId, Client> clients_;
  ClientId last_id_ = 0;  // one lookup per change of client
  Client* last_ = nullptr;
  std::atomic<uint64_t> bytes_{0};
};

}  // namespace gt::torch_backend
