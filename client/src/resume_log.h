// What a client of a separate dispatcher keeps so that its session survives
// a dispatcher restart (docs/CLUSTER.md, "When the dispatcher restarts"): every batch
// it sent since its last answered sync (envelope and payload frames, as
// sent), the signal configs in force at that sync, the units its own compile
// stage defined, and its live tensors. A new dispatcher gets the session back
// from a RESUME built here, then the kept batches again, in order; workers
// drop what already ran by seq.
//
// The embedded default has nothing to survive (its dispatcher dies with the
// process) and keeps none of this: the session makes no ResumeLog there.
//
// Thread-safety: none; the session uses it under its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gt/instruction.h"
#include "ir/shape_inference.h"
#include "wire.pb.h"

namespace gt::client_internal {

struct KeptBatch {
  wire::Envelope envelope;
  std::vector<BlobPtr> frames;
};

class ResumeLog {
 public:
  // Batches kept past `limit_bytes` (payload bytes plus encoded
  // instructions) make the session unresumable rather than grow further.
  explicit ResumeLog(size_t limit_bytes) : limit_bytes_(limit_bytes) {}

  // A batch about to be sent (taken over; the caller sends `Last()`).
  void Keep(wire::Envelope&& batch, std::vector<BlobPtr>&& frames);
  const KeptBatch& Last() const { return kept_.back(); }
  const std::vector<KeptBatch>& Kept() const { return kept_; }

  // The sync with `sync_seq` / `sync_id` was answered: everything sent
  // before it ran on every worker, so nothing kept is needed any more.
  void Answered(uint64_t sync_seq, uint64_t sync_id);

  // The kConfigure the session sent for `signal`; nullopt: it forgot it.
  void Configured(const std::string& signal, std::optional<Instruction> configure);
  // An instruction the client's stages emitted; kDefineUnit ones are kept.
  void Emitted(const Instruction& inst);
  // A tensor handle made by the instruction with `seq`, and its end.
  void Made(TensorId id, const TensorMeta& meta, uint64_t seq) { live_[id] = {meta, seq}; }
  void Freed(TensorId id);
  // The instruction with `seq` failed: a tensor it was to make may exist on
  // no worker, though its handle lives on (RESUME lists it as kMayBeGone).
  void Failed(uint64_t seq);

  // Empty while resumable; else why not (kept bytes over the limit).
  const std::string& NotResumable() const { return not_resumable_; }
  size_t KeptBytes() const { return kept_bytes_; }
  size_t LiveTensors() const { return live_.size(); }

  // The RESUME for the session with heartbeat `token` (wire.proto): its
  // last answered sync, its live tensors, its configs in force and every
  // unit it defined (payloads in `frames`).
  wire::Envelope MakeResume(uint64_t token, std::vector<BlobPtr>* frames) const;

 private:
  struct Live {
    TensorMeta meta;
    uint64_t seq;
  };

  size_t limit_bytes_;
  std::vector<KeptBatch> kept_;
  size_t kept_bytes_ = 0;
  std::string not_resumable_;
  uint64_t answered_seq_ = 0;
  uint64_t answered_sync_ = 0;
  std::map<std::string, Instruction> configures_;  // by signal: the last configure sent
  std::vector<Instruction> units_;  // every kDefineUnit, in the order sent
  std::unordered_map<TensorId, Live> live_;
  // Freed since the last answered sync: their kFree may not have reached the
  // workers, and a replayed one must find them (RESUME lists them as
  // kMayBeGone: the new dispatcher takes them where a worker still holds
  // them, and misses none that is not).
  std::unordered_map<TensorId, Live> freeing_;
};

// The `seq` a RESUME gives a tensor the client freed since its last
// answered sync (restart-protocol.md).
inline constexpr uint64_t kMayBeGone = ~uint64_t{0};

}  // namespace gt::client_internal
