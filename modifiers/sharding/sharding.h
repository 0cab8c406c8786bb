// The sharding modifier: a dispatcher stage that turns a client's logical
// instruction stream into per-worker instructions and worker-to-worker
// collectives, following the client's signal configs (gt/config.h).
//
// Every tensor of a client has a placement (placement.h): whole on one
// worker, sharded on an axis over a worker list (torch.chunk sizes), or
// replicated over a worker list. Creation inside a scope with a config
// makes the shards on their workers directly; every other op takes its
// output placement and the collective it needs from its inputs':
//
//   elementwise, matching shards          shard-local
//   elementwise with a smaller operand    the operand broadcast to the shards' workers
//   A row-sharded @ B                     B replicated, shard-local (no communication)
//   A row-sharded @ B sharded             all-gather B, then shard-local
//   A inner-sharded @ B row-sharded       partial products, all-reduce (sum)
//   A @ B column-sharded                  A replicated, shard-local
//   reduction over the sharded axis       local partial, all-reduce (mean weighted by count)
//   reduction over other axes             shard-local
//   transpose of a sharded tensor         shard-local, the sharded axis follows the swap
//   unsqueeze, permute, squeeze of        shard-local, the sharded axis renumbered
//     another dim
//   reshape of a tensor sharded on axis 0 shard-local when each shard's rows stay whole
//     (merging or splitting leading dims)   rows of the new first dim (sizes rescaled)
//   reshape keeping the dims up to the    shard-local
//     sharded one
//   movement of a replicated tensor       on every replica
//   op in a scope whose config names      operands living elsewhere moved onto them first
//     workers                             (sharded: cut on the config's axis; whole: to its
//                                         first worker; replicated: copied)
//   softmax / log_softmax, slice, select  shard-local (select drops a dim: the sharded
//     along an unsharded axis               axis shifts when the dropped one was before it)
//   select along the sharded axis         on the one shard holding the index: whole there
//   slice along the sharded axis          each shard slices its part of the range; sharded
//                                         over the shards holding any (whole if one)
//   softmax / log_softmax along the       local max, all-reduce (max), exp, local sum,
//     sharded axis                        all-reduce (sum), divide: stays sharded
//   cat along an unsharded axis of        shard-local
//     identically sharded operands
//   fetch of a sharded tensor             all-gather, fetch from the first shard's worker
//   anything else                         operands assembled whole on one worker
//
// A client that never registered a config (and with auto-sharding off) costs
// next to nothing: its tensors are all whole on one worker, so the stage
// keeps no record of them, puts its creations on its worker and passes
// everything else on for the router to place by operand. After its first
// config a tensor without a record is such a tensor (whole on the client's
// worker, shape unknown here): an op that mixes one with placed tensors runs
// whole on that worker, the others assembled there first.
//
// Collective bytes never pass through the dispatcher: each collective is one
// instruction per member, executed by the members' backends (Gloo), who meet
// at the rendezvous store this stage hosts.
//
// Thread-safety: as every Stage (one pipeline thread).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gt/stage.h"
#include "placement.h"
#include "shape_inference.h"

namespace c10d {
class TCPStore;
}
namespace prometheus {
class Gauge;
}

namespace gt::sharding {

inline constexpr const char* kOptionRendezvousHost = "rendezvous_host";
inline constexpr const char* kOptionRendezvousPort = "rendezvous_port";
inline constexpr const char* kOptionExplain = "explain";
inline constexpr const char* kOptionAutoShard = "auto_shard";

// A signal config as the dispatcher received it (kConfigure).
struct Config {
  bool sharded = false;
  int64_t axis = 0;
  std::vector<int> workers;  // empty: every live worker
  bool replicated = false;
  std::string backward;
  bool compile = false;
};

class ShardingStage final : public Stage {
 public:
  // Starts the rendezvous store; fails if it cannot listen.
  static Result<std::unique_ptr<Stage>> Create(const StageContext& context);
  ~ShardingStage() override;

  Status Process(Instruction&& inst, Emitter& out) override;
  // Publishes the gauges (clients and tensors with state here).
  Status EndBatch(Emitter& out) override;

 private:
  struct Tensor {
    TensorMeta meta;
    Placement placement;
  };
  struct Client {
    // False until the client registers its first config (always true with
    // auto-sharding): until then no tensor of it has a record here.
    bool placing = false;
    std::map<std::string, Config> configs;
    std::unordered_map<TensorId, Tensor> tensors;
    std::unordered_map<TensorId, uint64_t> failed;  // id -> seq of the op that failed to make it
    int default_worker = -1;  // where its whole tensors are made (and every unrecorded one lives)
    TensorId next_physical = kPhysicalIdBase;
  };
  // The op being expanded: where emitted instructions go, temporaries to
  // free at its end, and what explain prints.
  struct Step {
    Client* client;
    const Instruction* inst;
    Emitter* out;
    std::vector<std::pair<int, TensorId>> temporaries;
    std::vector<std::string> collectives;
  };

  // The stage's own gauges; owned by the host's registry.
  struct Gauges {
    prometheus::Gauge* clients = nullptr;
    prometheus::Gauge* tensors = nullptr;
  };

  ShardingStage(std::string rendezvous, bool explain, bool auto_shard, std::shared_ptr<c10d::TCPStore> store,
                Gauges gauges);

  Status Handle(Instruction&& inst, Emitter& out);
  // A client without configs: creations go to its worker, the rest passes on.
  Status PassOn(Client& c, Instruction&& inst, Emitter& out);
  Status Configure(Client& c, const Instruction& inst);
  Status Create(Client& c, Instruction inst, Emitter& out);
  Status Free(Client& c, Instruction inst, Emitter& out);
  Status Fetch(Client& c, Instruction inst, Emitter& out);
  Status Compute(Client& c, Instruction inst, Emitter& out);
  // `inst`, whose operands are all whole on `worker`, sent there as it is.
  Status Forward(Client& c, Instruction&& inst, int worker, TensorMeta meta, Emitter& out);
  // An op with an operand that has no record (made before the client's first
  // config): the placed operands assembled whole on the client's worker, the
  // op run there; its result has no record either.
  Status Unrecorded(Client& c, Instruction inst, const std::vector<const Tensor*>& in, Emitter& out);
  // A compiled unit a client sent itself (its own compile stage): it runs
  // whole on one worker, so it may take only tensors whole on one worker; the
  // inputs it consumes lose their records, its results get none (whole where
  // the router places them, as unrecorded tensors are).
  Status RunUnit(Client& c, Instruction&& inst, Emitter& out);
  // Frees the operands a kRunUnit this stage refuses would have consumed.
  void FreeConsumed(Client& c, const Instruction& run, Emitter& out);

  // Strategies; each returns the result's placement (ids filled in).
  Result<Placement> Elementwise(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
  Result<Placement> Matmul(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
  Result<Placement> Reduce(Step& s, const Tensor& in, const TensorMeta& meta);
  Result<Placement> Movement(Step& s, const Tensor& in, const TensorMeta& meta);
  Result<Placement> Softmax(Step& s, const Tensor& in, const TensorMeta& meta);
  Result<Placement> SoftmaxAlongShards(Step& s, const Tensor& in);
  static std::optional<int64_t> AxisAfter(const Instruction& inst, int64_t axis, int64_t rank);
  std::optional<Placement> ReshapeRows(Step& s, const Tensor& in, const TensorMeta& meta);
  std::vector<TensorId> ReshapeEach(Step& s, const Placement& p, const Shape& shape, int64_t axis,
                                    const std::vector<int64_t>& sizes);
  Result<Placement> SliceAlongShards(Step& s, const Tensor& in, const TensorMeta& meta);
  // Emits `op` with `attrs` on every member r of `p`, on operands(r); the
  // results, one per member, are kept as temporaries when `temporary`.
  std::vector<TensorId> PerMember(Step& s, const Placement& p, Op op, const Attributes& attrs,
                                  const std::function<std::vector<TensorId>(size_t)>& operands, bool temporary);
  Result<Placement> SliceOrSelect(Step& s, const Tensor& in, const TensorMeta& meta);
  Result<Placement> Cat(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);
  // The op run on every member of `p` with member r's id as its only operand.
  std::vector<TensorId> EachMember(Step& s, const Placement& p);
  Result<Placement> Whole(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);

  // Collectives and moves; the ids they return are temporaries of `s`.
  // A copy of `t` on each of `workers` (t whole or replicated).
  std::map<int, TensorId> Replicate(Step& s, const Tensor& t, const std::vector<int>& workers);
  // `t` whole on `worker`.
  TensorId WholeOn(Step& s, const Tensor& t, int worker);
  // `t` split like `like` (same workers, axis `axis` of t, same sizes).
  std::vector<TensorId> ShardLike(Step& s, const Tensor& t, int64_t axis, const Placement& like);
  std::vector<TensorId> AllReduce(Step& s, const Placement& p, const std::vector<TensorId>& ids, const TensorMeta& meta,
                                  int op);

  // `t` moved onto the workers of `config` (whole: onto its first worker;
  // sharded: cut on the config's axis, else replicated); nullopt when every
  // worker of `t` is one of them already. The new ids are temporaries of `s`.
  std::optional<Tensor> MoveInto(Step& s, const Tensor& t, const Config& config);

  // `ids` outlive the step: they are no longer temporaries.
  static void Keep(Step& s, const std::vector<TensorId>& ids);
  // Emits one instruction for `worker` made from the op being expanded.
  void EmitOn(Step& s, int worker, Instruction inst);
  // Frees the step's temporaries where they live.
  void FreeTemporaries(Step& s);
  TensorId NewId(Client& c) { return c.next_physical++; }
  Instruction Collective(Step& s, Op op, const std::vector<int>& group, int rank);
  void Explain(const Step& s, const std::vector<const Tensor*>& in, const Placement& result);

  Status CheckConfig(const std::string& signal, const Config& config, const Client& c, const Shape* shape) const;
  std::vector<int> WorkersOf(const Config& config) const;
  int DefaultWorker(Client& c);
  Status Failed(const Client& c, const Instruction& inst) const;

  std::string rendezvous_;  // "host:port" of the store
  bool explain_;
  bool auto_shard_;  // creation without a config: axis 0 over every live worker when it divides, else replicated
  std::shared_ptr<c10d::TCPStore> store_;
  Gauges gauges_;
  std::vector<int> live_;  // live worker indexes, from kMembership
  size_t next_default_ = 0;
  std::unordered_map<ClientId, Client> clients_;
};

}  // namespace gt::sharding
