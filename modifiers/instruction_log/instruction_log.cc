#include "instruction_log.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>

#include <unistd.h>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "gt/metrics.h"

namespace gt::instruction_log {

namespace {

// Column widths. Fixed so that columns line up in a pager; values wider than a
// column (a 20-digit client id) widen that line only.
constexpr int kEventWidth = 11;    // "WORKER_RECV"
constexpr int kSourceWidth = 24;   // "worker " + a 17-character name
constexpr int kCommandWidth = 11;  // "drop_client", the longest op name
constexpr int kBytesWidth = 10;

std::string_view EventFor(HostKind host) {
  return host == HostKind::kWorker ? "WORKER_RECV" : "RECV";
}

prometheus::Counter* AddCounter(prometheus::Registry& registry, const prometheus::Labels& labels,
                                const char* name, const char* help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add(labels);
}

}  // namespace

// ---- InstructionLogOptions --------------------------------------------------

Result<InstructionLogOptions> InstructionLogOptions::FromValues(const OptionValues& values) {
  InstructionLogOptions options;
  options.path = values.GetString(kOptionPath);
  if (options.path.empty()) {
    return InvalidArgument("instruction_log: set option 'path' or GT_INSTRUCTION_LOG");
  }
  options.append = values.GetBool(kOptionAppend);
  options.flush_every = values.GetInt(kOptionFlushEvery);
  options.max_file_bytes = values.GetInt(kOptionMaxFileBytes);
  return options;
}

// ---- InstructionLogMetrics --------------------------------------------------

Result<InstructionLogMetrics> InstructionLogMetrics::Build(const StageContext& context) {
  if (context.registry == nullptr) {
    return InvalidArgument("instruction_log: stage '" + context.stage + "' has no metrics registry");
  }
  const prometheus::Labels labels = StageLabels(context);
  prometheus::Registry& registry = *context.registry;
  // prometheus-cpp reports a name clash (same family name, other type) by
  // throwing; keep that inside the plugin.
  try {
    return InstructionLogMetrics{
        AddCounter(registry, labels, "gt_instruction_log_lines_total",
                   "Lines written to the instruction log, one per instruction."),
        AddCounter(registry, labels, "gt_instruction_log_bytes_written_total",
                   "Bytes handed to the instruction log file, newlines included."),
        AddCounter(registry, labels, "gt_instruction_log_rotations_total",
                   "Times the instruction log was moved to <path>.1 to stay within max_file_bytes."),
        AddCounter(registry, labels, "gt_instruction_log_write_errors_total",
                   "Failed writes, flushes, renames or opens of the instruction log."),
        AddCounter(registry, labels, "gt_instruction_log_host_events_total",
                   "Host event lines written (CONNECT, DISCONNECT, WORKER_SEND, SEND, WORKER_DONE)."),
    };
  } catch (const std::exception& e) {
    return InvalidArgument("instruction_log: cannot register metrics: " + std::string(e.what()));
  }
}

// ---- InstructionLogStage ----------------------------------------------------

Result<std::unique_ptr<Stage>> InstructionLogStage::Create(const StageContext& context) {
  if (context.options == nullptr) return Internal("instruction_log: StageContext has no options");
  Result<InstructionLogOptions> options =
      InstructionLogOptions::FromValues(*context.options);
  if (!options.ok()) return options.status();
  Result<std::unique_ptr<InstructionLogStage>> stage = Open(context, std::move(options).value());
  if (!stage.ok()) return stage.status();
  return std::unique_ptr<Stage>(std::move(stage).value());
}

Result<std::unique_ptr<InstructionLogStage>> InstructionLogStage::Open(
    const StageContext& context, InstructionLogOptions options) {
  Result<InstructionLogMetrics> metrics = InstructionLogMetrics::Build(context);
  if (!metrics.ok()) return metrics.status();
  const OpenMode mode = options.append ? OpenMode::kAppend : OpenMode::kTruncate;
  // The constructor is private; make_unique cannot reach it.
  std::unique_ptr<InstructionLogStage> stage(
      new InstructionLogStage(std::move(options), metrics.value(), context));
  if (Status opened = stage->OpenFile(mode); !opened.ok()) return opened;
  stage->WriteHeader();
  return stage;
}

namespace {

// The OPEN line's details: enough to put several hosts' files on one
// timeline (`python3 -m gt.scripts.visualize`): who wrote it, and the wall clock at elapsed 0.
std::string HeaderDetails(const StageContext& context) {
  const double unix_seconds =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  char start[64];
  std::snprintf(start, sizeof start, "%.6f", unix_seconds);
  return "instruction_log host=" + std::string(HostKindName(context.host)) +
         " instance=" + context.instance + " stage=" + context.stage +
         " pid=" + std::to_string(::getpid()) + " start_unix=" + start;
}

}  // namespace

InstructionLogStage::InstructionLogStage(InstructionLogOptions options,
                                         InstructionLogMetrics metrics, const StageContext& context)
    : options_(std::move(options)),
      metrics_(metrics),
      event_(EventFor(context.host)),
      start_(std::chrono::steady_clock::now()),
      host_(std::string(HostKindName(context.host)) + " " + context.instance),
      header_(HeaderDetails(context)),
      buffer_(new char[kBufferBytes]) {}

InstructionLogStage::~InstructionLogStage() { CloseFile(); }

Status InstructionLogStage::OpenFile(OpenMode mode) {
  // "e": O_CLOEXEC, so a backend that spawns processes does not leak the fd.
  std::FILE* file = std::fopen(options_.path.c_str(), mode == OpenMode::kAppend ? "ae" : "we");
  if (file == nullptr) {
    const int error = errno;
    return InvalidArgument("instruction_log: cannot open '" + options_.path +
                           "': " + std::strerror(error));
  }
  // Must precede any other operation on the stream; fixes the memory used.
  std::setvbuf(file, buffer_.get(), _IOFBF, kBufferBytes);
  file_bytes_ = 0;
  // Appending: the existing contents count toward max_file_bytes.
  if (mode == OpenMode::kAppend && std::fseek(file, 0, SEEK_END) == 0) {
    const long end = std::ftell(file);
    if (end > 0) file_bytes_ = static_cast<uint64_t>(end);
  }
  file_ = file;
  return Status::Ok();
}

void InstructionLogStage::CloseFile() {
  if (file_ == nullptr) return;
  if (std::fclose(file_) != 0) CountWriteError();
  file_ = nullptr;
  unflushed_lines_ = 0;
}

Status InstructionLogStage::Process(Instruction&& inst, Emitter& out) {
  if (inst.op == Op::kMembership) {  // the host's own announcement, not a client's instruction
    out.Emit(std::move(inst));
    return Status::Ok();
  }
  in_pass_ = true;
  FormatLine(inst);
  WriteLine();
  out.Emit(std::move(inst));
  return Status::Ok();
}

Status InstructionLogStage::EndBatch(Emitter& out) {
  (void)out;
  in_pass_ = false;
  if (file_ == nullptr) {
    // A reopen after rotation failed; try again once per batch rather than
    // once per line. Appending: the path may have been recreated meanwhile.
    if (!OpenFile(OpenMode::kAppend).ok()) CountWriteError();
    return Status::Ok();
  }
  Flush();
  return Status::Ok();
}

void InstructionLogStage::FormatPrefix(std::string_view event, std::string_view source,
                                       std::string_view command, size_t bytes) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char prefix[96];
  const int n = std::snprintf(prefix, sizeof prefix, "%11.6fs | #%06llu | %-*.*s | ", elapsed,
                              static_cast<unsigned long long>(line_seq_), kEventWidth,
                              static_cast<int>(event.size()), event.data());
  // Every field above is bounded, so n < sizeof prefix; clamp regardless.
  line_.assign(prefix, n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof prefix - 1));
  // Source and command may be longer than their columns (a worker's name).
  line_ += source;
  if (source.size() < kSourceWidth) line_.append(kSourceWidth - source.size(), ' ');
  line_ += " | ";
  line_ += command;
  if (command.size() < kCommandWidth) line_.append(kCommandWidth - command.size(), ' ');
  char tail[48];
  const int m = std::snprintf(tail, sizeof tail, " | %*zuB | ", kBytesWidth, bytes);
  line_.append(tail, m < 0 ? 0 : std::min<size_t>(static_cast<size_t>(m), sizeof tail - 1));
  // Counted even if the write then fails: a gap in #<seq> shows lost lines.
  ++line_seq_;
}

void InstructionLogStage::FormatLine(const Instruction& inst) {
  char source[32];
  std::snprintf(source, sizeof source, "client %llu",
                static_cast<unsigned long long>(inst.client));
  FormatPrefix(event_, source, OpName(inst.op), inst.payload ? inst.payload->size() : 0);
  line_ += inst.Describe();
  line_ += '\n';
}

// `text` with control characters as \xNN and '|' as '/': the log's
// columns are split on " | ".
std::string InstructionLogStage::OneLine(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '|') {
      out.push_back('/');
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out.append(escaped);
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

void InstructionLogStage::OnHostEvent(const HostEvent& event) {
  try {
    // A peer's name and an error's text come from elsewhere: one event stays
    // one line, and its columns stay columns.
    FormatPrefix(HostEventName(event.kind), OneLine(event.peer),
                 event.inst ? OpName(event.inst->op) : event.command, event.bytes);
    if (event.inst) line_ += event.inst->Describe();
    if (!event.detail.empty()) {
      if (event.inst) line_ += ' ';
      line_ += OneLine(event.detail);
    }
    if (event.seconds >= 0) {
      char took[48];
      std::snprintf(took, sizeof took, " took=%.6fs", event.seconds);
      line_ += took;
    }
    line_ += '\n';
    if (WriteLineCounted()) metrics_.host_events->Increment();
    // Outside a pass (a reply to a client, a connect, what a later stage
    // emits from its own EndBatch) no EndBatch of this stage follows soon:
    // the line must not wait in the buffer for the next batch.
    if (!in_pass_) Flush();
  } catch (const std::exception&) {  // bad_alloc: the line is lost, the host goes on
    CountWriteError();
  }
}

void InstructionLogStage::WriteHeader() {
  if (file_ == nullptr) return;
  FormatPrefix("OPEN", host_, "-", 0);
  line_ += header_;
  line_ += '\n';
  (void)AppendLine();
}

// Writes line_ to the open file and counts its bytes; false (counted as a
// write error) when it did not all go.
bool InstructionLogStage::AppendLine() {
  const size_t written = std::fwrite(line_.data(), 1, line_.size(), file_);
  file_bytes_ += written;
  metrics_.bytes_written->Increment(static_cast<double>(written));
  if (written == line_.size()) return true;
  CountWriteError();
  std::clearerr(file_);
  return false;
}

void InstructionLogStage::WriteLine() {
  if (WriteLineCounted()) metrics_.lines->Increment();
}

bool InstructionLogStage::WriteLineCounted() {
  const uint64_t limit = static_cast<uint64_t>(options_.max_file_bytes);
  // Rotate before the write, so a file never passes the limit unless one line
  // alone is longer than it.
  if (limit > 0 && file_bytes_ > 0 && file_bytes_ + line_.size() > limit) Rotate();
  if (file_ == nullptr) {
    CountWriteError();
    return false;
  }
  if (!AppendLine()) return false;
  if (++unflushed_lines_ >= options_.flush_every) Flush();
  return true;
}

void InstructionLogStage::Rotate() {
  CloseFile();
  const std::string old_path = options_.path + ".1";
  // rename() replaces old_path atomically. If it fails, appending to the
  // current file keeps every line at the cost of the disk bound.
  const bool renamed = std::rename(options_.path.c_str(), old_path.c_str()) == 0;
  if (!OpenFile(renamed ? OpenMode::kTruncate : OpenMode::kAppend).ok()) {
    CountWriteError();
    return;
  }
  if (!renamed) {
    CountWriteError();
    // Retry only after another max_file_bytes, not on every following line.
    file_bytes_ = 0;
    return;
  }
  metrics_.rotations->Increment();
  // The new file is read alone: it gets its own OPEN line. line_ holds the
  // line that caused the rotation; keep it.
  std::string pending;
  pending.swap(line_);
  WriteHeader();
  line_.swap(pending);
}

void InstructionLogStage::Flush() {
  unflushed_lines_ = 0;
  if (file_ == nullptr) return;
  if (std::fflush(file_) != 0) {
    CountWriteError();
    std::clearerr(file_);
  }
}

void InstructionLogStage::CountWriteError() const { metrics_.write_errors->Increment(); }

}  // namespace gt::instruction_log
