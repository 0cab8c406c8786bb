// The GT_* list (gt/settings.h) and its one parsing rule. The only file of gt
// that calls getenv.
#include "gt/settings.h"

#include <array>
#include <cassert>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace gt {
namespace {

constexpr double kNoRange = 0;

// README order. Each default is written here and nowhere else (a plugin
// option's in its OptionSpec).
constexpr SettingSpec kSettings[] = {
    {"GT_WORKERS", SettingType::kInt, "2", 1, 4096, nullptr,
     "number of workers of the embedded default (`gt::workers(n)` / `gt.gpu_workers(n)` win over it)"},
    {"GT_INTRA_OP_THREADS", SettingType::kInt, "0", 0, 256, nullptr,
     "LibTorch intra-op and OpenBLAS threads of the embedded workers (process-wide); `0` keeps the libraries' "
     "defaults"},
    {"GT_BUSY_WAIT_US", SettingType::kInt, "50", 0, 10000, nullptr,
     "microseconds the embedded default's dispatcher and worker threads keep polling (yielding the CPU between "
     "polls) before they sleep, after a sync point passes through them, and a client connected to a dispatcher "
     "(`gt.connect`) while it waits for a reply: the round trip's next message is usually that near, and waking a "
     "thread costs about as much again; `0` turns it off; at most 10000 (`docs/performance/round-trip.md`)"},
    {"GT_CONFIG", SettingType::kText, nullptr, kNoRange, kNoRange, nullptr,
     "a YAML signal-config file loaded at `import gt` (and by the C++ client on first use), as `gt.load_config` "
     "would"},
    {"GT_AUTO_SHARD", SettingType::kSwitch, nullptr, kNoRange, kNoRange, "sharding auto_shard",
     "switch: tensors created outside any configured scope are sharded on axis 0 over every live worker when that "
     "size divides evenly, else replicated"},
    {"GT_EXPLAIN", SettingType::kSwitch, nullptr, kNoRange, kNoRange, "sharding explain",
     "switch: the sharding stage logs each op's input placements, output placement and collectives to stderr as "
     "`gt explain:` lines"},
    {"GT_CHECKPOINT_ROOT", SettingType::kText, "/tmp/gt-checkpoints", kNoRange, kNoRange, "sharding checkpoint_root",
     "directory: workers write and read distributed checkpoints (gt.distributed.checkpoint) only under it; a "
     "checkpoint_id outside it is refused. Every worker must reach it at the same path (a shared filesystem across "
     "machines)"},
    {"GT_INSTRUCTION_LOG", SettingType::kText, nullptr, kNoRange, kNoRange, "instruction_log path",
     "file: the embedded dispatcher runs the instruction-log stage and writes every instruction there; elsewhere it "
     "replaces the stage's `path`"},
    {"GT_COMPILE", SettingType::kSwitch, nullptr, kNoRange, kNoRange, nullptr,
     "switch: on, the client runs the hotpath and compile stages on its own stream (and a dispatcher started "
     "without a manifest, embedded or `gt-dispatcher`, gets them too), and a compile scope is required: one that "
     "reaches a dispatcher without the compile stage is an error; unset: compile scopes are hints; off: eager "
     "whatever `GT_WORKER_BATCH_SIZE` says, compile scopes included"},
    {"GT_WORKER_BATCH_SIZE", SettingType::kInt, nullptr, kNoRange, kNoRange, "compile batch_size",
     "`1` compiles only marked sequences; N > 1 also groups unmarked runs of up to N instructions into units, and "
     "on its own turns the compile stages on as `GT_COMPILE=1` does"},
    {"GT_CLIENT_MANIFEST", SettingType::kText, nullptr, kNoRange, kNoRange, nullptr,
     "a `host: client` manifest whose stages the client runs on its stream before sending it "
     "(`configs/client-compile.yaml`)"},
    {"GT_HOTPATH_WINDOW", SettingType::kInt, nullptr, kNoRange, kNoRange, "hotpath window",
     "instructions of history in which the hot-path detector counts repetitions"},
    {"GT_HOTPATH_THRESHOLD", SettingType::kInt, nullptr, kNoRange, kNoRange, "hotpath threshold",
     "occurrences within the window that make a sequence hot"},
    {"GT_HOTPATH_MIN_SEQ", SettingType::kInt, nullptr, kNoRange, kNoRange, "hotpath min_length",
     "shortest sequence worth marking, in instructions"},
    {"GT_HOTPATH_MAX_EXPAND", SettingType::kInt, nullptr, kNoRange, kNoRange, "hotpath max_length",
     "longest sequence marked; longer runs are cut"},
    {"GT_PLUGIN_PATH", SettingType::kText, nullptr, kNoRange, kNoRange, nullptr,
     "`:`-separated directories searched for plugins first, before the one beside `libgt_core`, the install "
     "directory and the build tree's"},
    {"GT_LOCAL_IPC", SettingType::kSwitch, "true", kNoRange, kNoRange, nullptr,
     "switch: a dispatcher on a loopback or IPv4-wildcard tcp port P also binds "
     "`ipc:///tmp/gt-dispatcher-<netns>-P.sock`, and a client's `localhost:P` / a worker's `tcp://127.0.0.1:P` use "
     "it when it listens; off keeps every one of them on tcp (README \"Running a cluster\")"},
    {"GT_CONNECT_TIMEOUT", SettingType::kSeconds, "5", 0, 86400, nullptr,
     "seconds a client of a running dispatcher (`gt::connect`, `gt.connect`) waits at a sync point for its first "
     "connection to it (a completed ZeroMQ handshake) before failing with `unavailable` naming the address; `0` "
     "waits forever. A connection that closes later is taken to a dispatcher at the same address within "
     "`GT_RECONNECT_GRACE`, or fails the session's sync points; a connected dispatcher is waited for however "
     "long its work takes",
     "seconds from 0 (wait forever) to 86400"},
    {"GT_RECONNECT_GRACE", SettingType::kSeconds, "60", 0, 86400, nullptr,
     "seconds a client of a running dispatcher that lost its connection to it keeps trying to give its session to "
     "a dispatcher at the same address (a restarted one) before its next sync point fails naming what was lost; "
     "`0` fails at once, as before (docs/CLUSTER.md, \"When the dispatcher restarts\")",
     "seconds from 0 (fail at once) to 86400"},
    {"GT_CLIENT_KEY", SettingType::kText, nullptr, kNoRange, kNoRange, nullptr,
     "this client's CURVE key pair file (`gt keygen NAME` writes `NAME.key`) for a dispatcher that authenticates "
     "its clients; its `.pub` must be on the dispatcher's clients list (`docs/SECURITY.md`)"},
    {"GT_SERVER_KEY", SettingType::kText, nullptr, kNoRange, kNoRange, nullptr,
     "the dispatcher's public key file (`dispatcher.pub`); with `GT_CLIENT_KEY`, the client connects over CURVE "
     "and fails at once, naming the reason, when the dispatcher refuses its key or requires one"},
    {"GT_INSECURE", SettingType::kSwitch, "false", kNoRange, kNoRange, nullptr,
     "switch: a client of a dispatcher on this machine connects without keys, to one started with `--insecure`; "
     "off (and without `GT_CLIENT_KEY`), it uses this user's default key set (`~/.config/gt/keys`, "
     "`docs/SECURITY.md`), as that user's `gt cluster`, `gt-dispatcher` and `gt-worker` do"},
    {"GT_BIN_DIR", SettingType::kText, nullptr, kNoRange, kNoRange, nullptr,
     "where `python -m gt.server` / `python -m gt.worker` look first for `gt-dispatcher` / `gt-worker` (then next "
     "to the package, then `PATH`)"},
    {"GT_VERBOSE", SettingType::kSwitch, "false", kNoRange, kNoRange, nullptr,
     "switch: every `GT_DEBUG_*` part below at once (`docs/DEBUGGING.md`)"},
    {"GT_DEBUG_CLIENT", SettingType::kSwitch, "false", kNoRange, kNoRange, nullptr,
     "switch: the client's connects, batches sent, syncs waited and errors received, as `gt:client` lines on "
     "stderr (at most 100 a second per part)"},
    {"GT_DEBUG_DISPATCHER", SettingType::kSwitch, "false", kNoRange, kNoRange, nullptr,
     "switch: the dispatcher's client and worker connects and losses, batches received and sent, each op's "
     "placement, as `gt:dispatcher` lines"},
    {"GT_DEBUG_WORKER", SettingType::kSwitch, "false", kNoRange, kNoRange, nullptr,
     "switch: a worker's registration, batches received, each op run with its time, errors, as `gt:worker` lines"},
    {"GT_DEBUG_COMPILE", SettingType::kSwitch, "false", kNoRange, kNoRange, nullptr,
     "switch: hot sequences found, units defined, cache hits and misses, replays given up, as `gt:compile` lines "
     "(on whichever host runs the stages)"},
};

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::string Expects(const SettingSpec& spec) {
  if (spec.expects != nullptr) return spec.expects;
  std::ostringstream out;
  out << (spec.type == SettingType::kInt ? "an integer" : "seconds");
  if (spec.option == nullptr) out << " from " << spec.min << " to " << spec.max;
  return out.str();
}

Status Bad(const SettingSpec& spec, std::string_view text) {
  return InvalidArgument(std::string(spec.name) + ": expected " + Expects(spec) + ", got '" + std::string(text) + "'");
}

const SettingSpec& Declared(std::string_view name, SettingType type) {
  const SettingSpec* spec = FindSetting(name);
  assert(spec != nullptr && spec->type == type && "GT_* variable not declared with this type in kSettings");
  (void)type;
  return *spec;
}

// The set text, else the default; nullopt when neither.
std::optional<std::string> TextOrDefault(const SettingSpec& spec) {
  std::optional<std::string> text = EnvironmentText(spec.name);
  if (!text && spec.default_value != nullptr) return std::string(spec.default_value);
  return text;
}

Result<int64_t> ParseInt(const SettingSpec& spec, std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return Bad(spec, text);
  // A plugin option's range is the option's, checked when its stage loads.
  if (spec.option == nullptr && (v < spec.min || v > spec.max)) return Bad(spec, text);
  return v;
}

Result<double> ParseSeconds(const SettingSpec& spec, std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || *end != '\0' || !std::isfinite(v) || v < spec.min || v > spec.max)
    return Bad(spec, text);
  return v;
}

}  // namespace

std::string_view SettingTypeName(SettingType type) {
  switch (type) {
    case SettingType::kSwitch: return "switch";
    case SettingType::kInt: return "int";
    case SettingType::kSeconds: return "seconds";
    case SettingType::kText: return "text";
  }
  return "?";
}

std::span<const SettingSpec> AllSettings() { return kSettings; }

const SettingSpec* FindSetting(std::string_view name) {
  for (const SettingSpec& spec : kSettings)
    if (name == spec.name) return &spec;
  return nullptr;
}

std::optional<std::string> EnvironmentText(std::string_view name) {
  const char* text = std::getenv(std::string(name).c_str());
  if (text == nullptr || *text == '\0') return std::nullopt;
  return std::string(text);
}

Result<bool> ParseSwitch(std::string_view name, std::string_view text) {
  const std::string lower = Lower(text);
  if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return false;
  return InvalidArgument(std::string(name) + ": expected a switch (1, true, yes, on or 0, false, no, off), got '" +
                         std::string(text) + "'");
}

Result<std::optional<bool>> SwitchIfSet(std::string_view name) {
  const SettingSpec& spec = Declared(name, SettingType::kSwitch);
  std::optional<std::string> text = TextOrDefault(spec);
  if (!text) return std::optional<bool>();
  Result<bool> on = ParseSwitch(spec.name, *text);
  if (!on.ok()) return on.status();
  return std::optional<bool>(*on);
}

Result<bool> SwitchSetting(std::string_view name) {
  Result<std::optional<bool>> on = SwitchIfSet(name);
  if (!on.ok()) return on.status();
  return on->value_or(false);
}

Result<std::optional<int64_t>> IntIfSet(std::string_view name) {
  const SettingSpec& spec = Declared(name, SettingType::kInt);
  std::optional<std::string> text = TextOrDefault(spec);
  if (!text) return std::optional<int64_t>();
  Result<int64_t> v = ParseInt(spec, *text);
  if (!v.ok()) return v.status();
  return std::optional<int64_t>(*v);
}

Result<int64_t> IntSetting(std::string_view name) {
  Result<std::optional<int64_t>> v = IntIfSet(name);
  if (!v.ok()) return v.status();
  assert(v->has_value() && "IntSetting of a variable without a default");
  return v->value_or(0);
}

Result<double> SecondsSetting(std::string_view name) {
  const SettingSpec& spec = Declared(name, SettingType::kSeconds);
  return ParseSeconds(spec, TextOrDefault(spec).value_or("0"));
}

std::optional<std::string> TextSetting(std::string_view name) {
  return TextOrDefault(Declared(name, SettingType::kText));
}

Status CheckSettings() {
  for (const SettingSpec& spec : kSettings) {
    if (spec.option != nullptr) continue;
    std::optional<std::string> text = EnvironmentText(spec.name);
    if (!text) continue;
    Status s;
    switch (spec.type) {
      case SettingType::kSwitch: s = ParseSwitch(spec.name, *text).status(); break;
      case SettingType::kInt: s = ParseInt(spec, *text).status(); break;
      case SettingType::kSeconds: s = ParseSeconds(spec, *text).status(); break;
      case SettingType::kText: break;
    }
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace gt
