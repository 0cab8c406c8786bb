// The null backend: a worker backend that executes nothing.
//
// It keeps, per client, only each live tensor's shape and dtype (what
// gt's shape inference says the op would make), so that it can answer a
// fetch with zeros of the right shape and size, and forgets them on free
// and on a client's drop. Every op is "supported" and succeeds at once,
// except a use of a tensor it does not hold, or an op whose shapes do not
// fit (the errors a real backend would give too).
//
// What it is for: with nothing executed, a worker costs only its decoding
// and this table, so a cluster of null workers makes the dispatcher the
// bottleneck (bench/capacity_bench.cc measures one dispatcher's capacity
// with it). Its answers are zeros: never a result to read.
//
// Results whose shape gt does not infer from one instruction (run_unit,
// checkpoint_read) are recorded as float32 scalars; collectives record the
// shape the instruction states (attrs.shape), else their operand's, else a
// scalar (an all_gather's or reduce_scatter's piece is not worked out).
//
// Thread-safety: as every Backend, the worker's pipeline thread only.
#pragma once

#include <unordered_map>

#include "gt/backend.h"
#include "ir/shape_inference.h"

namespace gt::null_backend {

class NullBackend final : public Backend {
 public:
  Status Execute(const Instruction& inst, ReplySink& replies) override;
  bool Supports(Op) const override { return true; }
  BackendStats Stats() const override;

 private:
  using Table = std::unordered_map<TensorId, TensorMeta>;

  Status Fetch(const Table& table, const Instruction& inst, ReplySink& replies) const;
  Status Record(Table& table, const Instruction& inst);
  // The result's metadata as a real backend would make it.
  Result<TensorMeta> ResultMeta(const Table& table, const Instruction& inst) const;

  std::unordered_map<ClientId, Table> clients_;
  uint64_t live_ = 0;
};

}  // namespace gt::null_backend
