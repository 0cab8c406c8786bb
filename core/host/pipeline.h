// The stage chain of a stream host: the one pipeline implementation run by
// both the dispatcher and the workers.
//
// Instructions pushed in pass through every manifest stage in order, then
// into the host's Terminal (the dispatcher's router, the worker's backend).
// Every stage, the terminal included, gets the stage metric family. A stage's
// time is its own Process() call (and the pipeline's few nanoseconds of
// bookkeeping for it): what it emits is handed downstream after it returns.
//
// Thread-safety: none; one pipeline thread calls Push/EndBatch.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gt/instruction.h"
#include "gt/stage.h"
#include "host/host_events.h"
#include "host/host_metrics.h"
#include "host/manifest.h"
#include "host/plugin_loader.h"

namespace gt {

// What a plugin of `manifest`'s host is created with: its stage's name and
// options, the registry, and where the host's peers reach it (peer_address.h).
StageContext PluginContext(const HostManifest& manifest, const ManifestStage& spec, prometheus::Registry& registry);

// The last stage of a host, built in (not a plugin).
class Terminal {
 public:
  virtual ~Terminal() = default;
  virtual Status Accept(Instruction inst) = 0;
  virtual void EndBatch() {}
  // A stage's tag for a piece (gt/stage.h PieceTag), handed on at the end of
  // the batch that made it, before EndBatch. Default: dropped.
  virtual void Tag(PieceTag&& tag) { (void)tag; }
};

using ErrorSink = std::function<void(const OpRef&, const Status&)>;

class Pipeline {
 public:
  // Creates every stage of `manifest` (plugins' factories run here).
  static Result<std::unique_ptr<Pipeline>> Build(const HostManifest& manifest, HostMetrics& metrics,
                                                 prometheus::Registry& registry);
  ~Pipeline();

  // REQUIRES: called once before the first Push. `terminal` outlives this.
  void SetTerminal(Terminal* terminal, const std::string& name);
  void SetErrorSink(ErrorSink sink) { errors_ = std::move(sink); }

  // `start` is a clock reading the caller took just before (its last one):
  // the instruction's first visit is timed from it. Returns the reading that
  // ended its last visit, for the caller's own timing (one reading per
  // instruction and visit, not two).
  std::chrono::steady_clock::time_point Push(Instruction&& inst, std::chrono::steady_clock::time_point start);
  void Push(Instruction&& inst);
  // Tells every stage (and the terminal) that the current batch ended.
  void EndBatch();
  // A restarted dispatcher takes `session` back: every stage's Restore in
  // order, what each emits run through the stages after it. The first
  // refusal is returned (prefixed by the stage's name) and the later stages
  // are not asked. Follow it with EndBatch.
  Status Restore(const RestoredSession& session);

  size_t stage_count() const { return stages_.size(); }
  // The sinks of the stages that asked for host events (in stage order).
  const HostEvents& events() const { return events_; }

 private:
  // Counts and times of one stage not yet added to its Prometheus metrics.
  // Adding to a prometheus-cpp counter is an atomic read-modify-write, and an
  // observation of a histogram takes a mutex; doing that per instruction per
  // stage cost more than some stages' own work, so they are kept here and
  // added once per batch and before every sync point.
  struct Tally {
    uint64_t received = 0, emitted = 0, dropped = 0, injected = 0;
    HistogramTally seconds;
    void FlushTo(StageMetrics& m);
  };
  struct Slot;
  Pipeline() = default;
  using Clock = std::chrono::steady_clock;
  // Each returns when it finished; `start` is when the instruction's visit began.
  Clock::time_point RunFrom(size_t index, Instruction&& inst, Clock::time_point start);
  Clock::time_point RunControl(size_t index, Instruction&& inst);
  Clock::time_point Deliver(Instruction&& inst, Clock::time_point start);
  // `slot`'s Process(); an exception from it is a plugin error.
  Status ProcessIn(Slot& slot, Instruction&& inst);
  void Fail(StageMetrics& metrics, const OpRef& ref, const Status& status);
  size_t BufferedOf(Slot& slot);
  void FlushTallies();
  // `slot`'s tags (Emitter::Tag) to the terminal; an oversized one is dropped.
  void ForwardTags(Slot& slot);

  std::vector<std::unique_ptr<Slot>> stages_;
  Terminal* terminal_ = nullptr;
  StageMetrics terminal_metrics_{};
  Tally terminal_tally_;
  HostMetrics* metrics_ = nullptr;
  ErrorSink errors_;
  HostEvents events_;
};

}  // namespace gt
