// hotpath: a stream modifier that finds repeated instruction sequences and
// marks each occurrence of a hot one with kHotStart / kHotEnd (see gt/op.h),
// so that later stages (compile) can act on it. It never changes what runs:
// the instructions between the markers are passed on unchanged.
//
// Candidates are one client's runs of sequenceable instructions (tensor ops
// other than from_bytes, mutations, frees; see sequence.h) between
// boundaries: any other instruction of that client (fetch, sync, from_bytes,
// markers), an operand whose shape the stage does not know, the end of a
// batch, or `max_length` instructions. A client sync point ends its batch, so
// a training step that ends in `loss.item()` (forward, backward, optimizer
// update, frees) is one candidate. A candidate of at least `min_length`
// instructions whose signature has been seen `threshold` times within the
// last `window` instructions becomes hot; from then on every occurrence is
// marked. The stage holds a candidate back until its boundary (Buffered()),
// and never past the end of a batch.
//
// Distinct hot sequences carry distinct ids in their markers (a sequence
// whose hash collides with a hot one's is never marked), so a later stage
// may identify a marked region by its id.
//
// Thread-safety: none needed; a Stage is driven from one thread (gt/stage.h).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "gt/options.h"
#include "gt/stage.h"
#include "gt/status.h"
#include "sequence.h"

#include <prometheus/labels.h>

namespace prometheus {
class Counter;
class Gauge;
template <typename T>
class Family;
}  // namespace prometheus

namespace gt::hotpath {

// Option names; types, defaults, units and ranges live only in plugin.cc.
inline constexpr const char* kOptionWindow = "window";
inline constexpr const char* kOptionThreshold = "threshold";
inline constexpr const char* kOptionMinLength = "min_length";
inline constexpr const char* kOptionMaxLength = "max_length";

// Environment variables that replace the manifest's options when set
// (declared in plugin.cc's OptionSpec; the host applies them).
inline constexpr const char* kEnvWindow = "GT_HOTPATH_WINDOW";
inline constexpr const char* kEnvThreshold = "GT_HOTPATH_THRESHOLD";
inline constexpr const char* kEnvMinLength = "GT_HOTPATH_MIN_SEQ";
inline constexpr const char* kEnvMaxLength = "GT_HOTPATH_MAX_EXPAND";

struct HotpathOptions {
  // Instructions of history in which repetitions are counted. Larger finds
  // sequences that repeat rarely, at the cost of remembering more signatures.
  int64_t window = 0;
  // Occurrences (within the window) that make a sequence hot. 1 marks every
  // candidate at once; higher avoids compiling one-off sequences.
  int64_t threshold = 0;
  // Shortest candidate worth marking; shorter runs pass unmarked.
  int64_t min_length = 0;
  // Longest candidate; a longer run is cut into pieces of this length.
  int64_t max_length = 0;

  // The declared options (the host applied the environment).
  // InvalidArgument when min_length exceeds max_length.
  static Result<HotpathOptions> FromValues(const OptionValues& values);
};

// Hot sequences that get their own series, per stage: the first ones to
// become hot. Bounds the `sequence` label's values; later hot sequences are
// still counted by gt_hotpath_hot_sequences_total.
inline constexpr size_t kMaxReportedSequences = 32;

// The `sequence` label of a hot sequence: its 64-bit id as 16 hex digits
// (the id hot_start / hot_end markers carry in attrs.seed).
std::string SequenceLabel(uint64_t id);

// One hot sequence, for stats.
struct HotSequence {
  uint64_t signature = 0;
  size_t length = 0;
  uint64_t repetitions = 0;  // occurrences seen, the unmarked ones included
};

// The stage's metrics (declared once, in hotpath.cc; listed in README.md and
// docs/METRICS.md).
struct HotpathMetrics {
  prometheus::Counter* candidates;       // gt_hotpath_candidates_total
  prometheus::Counter* hot_sequences;    // gt_hotpath_hot_sequences_total
  prometheus::Counter* marked;           // gt_hotpath_marked_sequences_total
  prometheus::Counter* marked_instructions;  // gt_hotpath_marked_instructions_total
  prometheus::Gauge* tracked_tensors;    // gt_hotpath_tracked_tensors
  // One series per hot sequence (label `sequence`, its id in hex), for at
  // most kMaxReportedSequences of them per stage.
  prometheus::Family<prometheus::Gauge>* sequence_length;          // gt_hotpath_sequence_length
  prometheus::Family<prometheus::Counter>* sequence_occurrences;   // gt_hotpath_sequence_occurrences_total
  prometheus::Labels labels;  // the stage's labels, which those series extend
  static Result<HotpathMetrics> Build(const StageContext& context);
};

class HotpathStage final : public Stage {
 public:
  static Result<std::unique_ptr<Stage>> Create(const StageContext& context);
  HotpathStage(const HotpathOptions& options, const HotpathMetrics& metrics);

  Status Process(Instruction&& inst, Emitter& out) override;
  Status EndBatch(Emitter& out) override;
  size_t Buffered() const override { return buffered_; }

  // Hot sequences found so far, most repeated first.
  std::vector<HotSequence> HotSequences() const;

 private:
  struct Pending {
    std::vector<Instruction> instructions;
    sequence::Builder builder;
    bool in_scope = false;  // inside a client's compile scope: never marked here
  };
  struct Seen {
    std::string signature;   // the full signature: an id is a 64-bit hash of it
    uint64_t in_window = 0;  // occurrences among history_
    bool hot = false;
    HotSequence stats;
    prometheus::Counter* occurrences = nullptr;  // its series, when it has one
    // The outputs' metadata (Sequence::outputs order), once one occurrence
    // was observed instruction by instruction; later ones reuse it.
    std::vector<TensorMeta> output_metas;
    bool outputs_known = false;
  };

  void Flush(ClientId client, Pending& pending, Emitter& out);
  // Records one occurrence; its entry (hot or not), or null when none is kept.
  Seen* Record(const sequence::Sequence& s);
  // Teaches the tracker what a flushed candidate made.
  void Learn(ClientId client, const sequence::Sequence& s, const std::vector<Instruction>& instructions, Seen* seen);
  // Gives a sequence that just became hot its series, if any are left.
  void Report(Seen& seen);

  HotpathOptions options_;
  HotpathMetrics metrics_;
  sequence::MetaTracker tracker_;
  std::unordered_map<ClientId, Pending> pending_;
  size_t buffered_ = 0;
  uint64_t position_ = 0;  // instructions seen
  size_t reported_ = 0;    // hot sequences with their own series
  std::unordered_map<uint64_t, Seen> seen_;              // by Sequence::id
  std::deque<std::pair<uint64_t, uint64_t>> history_;   // (Sequence::id, position), oldest first
};

}  // namespace gt::hotpath
