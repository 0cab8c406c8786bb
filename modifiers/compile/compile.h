// compile: a stream modifier that turns sequences into compiled units. A
// sequence between kHotStart and kHotEnd (marked by the hotpath stage, or by
// the client around a `compile` signal scope) becomes one kRunUnit that
// names only the sequence's inputs and outputs, preceded the first time (per
// client) by the kDefineUnit that carries its template (gt/unit.h). With
// `batch_size` > 1 it also groups unmarked runs of up to that many
// sequenceable instructions into units ("batching"); 1 leaves them eager.
//
// Units are keyed by the full signature (ops, attributes, shapes, dtypes,
// wiring; sequence.h), so a change of shapes or dtypes makes a new unit.
// Nothing that is not sequenceable is ever put in a unit: a marked region
// that meets a fetch, sync, from_bytes or an operand of unknown shape is
// passed on eagerly as it was. Held instructions are all passed on by the end
// of their batch.
//
// Replays: once a hot sequence's unit is defined for a client, a region the
// hotpath stage marks with that sequence's id is checked against the unit by
// its ops and wiring only (the hotpath stage already compared the full
// signature, and gives distinct hot sequences distinct ids), and the
// outputs' shapes and dtypes are taken from the unit instead of being
// inferred again. A region that does not match is passed on eagerly.
//
// Where it runs: in a worker, the units go straight to the backend. In the
// dispatcher, the router keeps each client's definitions and sends one to a
// worker just before that worker's first kRunUnit of it, so a replayed
// sequence crosses the wire as one instruction.
//
// Thread-safety: none needed; a Stage is driven from one thread (gt/stage.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gt/options.h"
#include "gt/stage.h"
#include "gt/status.h"
#include "sequence.h"

namespace prometheus {
class Counter;
}

namespace gt::compile {

inline constexpr const char* kOptionBatchSize = "batch_size";
// Replaces batch_size when set (declared in plugin.cc's OptionSpec).
inline constexpr const char* kEnvBatchSize = "GT_WORKER_BATCH_SIZE";

struct CompileOptions {
  // 1: only marked sequences become units (eager otherwise). N > 1: unmarked
  // runs of up to N sequenceable instructions become units too.
  int64_t batch_size = 0;
  static CompileOptions FromValues(const OptionValues& values);
};

// Declared once, in compile.cc; listed in README.md and docs/METRICS.md.
struct CompileMetrics {
  prometheus::Counter* runs;                  // gt_compile_units_run_total
  prometheus::Counter* cache_misses;          // gt_compile_cache_misses_total (definitions sent)
  prometheus::Counter* cache_hits;            // gt_compile_cache_hits_total
  prometheus::Counter* replays;               // gt_compile_replays_total
  prometheus::Counter* compiled_instructions; // gt_compile_instructions_compiled_total
  prometheus::Counter* eager_instructions;    // gt_compile_instructions_eager_total
  static Result<CompileMetrics> Build(const StageContext& context);
};

class CompileStage final : public Stage {
 public:
  static Result<std::unique_ptr<Stage>> Create(const StageContext& context);
  CompileStage(const CompileOptions& options, const CompileMetrics& metrics);

  Status Process(Instruction&& inst, Emitter& out) override;
  Status EndBatch(Emitter& out) override;
  size_t Buffered() const override { return buffered_; }

 private:
  enum class Mode : uint8_t { kIdle, kMarked, kReplay, kBatch };
  // A unit this stage made, by key.
  struct Known {
    std::string signature;                  // catches hash collisions
    // What a replay must match: each instruction's op and operand count, and
    // every operand's placeholder (Sequence::operands: 1..inputs an input,
    // above that a production index + inputs + 1).
    std::vector<Op> ops;
    std::vector<uint32_t> arity;
    std::vector<TensorId> operands;
    std::vector<TensorMeta> output_metas;   // what the tracker learns from a replay
    bool replayable = false;                // every output's metadata was known
  };

  struct Pending {
    Mode mode = Mode::kIdle;
    std::vector<Instruction> instructions;
    sequence::Builder builder;
    uint64_t replay = 0;  // kReplay: the unit expected
    const Known* known = nullptr;  // kReplay: its entry in units_ (never erased)
    int32_t worker = -1;  // the worker its instructions name, -1 while none does
  };
  // Emits what `pending` holds: as a unit when `as_unit` and it is long
  // enough, else unchanged. Leaves it idle.
  void Finish(ClientId client, Pending& pending, bool as_unit, Emitter& out);
  void EmitEager(Pending& pending, Emitter& out);
  // Adds `inst` to `pending` (moving from it); false, leaving it as it was,
  // when the builder cannot wire it.
  bool Collect(Pending& pending, Instruction& inst);
  Known MakeKnown(ClientId client, const sequence::Sequence& s, const std::vector<Instruction>& instructions) const;
  // The unit of hot sequence `id` when a region marked with it can be a
  // replay (defined for `client`, outputs known), else null.
  const Known* Replayable(ClientId client, uint64_t id) const;
  void FinishReplay(ClientId client, Pending& pending, Emitter& out);
  // The wiring of `pending`'s replay region (its Sequence without a
  // signature), or false when it does not have the unit's ops and wiring.
  static bool WireReplay(const Known& known, Pending& pending, sequence::Sequence* s);
  // Passes a replay region on eagerly, teaching the tracker what it makes.
  void GiveUpReplay(Pending& pending, Emitter& out);
  // Emits the kRunUnit for `s` (and its kDefineUnit the first time) in place of `pending`'s instructions.
  void EmitRun(ClientId client, Pending& pending, sequence::Sequence& s, int32_t worker, Emitter& out);
  static bool SameWorker(const Pending& pending, const Instruction& inst);

  CompileOptions options_;
  CompileMetrics metrics_;
  sequence::MetaTracker tracker_;
  std::unordered_map<ClientId, Pending> pending_;
  std::unordered_map<ClientId, std::unordered_set<uint64_t>> defined_;  // units each client was sent
  std::unordered_map<uint64_t, Known> units_;
  size_t buffered_ = 0;
};

}  // namespace gt::compile
