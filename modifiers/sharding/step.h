// A step: the expansion of one client op into per-worker instructions, and
// the emitter that strategies write it with. Everything emitted is stamped
// with the op's client, seq and signal and its target worker; moves and
// collectives are one instruction per group member, naming the rendezvous;
// temporaries are freed where they live when the op ends; each collective
// is noted for explain.
//
// Thread-safety: none; a Step lives for one Process() call of its stage.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bookkeeping.h"
#include "gt/stage.h"
#include "placement.h"

namespace gt::sharding {

// The op being expanded: where emitted instructions go, temporaries to
// free at its end, and what explain prints. The pointers are borrowed.
struct Step {
  Client* client;
  const Instruction* inst;
  Emitter* out;
  Workers* workers;               // the live workers (for the client's default worker)
  const std::string* rendezvous;  // "host:port/store_key" of the store, named in every collective
  std::vector<std::pair<int, TensorId>> temporaries = {};  // (worker, id)
  std::vector<std::string> collectives = {};
};

// `ids` outlive the step: they are no longer temporaries.
void Keep(Step& s, const std::vector<TensorId>& ids);
// Emits one instruction for `worker` made from the op being expanded (its
// client, seq and, when `inst` names none, its signal).
void EmitOn(Step& s, int worker, Instruction inst);
// Frees the step's temporaries where they live.
void FreeTemporaries(Step& s);

// The op run on every member of `p` with member r's id as its only operand.
std::vector<TensorId> EachMember(Step& s, const Placement& p);
// Emits `op` with `attrs` on every member r of `p`, on operands(r); the
// results, one per member, are kept as temporaries when `temporary`.
std::vector<TensorId> PerMember(Step& s, const Placement& p, Op op, const Attributes& attrs,
                                const std::function<std::vector<TensorId>(size_t)>& operands, bool temporary);

// `t`'s constant (REQUIRES: t.constant) made on `worker` in `shape`, a temporary.
TensorId MakeConstant(Step& s, const Tensor& t, const Shape& shape, int worker);

// Collectives and moves (a constant tensor's copies and pieces are made
// where they are needed instead); the ids they return are temporaries of `s`
// (except AllReduce's: its caller decides).
// A copy of `t` on each of `workers` (t whole or replicated: a broadcast
// from its first worker; sharded: all-gathered first).
std::map<int, TensorId> Replicate(Step& s, const Tensor& t, const std::vector<int>& workers);
// Replicate's copies in the order of `workers`.
std::vector<TensorId> CopiesOn(Step& s, const Tensor& t, const std::vector<int>& workers);
// `t` whole on `worker` (its own id when it is whole there already).
TensorId WholeOn(Step& s, const Tensor& t, int worker);
// `t` split like `like` (same workers, axis `axis` of t, same sizes).
std::vector<TensorId> ShardLike(Step& s, const Tensor& t, int64_t axis, const Placement& like);
// Member r's `ids[r]` all-reduced over the members of `p` by `op` (0 sum,
// 1 max, 2 min); `meta`: each operand's shape and dtype.
// `origin`: the seq of the op that made the addends, when not s.inst's (a
// pending sum reduced for a later op).
std::vector<TensorId> AllReduce(Step& s, const Placement& p, const std::vector<TensorId>& ids, const TensorMeta& meta,
                                int op, uint64_t origin = 0);
// `t`, a pending sum (REQUIRES: t.placement.partial()), all-reduced into a
// copy on each of its workers: `t` says so afterwards (its record changes),
// and its addends are freed when the step ends.
void Materialize(Step& s, Tensor& t);
// Materialize for several pending sums at once (REQUIRES: each partial, not
// a view, all on the same workers in the same order, of one dtype): their
// addends flattened and concatenated, one all-reduce, then cut apart and
// cloned (so that no sum keeps the others' memory), as DDP buckets
// gradients. `origin`: the seq the record of collectives names.
void MaterializeTogether(Step& s, const std::vector<Tensor*>& bucket, uint64_t origin);
// `t`'s pending sum (REQUIRES: t.placement.partial()) split like `like`
// (its workers, in order; axis and sizes): member r keeps the sum's piece r.
// The ids are the caller's (not temporaries).
std::vector<TensorId> ReduceScatter(Step& s, const Tensor& t, const Placement& like);
// `t` moved onto the workers of `config` (whole: onto its first worker;
// sharded: cut on the config's axis, else replicated); nullopt when every
// worker of `t` is one of them already.
std::optional<Tensor> MoveInto(Step& s, const Tensor& t, const Config& config);

}  // namespace gt::sharding
