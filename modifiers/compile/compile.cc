#include "compile.h"

#include <charconv>
#include <cstdlib>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "gt/log.h"
#include "gt/metrics.h"
#include "gt/op_attrs.h"
#include "gt/unit.h"

namespace gt::compile {
namespace {

// Distinct units remembered; past this, new sequences run eagerly.
constexpr size_t kMaxUnits = 4096;

}  // namespace

CompileOptions CompileOptions::FromValues(const OptionValues& values) {
  CompileOptions o;
  o.batch_size = values.GetInt(kOptionBatchSize);
  return o;
}

Result<CompileMetrics> CompileMetrics::Build(const StageContext& context) {
  if (context.registry == nullptr) return InvalidArgument("compile: stage '" + context.stage + "' has no metrics registry");
  prometheus::Registry& r = *context.registry;
  const prometheus::Labels labels = StageLabels(context);
  auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add(labels);
  };
  try {
    CompileMetrics m;
    m.runs = counter("gt_compile_units_run_total", "run_unit instructions a compile stage emitted.");
    m.cache_misses = counter("gt_compile_cache_misses_total",
                             "Units a compile stage had not sent to the client's hosts yet (a define_unit went out).");
    m.cache_hits = counter("gt_compile_cache_hits_total", "Units a compile stage replayed without defining them again.");
    m.replays = counter("gt_compile_replays_total",
                        "Cache hits a compile stage matched to a hot sequence's unit by ops and wiring alone.");
    m.compiled_instructions = counter("gt_compile_instructions_compiled_total",
                                      "Instructions a compile stage replaced by run_unit instructions.");
    m.eager_instructions = counter("gt_compile_instructions_eager_total",
                                   "Instructions a compile stage passed on unchanged.");
    return m;
  } catch (const std::exception& e) {
    return PluginError(std::string("compile: cannot register metrics: ") + e.what());
  }
}

Result<std::unique_ptr<Stage>> CompileStage::Create(const StageContext& context) {
  if (context.options == nullptr) return Internal("compile: created without options");
  const CompileOptions options = CompileOptions::FromValues(*context.options);
  Result<CompileMetrics> metrics = CompileMetrics::Build(context);
  if (!metrics.ok()) return metrics.status();
  return std::unique_ptr<Stage>(std::make_unique<CompileStage>(options, *metrics));
}

CompileStage::CompileStage(const CompileOptions& options, const CompileMetrics& metrics)
    : options_(options), metrics_(metrics) {}

// A unit runs on one worker: instructions a stage before this one (e.g.
// sharding) placed on different workers never share one. An instruction
// left to the router (-1) goes where its operands are, which for an
// instruction of a unit is the unit's worker.
bool CompileStage::SameWorker(const Pending& pending, const Instruction& inst) {
  return inst.worker < 0 || pending.worker < 0 || pending.worker == inst.worker;
}

bool CompileStage::Collect(Pending& pending, Instruction& inst) {
  if (!pending.builder.TryAdd(inst, tracker_)) return false;
  if (inst.worker >= 0) pending.worker = inst.worker;
  tracker_.Observe(inst);
  pending.instructions.push_back(std::move(inst));
  ++buffered_;
  return true;
}

Status CompileStage::Process(Instruction&& inst, Emitter& out) {
  const ClientId client = inst.client;
  Pending& pending = pending_[client];
  if (inst.op == Op::kHotStart) {
    if (pending.mode == Mode::kReplay) GiveUpReplay(pending, out);
    Finish(client, pending, pending.mode == Mode::kBatch, out);
    const uint64_t sequence_id = ReadHotMarker(inst).sequence_id;
    pending.known = sequence_id != 0 ? Replayable(client, sequence_id) : nullptr;
    pending.mode = pending.known != nullptr ? Mode::kReplay : Mode::kMarked;
    pending.replay = sequence_id;
    return Status::Ok();  // markers end here: the unit replaces what they delimit
  }
  if (inst.op == Op::kHotEnd) {
    if (pending.mode == Mode::kReplay) {
      FinishReplay(client, pending, out);
    } else {
      Finish(client, pending, pending.mode == Mode::kMarked, out);
    }
    return Status::Ok();
  }
  if (pending.mode == Mode::kReplay) {
    const bool fits = sequence::Sequenceable(inst) && SameWorker(pending, inst) &&
                      pending.instructions.size() < pending.known->ops.size();
    if (fits) {
      if (inst.worker >= 0) pending.worker = inst.worker;
      pending.instructions.push_back(std::move(inst));
      ++buffered_;
      return Status::Ok();
    }
    GiveUpReplay(pending, out);
  }
  const bool sequenceable = SameWorker(pending, inst) && sequence::Sequenceable(inst) && tracker_.KnowsOperands(inst);
  if (sequenceable && pending.mode == Mode::kIdle && options_.batch_size > 1) pending.mode = Mode::kBatch;
  if (sequenceable && pending.mode != Mode::kIdle && Collect(pending, inst)) {
    if (pending.mode == Mode::kBatch && static_cast<int64_t>(pending.builder.size()) >= options_.batch_size)
      Finish(client, pending, true, out);
    return Status::Ok();
  }
  // Passed on as it is: outside any region, or a boundary (a marked region
  // that meets one is given up, not cut).
  Finish(client, pending, pending.mode == Mode::kBatch, out);
  tracker_.Observe(inst);
  if (inst.op == Op::kDropClient) {
    pending_.erase(client);
    defined_.erase(client);
  }
  // The host's kMembership announcements are not instructions of the
  // stage family (gt_stage_instructions_received_total skips them).
  if (inst.op != Op::kMembership) metrics_.eager_instructions->Increment();
  out.Emit(std::move(inst));
  return Status::Ok();
}

Status CompileStage::EndBatch(Emitter& out) {
  for (auto& [client, pending] : pending_) {
    if (pending.mode == Mode::kReplay) GiveUpReplay(pending, out);
    Finish(client, pending, pending.mode == Mode::kBatch, out);
  }
  return Status::Ok();
}

void CompileStage::EmitEager(Pending& pending, Emitter& out) {
  metrics_.eager_instructions->Increment(static_cast<double>(pending.instructions.size()));
  for (Instruction& inst : pending.instructions) out.Emit(std::move(inst));
}

const CompileStage::Known* CompileStage::Replayable(ClientId client, uint64_t id) const {
  auto known = units_.find(id);
  if (known == units_.end() || !known->second.replayable) return nullptr;
  auto defined = defined_.find(client);
  return defined != defined_.end() && defined->second.count(id) > 0 ? &known->second : nullptr;
}

void CompileStage::GiveUpReplay(Pending& pending, Emitter& out) {
  GT_LOG(kCompile, "replay of unit " << pending.replay << " given up after " << pending.instructions.size()
                                     << " instructions: ran them eagerly");
  pending.mode = Mode::kIdle;
  pending.worker = -1;
  buffered_ -= pending.instructions.size();
  for (const Instruction& inst : pending.instructions) tracker_.Observe(inst);
  EmitEager(pending, out);
  pending.instructions.clear();
}

// The hotpath stage compared the region's full signature already; what a
// replay must still match is the unit's ops and wiring (a stage between the
// two could have rewritten instructions).
bool CompileStage::WireReplay(const Known& known, Pending& pending, sequence::Sequence* s) {
  const std::vector<Instruction>& region = pending.instructions;
  if (region.size() != known.ops.size()) return false;
  for (size_t i = 0; i < region.size(); ++i)
    if (region[i].op != known.ops[i] || region[i].operands.size() != known.arity[i]) return false;
  for (const Instruction& inst : region) pending.builder.AddWiring(inst);
  *s = pending.builder.Finish();
  return s->operands == known.operands && s->outputs.size() == known.output_metas.size();
}

void CompileStage::FinishReplay(ClientId client, Pending& pending, Emitter& out) {
  const Known& known = *pending.known;
  sequence::Sequence s;
  if (!WireReplay(known, pending, &s)) return GiveUpReplay(pending, out);
  pending.mode = Mode::kIdle;
  const int32_t worker = pending.worker;
  pending.worker = -1;
  buffered_ -= pending.instructions.size();
  s.id = pending.replay;
  for (int64_t index : s.consumed) tracker_.Forget(client, s.inputs[index]);
  for (size_t k = 0; k < s.outputs.size(); ++k) tracker_.Set(client, s.outputs[k], known.output_metas[k]);
  metrics_.replays->Increment();
  EmitRun(client, pending, s, worker, out);
}

void CompileStage::Finish(ClientId client, Pending& pending, bool as_unit, Emitter& out) {
  pending.mode = Mode::kIdle;
  const int32_t worker = pending.worker;
  pending.worker = -1;
  if (pending.instructions.empty()) return;
  buffered_ -= pending.instructions.size();
  sequence::Sequence s = pending.builder.Finish();
  bool compile = as_unit && s.length >= 2;
  if (compile) {
    auto known = units_.find(s.id);
    if (known == units_.end() && units_.size() < kMaxUnits) known = units_.emplace(s.id, MakeKnown(client, s, pending.instructions)).first;
    compile = known != units_.end() && known->second.signature == s.signature;  // else a collision or full: stay eager
  }
  if (!compile) {
    EmitEager(pending, out);
    pending.instructions.clear();
    return;
  }
  EmitRun(client, pending, s, worker, out);
}

CompileStage::Known CompileStage::MakeKnown(ClientId client, const sequence::Sequence& s,
                                            const std::vector<Instruction>& instructions) const {
  Known known;
  known.signature = s.signature;
  for (const Instruction& inst : instructions) {
    known.ops.push_back(inst.op);
    known.arity.push_back(static_cast<uint32_t>(inst.operands.size()));
  }
  known.operands = s.operands;
  // Replays need every output's metadata, which the tracker holds by id: a
  // region that gave two outputs one id (a client reusing ids) cannot teach
  // it, and replays of this unit by anyone would get it wrong.
  std::unordered_set<TensorId> distinct(s.outputs.begin(), s.outputs.end());
  known.replayable = distinct.size() == s.outputs.size();
  // Finish() runs after the tracker observed the sequence: its outputs are known if inferable.
  for (TensorId out : s.outputs) {
    if (!known.replayable) break;
    const TensorMeta* meta = tracker_.Find(client, out);
    if (meta == nullptr) {
      known.replayable = false;
      break;
    }
    known.output_metas.push_back(*meta);
  }
  return known;
}

void CompileStage::EmitRun(ClientId client, Pending& pending, sequence::Sequence& s, int32_t worker, Emitter& out) {
  const Instruction& first = pending.instructions.front();
  if (defined_[client].insert(s.id).second) {
    Instruction define = MakeDefineUnit(client, first.seq, s.id, EncodeUnit(sequence::MakeUnit(s, pending.instructions)));
    define.signal = first.signal;
    define.worker = worker;
    out.Emit(std::move(define));
    metrics_.cache_misses->Increment();
    GT_LOG(kCompile, "cache miss: unit " << s.id << " (" << s.length << " ops) defined for client " << client);
  } else {
    metrics_.cache_hits->Increment();
    GT_LOG(kCompile, "cache hit: unit " << s.id << " (" << s.length << " ops) run again for client " << client);
  }
  Instruction run = MakeRunUnit(client, first.seq, s.id, std::move(s.inputs), std::move(s.outputs), s.consumed);
  run.signal = first.signal;
  run.worker = worker;
  pending.instructions.clear();
  metrics_.runs->Increment();
  metrics_.compiled_instructions->Increment(static_cast<double>(s.length));
  out.Emit(std::move(run));
}

}  // namespace gt::compile
