// The failed-tensor ledger: which of one client's tensor ids were never made
// because the op that should have made them failed.
//
// Ops run asynchronously, so a later op can name a result that was never
// made. Every host that can refuse or fail an op (the dispatcher's router,
// the sharding stage, a worker) keeps a ledger per client, so that such a
// use is refused naming the op that failed ("operand %5 does not exist
// because op #12 failed") instead of "unknown tensor %5", and so that a
// free of such an id is not an error.
//
// Thread-safety: none; owned by one host thread, like the client state it
// belongs to. The dispatcher also records here the tensors a client lost
// with a worker that died, so that a later use names that worker.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "gt/instruction.h"
#include "gt/status.h"

namespace gt {

class FailedTensors {
 public:
  // Remembers that `id` was never made because op `failed_seq` failed.
  void Record(TensorId id, uint64_t failed_seq) { failed_[id] = failed_seq; }
  // Record() unless `id` is recorded already (it keeps the op it names).
  void RecordIfAbsent(TensorId id, uint64_t failed_seq) { failed_.emplace(id, failed_seq); }
  // Remembers that `id` was lost with worker `worker`, which died.
  void RecordLost(TensorId id, std::string worker) { lost_[id] = std::move(worker); }
  // Record() for every result of `inst`.
  void RecordResults(const Instruction& inst, uint64_t failed_seq) {
    for (TensorId id : inst.results) Record(id, failed_seq);
  }
  // The seq of the op that failed to make `id`, if it did.
  std::optional<uint64_t> FailedOp(TensorId id) const {
    auto it = failed_.find(id);
    if (it == failed_.end()) return std::nullopt;
    return it->second;
  }
  bool Contains(TensorId id) const { return failed_.count(id) != 0 || lost_.count(id) != 0; }
  // Forgets `id` (the client freed it); true if it was recorded.
  bool Forget(TensorId id) { return (failed_.erase(id) + lost_.erase(id)) != 0; }
  void Clear() {
    failed_.clear();
    lost_.clear();
  }
  bool empty() const { return failed_.empty() && lost_.empty(); }

  // The first operand of `inst` that names a failed or lost tensor, with
  // the op that failed to make it or the worker it was lost with.
  struct Use {
    TensorId operand;
    uint64_t failed_seq;
    std::string lost_with;  // non-empty: lost with this worker (failed_seq unused)
  };
  std::optional<Use> FindFailedOperand(const Instruction& inst) const;
  // Why `id` does not exist, when it was recorded.
  std::optional<Use> Find(TensorId id) const;
  // FailedPrecondition naming `inst`, the operand and the op that failed.
  static Status UseError(const Instruction& inst, const Use& use);
  // FailedPrecondition naming `inst`, the operand and the op that failed;
  // OK when no operand of `inst` names a failed tensor.
  Status CheckOperands(const Instruction& inst) const;

 private:
  std::unordered_map<TensorId, uint64_t> failed_;  // tensor -> seq of the op that failed to make it
  std::unordered_map<TensorId, std::string> lost_;  // tensor -> the worker it died with
};

}  // namespace gt
