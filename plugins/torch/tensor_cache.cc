#include "tensor_cache.h"

#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <utility>

namespace gt::torch_backend {

// Only a tensor nobody else can see may be written again: its object and
// its storage each held by this one reference (a fetch still sending it, or
// a view, holds another), all of its storage its own elements, from ATen's
// CPU allocator (a received payload's storage is the message's).
bool TensorCache::Reusable(const at::Tensor& t) {
  if (!t.defined() || t.use_count() != 1 || t.layout() != at::kStrided || !t.is_cpu()) return false;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->is_wrapped_number() || t.requires_grad() || t.has_names() || t.is_conj() || t.is_neg()) return false;
  const c10::Storage& storage = t.storage();
  return storage.use_count() == 1 && storage.resizable() && storage.allocator() == c10::GetCPUAllocator() &&
         t.storage_offset() == 0 && t.is_contiguous() && t.nbytes() == storage.nbytes() && t.nbytes() > 0;
}

TensorCache::Client* TensorCache::Find(ClientId client) {
  if (last_ != nullptr && last_id_ == client) return last_;
  auto it = clients_.find(client);
  if (it == clients_.end()) return nullptr;
  last_id_ = client;
  last_ = &it->second;
  return last_;
}

void TensorCache::Count(int64_t delta) {
  const uint64_t now = bytes_.load(std::memory_order_relaxed) + static_cast<uint64_t>(delta);
  bytes_.store(now, std::memory_order_relaxed);  // one writer: the pipeline thread
  if (counters_.bytes) counters_.bytes->Set(static_cast<double>(now));
}

TensorCache::Size& TensorCache::SizeFor(Client& c, at::ScalarType dtype, size_t nbytes) {
  for (Size& size : c.sizes)
    if (size.nbytes == nbytes && size.dtype == dtype) return size;
  if (c.sizes.size() >= kSizesPerClient) {
    auto oldest = std::min_element(c.sizes.begin(), c.sizes.end(),
                                   [](const Size& a, const Size& b) { return a.last_use < b.last_use; });
    Forget(c, *oldest);
    c.sizes.erase(oldest);
  }
  c.sizes.push_back(Size{dtype, nbytes, c.tick, {}});
  return c.sizes.back();
}

void TensorCache::Forget(Client& c, Size& size) {
  const uint64_t freed = size.nbytes * size.kept.size();
  size.kept.clear();
  c.bytes -= freed;
  if (freed == 0) return;
  Count(-static_cast<int64_t>(freed));
  if (counters_.evicted_bytes) counters_.evicted_bytes->Increment(static_cast<double>(freed));
}

void TensorCache::Offer(ClientId client, at::Tensor&& tensor) {
  if (max_bytes_ == 0 || !Reusable(tensor)) return;
  const size_t nbytes = tensor.nbytes();
  if (bytes() + nbytes > max_bytes_) return;
  Client* c = Find(client);
  if (c == nullptr) c = &clients_[client];
  Size& size = SizeFor(*c, tensor.scalar_type(), nbytes);
  size.last_use = ++c->tick;
  if (size.kept.size() >= kKeptPerSize) return;
  size.kept.push_back(std::move(tensor));
  c->bytes += nbytes;
  Count(static_cast<int64_t>(nbytes));
}

at::Tensor TensorCache::Take(ClientId client, at::ScalarType dtype, at::IntArrayRef sizes) {
  if (max_bytes_ == 0) return at::Tensor();
  Client* c = Find(client);
  const size_t nbytes = static_cast<size_t>(c10::multiply_integers(sizes)) * c10::elementSize(dtype);
  if (c != nullptr && nbytes > 0) {
    for (Size& size : c->sizes) {
      if (size.nbytes != nbytes || size.dtype != dtype || size.kept.empty()) continue;
      at::Tensor t = std::move(size.kept.back());
      size.kept.pop_back();
      size.last_use = ++c->tick;
      c->bytes -= nbytes;
      Count(-static_cast<int64_t>(nbytes));
      if (!t.sizes().equals(sizes)) t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
      if (counters_.hits) counters_.hits->Increment();
      return t;
    }
  }
  if (counters_.misses) counters_.misses->Increment();
  return at::Tensor();
}

void TensorCache::Drop(ClientId client) {
  auto it = clients_.find(client);
  if (it == clients_.end()) return;
  for (Size& size : it->second.sizes) Forget(it->second, size);
  clients_.erase(it);
  last_ = nullptr;
}

uint64_t TensorCache::BytesOf(ClientId client) const {
  auto it = clients_.find(client);
  return it == clients_.end() ? 0 : it->second.bytes;
}

}  // namespace gt::torch_backend
