// Signal configs: how tensors and ops inside a named signal scope are placed.
//
//   gt::register_config("data_parallel", {.shard = gt::ShardConfig{0, {0, 1, 2, 3}}});
//   gt::load_config("config.yaml");     // or GT_CONFIG=config.yaml
//   { gt::SignalScope scope("data_parallel"); gt::Tensor x = gt::randn({128, 64}); }
//
// The YAML format (the seeds' signal guide):
//
//   forward_layer1:
//     shard: {axis: 0, workers: [0, 1, 2, 3]}   # split dim `axis` over these worker indexes
//     backward: backward_layer1                 # the config the gradient computation uses
//     compile: true                             # a compile boundary
//   params:
//     replicated: true                          # a full copy on every worker
//
// Or, with DTensor's names (gt/distributed.h), a device mesh for the file and
// one placement per mesh axis for a signal (`mesh` names no signal):
//
//   mesh: {workers: [[0, 1], [2, 3]], axes: [data, model]}   # or a flat list
//   batch:
//     placements: [shard(0), shard(0)]          # as shard: {axis: 0, workers: [0, 1, 2, 3]}
//   weights:
//     placements: [replicate, replicate]        # a copy on each mesh worker
//
// Configs belong to the client: they are kept by this process's session and
// sent to the dispatcher, which keeps them per client, so two clients may
// give one signal name different configs. What can only be checked where the
// config is used (a worker index beyond the live workers, an axis beyond a
// tensor's rank) is reported at the next sync point, naming the signal and
// the field; a backward signal with no config is refused when a scope using
// it opens (gt::signal_enter).
//
// Backward signals: backward() computes the gradients of an op recorded in a
// scope with a backward signal inside that signal's scope, so they run on
// its workers (pipeline parallelism). Without one they follow the placement
// of their inputs, in the scope backward() is called from.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gt {

struct ShardConfig {
  int64_t axis = 0;          // the dimension split across workers; negative counts from the end
  std::vector<int> workers;  // worker indexes, in shard order; empty: every live worker
};

// A layout on a 2-D mesh with a placement per mesh axis: what
// gt::distributed::signal_config makes of [Shard(0), Replicate()] and the
// like (placements alike on both axes are a ShardConfig or replicated).
struct MeshConfig {
  int64_t rows = 0;
  int64_t columns = 0;
  std::vector<int> workers;                        // rows * columns, row-major
  std::vector<std::optional<int64_t>> shard_dims;  // per mesh axis: the dim it cuts (Shard); nullopt: copies
  std::vector<std::string> axis_names;             // the mesh's (not sent: the dispatcher needs none)
  friend bool operator==(const MeshConfig&, const MeshConfig&) = default;
};

struct SignalConfig {
  std::optional<ShardConfig> shard;  // split tensors made in the scope
  bool replicated = false;           // a full copy on every live worker (or `replicas`); excludes `shard`
  std::vector<int> replicas;         // with `replicated`: the workers holding a copy; empty: every live one
  std::string backward;              // the signal whose config gradients use; "" for none
  bool compile = false;              // a compile boundary
  // Tensors made in the scope laid out on a 2-D mesh (zeros and ones piece
  // by piece; others made whole on the mesh's first worker, then copied and
  // cut; a dim too short to cut is copied along that axis); other ops in
  // the scope follow their operands' placements. Excludes `shard` and
  // `replicated`.
  std::optional<MeshConfig> mesh;
};

// Sets the config of signal `name`, replacing any earlier one, and sends it
// to the dispatcher (now, or when the session starts). Throws gt::Error
// (invalid_argument) naming the signal and the field for a config that is
// wrong in itself (negative or repeated worker index, shard with replicated).
void register_config(const std::string& name, const SignalConfig& config);

// Reads every signal config of a YAML file and registers them all; nothing
// is registered if any has a problem, and the gt::Error lists every problem
// as "FILE:LINE: PATH: what". Returns the signal names read, in file order.
// A `backward` naming a signal that is neither in the file nor registered is
// such a problem. The file GT_CONFIG names is read the same way at session
// start except for that one check (as the Python package reads it): the
// predecessor's README config names a backward signal it never defines, and
// opening a scope that uses such a config fails then (gt::signal_enter).
std::vector<std::string> load_config(const std::string& path);
// load_config for YAML text; `source` names it in errors.
std::vector<std::string> load_config_string(const std::string& yaml, const std::string& source = "<string>");

// Signal configs read from YAML and checked, not registered.
struct ParsedConfigs {
  std::vector<std::pair<std::string, SignalConfig>> signals;  // the valid ones, in file order
  std::vector<std::string> problems;  // every problem, as "SOURCE:LINE: PATH: what"; empty when all are valid
};
// The YAML reader of load_config, registering nothing: every signal config
// of `yaml` with every problem found (text that is not YAML is one problem,
// "SOURCE:LINE:COLUMN: invalid YAML: what"). It checks each config in itself
// only; load_config also refuses a `backward` signal that is neither in the
// text nor registered. Never throws.
ParsedConfigs parse_config_string(const std::string& yaml, const std::string& source = "<string>");

// The config registered for `name`, if any.
std::optional<SignalConfig> get_config(const std::string& name);
// Forgets every config of this client (here and at the dispatcher).
void clear_configs();

}  // namespace gt
