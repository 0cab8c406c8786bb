// Worker-to-worker collectives of the torch backend: Gloo process groups
// from LibTorch's c10d, one per (rendezvous store, membership generation,
// member list), created the first time a collective names that group. A
// newer generation (a worker lost or joined since) drops the older groups:
// a replacement worker under a lost one's index meets the others anew.
//
// The dispatcher's sharding modifier hosts the rendezvous store (reached
// through RendezvousStore, rendezvous_store.h) and names it in every
// collective instruction (see
// gt/op.h, "Collectives"); each member connects to it, the Gloo pairs are
// set up worker to worker, and tensor bytes then flow only between workers.
//
// Blocking: a collective returns when every member has taken part. Members
// execute a group's collectives in one order because the dispatcher emits
// them together. A member whose operand failed to be made still takes part
// with a stand-in (StandIn), so only a member that died makes the others
// fail: at once when its connections close, or, while the group forms or a
// collective waits (for the dead member, or for a survivor that gave up on
// it), within 100 ms of the dispatcher marking it lost in the store
// (LostMemberKey), which breaks the group for good. A member that hangs
// (SIGSTOP, a frozen machine) stops heartbeating, so the dispatcher marks it
// lost after its `heartbeat_timeout_ms` (5 s by default) and the others give
// up then; once resumed, it finds its own mark and gives up too, at once,
// rather than wait `timeout_ms` for peers that left. Only a member whose
// heartbeats go on while its collectives never come (a backend that
// deadlocked) holds the others for `timeout_ms`. Gloo in LibTorch 1.13 has
// no abort for a collective in progress (c10d::Work::abort is for send and
// receive only), so each wait is a timed Work::wait in 100 ms slices with
// the store looked at between them (Await).
//
// Thread-safety: none; the worker's pipeline thread calls everything.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "gt/op_attrs.h"
#include "gt/instruction.h"
#include "gt/status.h"

namespace prometheus {
class Counter;
}
namespace c10d {
class Work;
}

namespace gt::torch_backend {

struct CollectiveOptions {
  // The address this worker's Gloo endpoint binds and announces; peers must
  // be able to reach it (the plugin's option, else StageContext::peer_host).
  std::string host;
  // Where a rendezvous announced on a wildcard address ("0.0.0.0:P", a
  // dispatcher listening on every interface) is reached: the dispatcher's host.
  std::string dispatcher_host;
  // How long a member waits for the others (rendezvous and each collective).
  std::chrono::milliseconds timeout;
};

// Per kind of collective (broadcast, all_reduce, all_gather): how many ran and
// the tensor bytes this worker contributed. Owned by the plugin's registry.
struct CollectiveCounters {
  std::array<prometheus::Counter*, 4> calls{};
  std::array<prometheus::Counter*, 4> bytes{};
};

class Collectives {
 public:
  Collectives(CollectiveOptions options, CollectiveCounters counters);
  ~Collectives();

  // REQUIRES: KindOf(inst.op) == OpKind::kCollective. `operand` is the local
  // tensor (none for a non-root member of a broadcast, which makes its
  // result with `dtype`). Returns the result; errors name the instruction.
  Result<at::Tensor> Run(const Instruction& inst, const at::Tensor* operand, at::ScalarType dtype);

  // Takes part in `inst` for a member whose operand is missing (`why`: the
  // op that should have made it failed, or the id is unknown here), so the
  // other members finish now instead of waiting for the timeout. The stand-in
  // has the shape the dispatcher announced (attrs.shape) and holds NaN (0 for
  // an integer dtype), so what the others compute from it is visibly wrong
  // rather than plausible; the client learns of the failure from `why`,
  // which is returned (with the collective named) whether or not taking part
  // worked.
  Status StandIn(const Instruction& inst, at::ScalarType dtype, const Status& why);

 private:
  struct Group;
  Result<Group*> GroupOf(const Instruction& inst, const CollectiveSpec& spec);
  void ForgetOlderGenerations(const std::string& rendezvous, uint64_t generation);
  Result<at::Tensor> Broadcast(const CollectiveSpec& spec, Group& group, const at::Tensor* operand,
                               const Instruction& inst, at::ScalarType dtype);
  Result<at::Tensor> AllReduce(const CollectiveSpec& spec, Group& group, const at::Tensor& operand);
  Result<at::Tensor> AllGather(const CollectiveSpec& spec, Group& group, const at::Tensor& operand, const Instruction& inst);
  // Gloo's c10d group in LibTorch 1.13 has no reduce_scatter: an all-to-all
  // of the pieces (member r receives everyone's piece r), summed locally.
  Result<at::Tensor> ReduceScatter(const CollectiveSpec& spec, Group& group, const at::Tensor& operand,
                                   const Instruction& inst);
  // Waits for a collective of `group` to finish; Unavailable, and the group
  // broken for good, when the dispatcher marks a member lost meanwhile.
  Status Await(Group& group, const c10::intrusive_ptr<c10d::Work>& work);

  CollectiveOptions options_;
  CollectiveCounters counters_;
  std::map<std::string, std::unique_ptr<Group>> groups_;  // by rendezvous, generation and member list
};

}  // namespace gt::torch_backend
