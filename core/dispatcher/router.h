// The router: the dispatcher's terminal stage, where a client's instruction
// stream, after the manifest's stages, becomes per-worker batches.
//
// It owns no socket. For each instruction it checks the client's tensor ids
// (an operand must be live in the client's namespace, a result must not be),
// picks the target worker (the one a stage placed it on, else the one holding
// its operands, else the client's worker), keeps each client's units and
// sends a unit's template to a worker once before its first run there, and
// appends the instruction to the target's batch (WorkerRegistry). Refused
// instructions are reported to the client at its next sync point, and their
// results remembered as failed, so later uses name the op that failed.
// An instruction only a stage carries out (a signal config that places
// tensors: the sharding stage; a compile scope its client requires compiled:
// the compile stage) is an error here, naming the missing stage: never
// silently eager or unsharded. An inspect is answered here, from what the
// stage that answered it set, without a worker.
//
// Thread-safety: as every Terminal (the pipeline's thread).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "dispatcher/client_table.h"
#include "gt/status.h"
#include "host/host_metrics.h"
#include "host/manifest.h"
#include "host/pipeline.h"
#include "dispatcher/sync_tracker.h"
#include "dispatcher/worker_registry.h"

namespace gt {

class Router final : public Terminal {
 public:
  // `end_batch` runs when the pipeline's pass ends (the dispatcher flushes
  // the workers' batches there).
  Router(ClientTable& clients, WorkerRegistry& workers, SyncTracker& syncs, std::function<void()> end_batch)
      : clients_(clients), workers_(workers), syncs_(syncs), end_batch_(std::move(end_batch)) {}

  // An error for the client's next sync point when `inst` is refused.
  Status Accept(Instruction inst) override;
  void EndBatch() override { end_batch_(); }
  // A stage's tag for a piece goes to the worker holding it, with this pass's batch.
  void Tag(PieceTag&& tag) override { workers_.AddTag(std::move(tag)); }
  // Worker `w` died (`why`): every client's tensors there are forgotten and
  // recorded as lost with it (a later use names the worker; a free of one is
  // no error), its units are sent again to a replacement, and each client
  // that had tensors there or waits on it gets one error at its next sync
  // naming the worker and the tensors lost: its own ids, and those a stage
  // noted (MakeLostTensorsNote) for tensors it split into pieces, in place
  // of the pieces. REQUIRES: the stages saw the membership that lost `w`
  // first, so that their notes are in.
  void OnWorkerLost(size_t w, const std::string& why);
  // How errors name this host when an instruction needs a stage it does not
  // run, e.g. "dispatcher 'd0' (stages: instruction_log)".
  void set_host_description(std::string description) { host_description_ = std::move(description); }
  // Where WORKER_SEND events go (the dispatcher pipeline's); null: none.
  // REQUIRES: `events` outlives this router.
  void set_events(const HostEvents* events) { events_ = events; }

 private:
  // A signal config that places tensors, or a required compile scope's
  // start, that reached the router: no stage carried it out. An error naming the stage.
  Status MissingStage(const Instruction& inst) const;
  // Keeps a stage's note for OnWorkerLost; any other membership is the
  // stages' business.
  Status NoteLostTensors(const Instruction& membership);
  Status SendDrop(ClientState& c, const Instruction& drop);
  // kInspect: the answer a stage set goes to the client as a fetch's DATA
  // (an operand left on the query must be a live tensor of the client);
  // none set: no stage answers inspects here, an error naming that.
  Status AnswerInspect(ClientState& c, const Instruction& inspect);
  Status Free(ClientState& c, const Instruction& free);
  static std::optional<size_t> SoleWorker(const ClientState& c, const std::vector<TensorId>& ids);
  Status DefineUnit(ClientState& c, Instruction inst);
  Status SendUnitOnce(ClientState& c, size_t w, const Instruction& run);
  Status CheckIds(const ClientState& c, const Instruction& inst) const;
  Result<size_t> TargetWorker(ClientState& c, const Instruction& inst);
  Status Refuse(ClientState& c, const Instruction& inst, Status status);
  void Enqueue(size_t w, ClientState& c, const Instruction& inst);
  // Appends `inst` to worker w's batch, recording a WORKER_SEND event.
  void EnqueueTo(size_t w, const Instruction& inst);

  ClientTable& clients_;
  WorkerRegistry& workers_;
  SyncTracker& syncs_;
  std::function<void()> end_batch_;
  const HostEvents* events_ = nullptr;
  std::string host_description_ = "this dispatcher";
};

}  // namespace gt
