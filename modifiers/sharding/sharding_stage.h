// ShardingStage: the sharding modifier's stage (see sharding.h for what it
// does). It owns the stream side: the live workers (kMembership), each
// client's configs and records (bookkeeping.h), the checks on what a client
// may send, and per instruction which path it takes: creation, free, fetch,
// compiled units, ops of clients without configs, ops on tensors without a
// record, and every other op through the strategy table
// (strategy_table.h), writing through a Step (step.h).
//
// Its files, by concept: sharding_stage.cc (setup, routing, frees, fetches,
// units), stage_config.cc (signal configs), stage_inspect.cc (layout
// queries and recordings, answered from the records: gt/layout.h),
// stage_pending.cc (pending sums), stage_ops.cc (creation and computation),
// stage_restore.cc (records kept by the workers across a dispatcher restart).
//
// Thread-safety: as every Stage (one pipeline thread).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bookkeeping.h"
#include "gt/op_attrs.h"
#include "gt/stage.h"
#include "mesh.h"
#include "placement.h"
#include "rendezvous.h"
#include "step.h"

namespace prometheus {
class Gauge;
}

namespace gt::sharding {

class ShardingStage final : public Stage {
 public:
  // Reads the options (sharding.h; GT_EXPLAIN and GT_AUTO_SHARD override
  // theirs), starts the rendezvous with `start` and registers the gauges in
  // context.registry (none when it is null). Fails if the rendezvous cannot
  // listen or the gauges cannot be registered.
  static Result<std::unique_ptr<Stage>> Create(const StageContext& context, StartRendezvous start);
  ~ShardingStage() override;

  Status Process(Instruction&& inst, Emitter& out) override;
  // Tells the workers the records that changed in this batch (Retag), and
  // publishes the gauges (clients and tensors with state here).
  Status EndBatch(Emitter& out) override;
  // A restarted dispatcher takes a client back (stage_restore.cc): its
  // records rebuilt from the tags its pieces carry, each checked against
  // the others and against what the workers hold; a malformed or
  // contradictory tag refuses the session. Pieces without a tag (a step's
  // temporaries) are freed.
  Status Restore(const RestoredSession& session, Emitter& out) override;

 private:
  // The stage's own gauges; owned by the host's registry.
  struct Gauges {
    prometheus::Gauge* clients = nullptr;
    prometheus::Gauge* tensors = nullptr;
  };

  ShardingStage(std::unique_ptr<Rendezvous> rendezvous, bool explain, bool auto_shard, Gauges gauges,
                std::string checkpoint_root);

  Status Handle(Instruction&& inst, Emitter& out);
  // The live workers; on a loss, the rendezvous told and ForgetLost.
  void Membership(const Instruction& membership, Emitter& out);
  // `lost` died: every tensor with a piece there is lost whole (recorded so
  // that a later use names the worker), its pieces on live workers are
  // freed, and the router gets a note per client naming what it lost.
  void ForgetLost(const LostWorker& lost, Emitter& out);
  // A client without configs: creations go to its worker, the rest passes on.
  Status PassOn(Client& c, Instruction&& inst, Emitter& out);
  Status Configure(Client& c, const Instruction& inst);
  Status Create(Client& c, Instruction inst, Emitter& out);
  Status Free(Client& c, Instruction inst, Emitter& out);
  Status Fetch(Client& c, Instruction inst, Emitter& out);
  // kInspect (gt/op_attrs.h InspectMode): a tensor's layout, or the
  // client's collective recording started or handed over. An answer is set
  // on the instruction (SetInspectAnswer), which goes on to the router: it
  // sends the client the answer itself, and no worker sees the query.
  Status Inspect(Client& c, Instruction&& inst, Emitter& out);
  // The layout of `inst`'s one operand (gt/layout.h EncodeAnswer). A tensor
  // without a record is whole on the client's worker: its id is left on the
  // query for the router to check; a recorded one's is taken off.
  Status AnswerLayout(Client& c, Instruction&& inst, Emitter& out);
  // kCheckpointWrite / kCheckpointRead (stage_checkpoint.cc): the plan's
  // paths resolved under checkpoint_root_, and each piece's lines sent to
  // the worker holding it (the metadata's to the client's worker).
  Status Checkpoint(Client& c, Instruction&& inst, Emitter& out);
  // The pending sums among `inst`'s operands all-reduced (their records
  // become replicated): an op that needs their values, not their addends.
  void Settle(Client& c, Step& s, const Instruction& inst);
  // One pending sum `t` summed; a view of another made again from the
  // summed base (which is summed first).
  void SettleOne(Client& c, Step& s, Tensor& t);
  // kSettle: the pending sums among the operands summed now, those alike
  // (same workers, same dtype) in one all-reduce (MaterializeTogether).
  Status SettleTogether(Client& c, Instruction&& inst, Emitter& out);
  // `x`, a tensor without a record that a redistribute names (whole on the
  // client's worker, with the shape and dtype the client states), replaced
  // by a copy made only if the worker finds it so.
  void Adopt(Step& s, Tensor& x);
  void ForgetConstants(Client& c, const Instruction& inst);
  // Every other op of a client with configs: settled, then on the mesh
  // (ComputeOnMesh) or on workers (PlaceOnWorkers); its result recorded.
  Status Compute(Client& c, Instruction inst, Emitter& out);
  // The operand of a redistribute that has no record, as the client states
  // it: whole on the client's worker. InvalidArgument when that is gone.
  Result<Tensor> Adoptable(Client& c, const Instruction& redistribute);
  // Compute's 2-D part (mesh.h): the op run piece by piece on the mesh, or
  // nullopt once its mesh operands are copies the 1-D strategies take (kept
  // in `unmeshed`, which `in` then points into; a view's records themselves).
  std::optional<Result<Placement>> ComputeOnMesh(Client& c, Step& s, const Instruction& inst,
                                                 std::vector<const Tensor*>& in, const TensorMeta& meta,
                                                 std::vector<Tensor>& unmeshed);
  // Compute's 1-D part: operands moved into the scope's workers (kept in
  // `moved`, which `in` then points into), then the strategy table; nullopt
  // when every operand is whole on one worker and `inst` went there as it is
  // (Forward's status in `forwarded`).
  std::optional<Result<Placement>> PlaceOnWorkers(Client& c, Step& s, Instruction& inst,
                                                  std::vector<const Tensor*>& in, TensorMeta& meta,
                                                  std::vector<Tensor>& moved, Status& forwarded, Emitter& out);
  // The tensor `id` (on a mesh), the base it is a view of and every other
  // mesh view of that base turned into copies on their mesh workers
  // (MakeCopies): the base's copies, the views made again from them, so that
  // they still share data.
  void MakeFamilyCopies(Client& c, Step& s, TensorId id);
  // The mesh operands of `inst` with Partial() axes summed (mesh.h), unless
  // the op carries them.
  void SettleMesh(Client& c, Step& s, const Instruction& inst);
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

  // `c`'s records that changed since they were last told (c.tagged) told
  // to their pieces' workers, and the pieces no record holds any more
  // forgotten there (stage_restore.cc).
  void Retag(ClientId id, Client& c, Emitter& out);
  // Marks `c` for Retag at the batch's end.
  void MarkRetag(ClientId id, Client& c) {
    if (c.retag) return;
    c.retag = true;
    retag_.push_back(id);
  }

  // A step expanding `inst` of `c` into `out`.
  Step StepFor(Client& c, const Instruction& inst, Emitter& out);
  // With explain on: one line on stderr with the op's input placements,
  // result placement and collectives.
  void Explain(const Step& s, const std::vector<const Tensor*>& in, const Placement& result);

  std::unique_ptr<Rendezvous> rendezvous_;
  std::string rendezvous_address_;  // rendezvous_->address(), named in every collective
  bool explain_;
  bool auto_shard_;
  std::string checkpoint_root_;  // workers write and read checkpoints only under it (kOptionCheckpointRoot)  // creation without a config: axis 0 over every live worker when it divides, else replicated
  Gauges gauges_;
  Workers workers_;
  std::unordered_map<ClientId, Client> clients_;
  std::vector<ClientId> retag_;  // clients marked for Retag this batch
};

}  // namespace gt::sharding
