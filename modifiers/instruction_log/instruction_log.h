// instruction_log: a pass-through stream modifier that writes one text line
// per instruction it sees (the "tape dump" of README.md), so that a run can be
// replayed by eye and a hang shows the last op that went by.
//
// Memory stays bounded however long it runs: lines go through one fixed-size
// stdio buffer and are never kept; disk can be bounded too by rotation
// (max_file_bytes). A logging failure never rejects an instruction: the
// instruction still passes, and the failure is counted in
// gt_instruction_log_write_errors_total.
//
// Thread-safety: none needed; a Stage is driven from one thread (gt/stage.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "gt/options.h"
#include "gt/stage.h"
#include "gt/status.h"

namespace prometheus {
class Counter;
}

namespace gt::instruction_log {

// Option names, written once here and used by both the OptionSpec table in
// plugin.cc and the parser below. Defaults, units and ranges live only in
// that table (the host fills every declared option in before Create()).
inline constexpr const char* kOptionPath = "path";
inline constexpr const char* kOptionAppend = "append";
inline constexpr const char* kOptionFlushEvery = "flush_every";
inline constexpr const char* kOptionMaxFileBytes = "max_file_bytes";

// Replaces option `path` when set (declared in plugin.cc's OptionSpec).
inline constexpr const char* kPathEnvVar = "GT_INSTRUCTION_LOG";

// Built by FromValues(). The zero values below are placeholders, not
// defaults: those are written once, in plugin.cc's OptionSpec table.
struct InstructionLogOptions {
  // File the lines go to: option `path` ($GT_INSTRUCTION_LOG when set). Never
  // empty once FromValues() succeeded.
  std::string path;
  // Keep an existing file's contents instead of truncating it on open. Off by
  // default so that each run's log starts clean.
  bool append = false;
  // Flush after this many lines even within a batch (>= 1). Lower: a crash
  // loses fewer lines, more write() calls. Batches always flush at their end.
  int64_t flush_every = 0;
  // Rotate when the next line would take the file past this size; 0 means
  // unlimited. Disk use stays below about twice this (file + one old file).
  int64_t max_file_bytes = 0;

  // Reads the declared options (the host applied the environment).
  // Returns InvalidArgument when `path` names no file.
  // REQUIRES: every option declared in plugin.cc is present in `values`.
  static Result<InstructionLogOptions> FromValues(const OptionValues& values);
};

// This stage's own series, each labelled with gt::StageLabels(). Built once
// per stage; the handles stay owned by the registry.
struct InstructionLogMetrics {
  prometheus::Counter* lines;          // gt_instruction_log_lines_total
  prometheus::Counter* bytes_written;  // gt_instruction_log_bytes_written_total
  prometheus::Counter* rotations;      // gt_instruction_log_rotations_total
  prometheus::Counter* write_errors;   // gt_instruction_log_write_errors_total
  prometheus::Counter* host_events;    // gt_instruction_log_host_events_total

  // Registers (or finds, when another stage already registered them) the
  // families on `context.registry`.
  // Returns InvalidArgument when the registry is missing or refuses a family.
  static Result<InstructionLogMetrics> Build(const StageContext& context);
};

// Also a HostEventSink: the host's CONNECT / DISCONNECT / WORKER_SEND / SEND /
// WORKER_DONE events (gt/host_event.h) get a line each in the same file, so
// the log holds an instruction's whole life. Each file starts with an OPEN
// line naming the host and the wall-clock time of `elapsed` 0.
class InstructionLogStage final : public Stage, public HostEventSink {
 public:
  // Size of the one stdio buffer each stage writes through.
  static constexpr size_t kBufferBytes = 64 * 1024;

  // The plugin's factory: parses options (reading $GT_INSTRUCTION_LOG),
  // builds the metrics and opens the file.
  // Returns InvalidArgument when no path is configured, or when the file
  // cannot be opened (the message names the path and the OS reason).
  static Result<std::unique_ptr<Stage>> Create(const StageContext& context);

  // As Create(), with options already parsed.
  static Result<std::unique_ptr<InstructionLogStage>> Open(const StageContext& context,
                                                           InstructionLogOptions options);

  ~InstructionLogStage() override;
  InstructionLogStage(const InstructionLogStage&) = delete;
  InstructionLogStage& operator=(const InstructionLogStage&) = delete;

  // Writes `inst`'s line, then emits `inst` unchanged. Always returns OK.
  Status Process(Instruction&& inst, Emitter& out) override;
  // Flushes, so the file is current whenever the pipeline waits for input.
  // Always returns OK.
  Status EndBatch(Emitter& out) override;
  HostEventSink* host_event_sink() override { return this; }
  // Writes the event's line. Never throws; a failure is counted as any other.
  void OnHostEvent(const HostEvent& event) override;

 private:
  InstructionLogStage(InstructionLogOptions options, InstructionLogMetrics metrics,
                      const StageContext& context);

  enum class OpenMode { kTruncate, kAppend };
  // Opens options_.path with the fixed buffer. On failure file_ stays null
  // and the returned status names the path and the OS reason.
  Status OpenFile(OpenMode mode);
  void CloseFile();
  // Fills line_ with `inst`'s line, newline included.
  void FormatLine(const Instruction& inst);
  // Starts line_ with the columns before <details>.
  void FormatPrefix(std::string_view event, std::string_view source, std::string_view command,
                    size_t bytes);
  // Writes the OPEN line at the top of a new file (not counted in lines).
  void WriteHeader();
  void WriteLine();
  // Writes line_ (rotating first when needed); true when all of it was
  // written. Counts bytes and errors, not lines.
  bool WriteLineCounted();
  // Moves the full file to "<path>.1" and starts an empty one.
  void Rotate();
  static std::string OneLine(std::string_view text);
  bool AppendLine();
  void Flush();
  void CountWriteError() const;

  const InstructionLogOptions options_;
  const InstructionLogMetrics metrics_;
  const std::string_view event_;  // "RECV" or "WORKER_RECV"; static storage
  const std::chrono::steady_clock::time_point start_;
  const std::string host_;        // "<host kind> <instance>", the OPEN line's source
  const std::string header_;      // the OPEN line's details

  // Declared before file_ so it outlives the FILE that points into it.
  std::unique_ptr<char[]> buffer_;
  std::FILE* file_ = nullptr;  // null after a failed reopen; retried at EndBatch
  uint64_t file_bytes_ = 0;    // size of the current file
  uint64_t line_seq_ = 0;      // next #<seq>
  int64_t unflushed_lines_ = 0;
  bool in_pass_ = false;  // between this stage's first Process and its EndBatch
  std::string line_;           // reused; its capacity is the longest line so far
};

}  // namespace gt::instruction_log
