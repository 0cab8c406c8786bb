// Signal configs of this client: validation and the hand-over to the
// session, which sends them to the dispatcher (see gt/config.h). The YAML
// reader is config_yaml.cc.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "config_yaml.h"
#include "gt/gt.h"
#include "gt/settings.h"
#include "session.h"

namespace gt {
namespace client_internal {

// Problems of `config` in itself, each as "PATH: what" with PATH under `where`.
std::vector<std::string> ConfigProblems(const std::string& where, const SignalConfig& config) {
  std::vector<std::string> out;
  if (config.shard) {
    std::set<int> seen;
    const std::vector<int>& workers = config.shard->workers;
    for (size_t i = 0; i < workers.size(); ++i) {
      if (workers[i] < 0)
        out.push_back(where + ".shard.workers[" + std::to_string(i) + "]: worker index must be >= 0, got " +
                      std::to_string(workers[i]));
      else if (!seen.insert(workers[i]).second)
        out.push_back(where + ".shard.workers: lists worker " + std::to_string(workers[i]) + " twice");
    }
    if (config.replicated) out.push_back(where + ": shard and replicated: true exclude each other");
  }
  if (!config.replicas.empty() && !config.replicated) out.push_back(where + ".replicas: only with replicated: true");
  if (config.mesh && (config.shard || config.replicated))
    out.push_back(where + ": a mesh layout excludes shard and replicated");
  if (config.mesh) {
    const MeshConfig& m = *config.mesh;
    if (m.rows < 1 || m.columns < 1 || m.workers.size() != static_cast<size_t>(m.rows * m.columns) ||
        m.shard_dims.size() != 2)
      out.push_back(where + ".mesh: expected rows * columns workers and a placement per mesh axis (2)");
    for (size_t i = 0; i < m.workers.size(); ++i)
      if (m.workers[i] < 0 || std::find(m.workers.begin(), m.workers.begin() + static_cast<std::ptrdiff_t>(i),
                                        m.workers[i]) != m.workers.begin() + static_cast<std::ptrdiff_t>(i))
        out.push_back(where + ".mesh.workers: worker " + std::to_string(m.workers[i]) + " is negative or repeated");
  }
  for (size_t i = 0; i < config.replicas.size(); ++i) {
    if (config.replicas[i] < 0)
      out.push_back(where + ".replicas[" + std::to_string(i) + "]: worker index must be >= 0, got " +
                    std::to_string(config.replicas[i]));
    else if (std::find(config.replicas.begin(), config.replicas.begin() + static_cast<std::ptrdiff_t>(i),
                       config.replicas[i]) != config.replicas.begin() + static_cast<std::ptrdiff_t>(i))
      out.push_back(where + ".replicas: lists worker " + std::to_string(config.replicas[i]) + " twice");
  }
  return out;
}

std::string JoinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "\n  " + l;
  return out;
}

}  // namespace client_internal

namespace {

using client_internal::ConfigProblems;
using client_internal::JoinLines;
using client_internal::OneLine;
using client_internal::ParseConfigYaml;
using client_internal::ProblemAt;
using client_internal::Summary;

// When a `backward` naming a signal without a config is refused.
enum class UnknownBackward {
  kRefuseAtLoad,     // gt::load_config: the file is refused, naming the key's line
  kRefuseAtScopeOpen  // GT_CONFIG: the file loads (the predecessor's README config names a
                     // backward signal it never defines); opening a scope that uses it fails
};

// Registers every config of `yaml` (see load_config).
std::vector<std::string> Load(const std::string& yaml, const std::string& source,
                              UnknownBackward unknown_backward = UnknownBackward::kRefuseAtLoad) {
  YAML::Node root;
  ParsedConfigs parsed = ParseConfigYaml(yaml, source, root);
  // A backward signal must be defined in the file or registered already.
  for (const auto& [name, config] : parsed.signals) {
    if (config.backward.empty() || unknown_backward == UnknownBackward::kRefuseAtScopeOpen) continue;
    bool known = client_internal::Session::Get()->GetConfig(config.backward).has_value();
    for (const auto& other : parsed.signals) known = known || other.first == config.backward;
    if (!known)
      parsed.problems.push_back(OneLine(ProblemAt(source, root[name]["backward"], name + ".backward") + ": unknown signal '" +
                                        config.backward + "' (not in this file and not registered)"));
  }
  if (!parsed.problems.empty()) throw Error(Code::kInvalidArgument, Summary(source, parsed.problems));
  std::vector<std::string> names;
  for (auto& [name, config] : parsed.signals) {
    client_internal::Session::Get()->SetConfig(name, config);
    names.push_back(name);
  }
  return names;
}

}  // namespace

void register_config(const std::string& name, const SignalConfig& config) {
  if (name.empty()) throw Error(Code::kInvalidArgument, "register_config: a signal needs a non-empty name");
  std::vector<std::string> problems = ConfigProblems(name, config);
  if (!problems.empty())
    throw Error(Code::kInvalidArgument, "invalid config for signal '" + name + "':" + JoinLines(problems));
  client_internal::Session::Get()->SetConfig(name, config);
}

ParsedConfigs parse_config_string(const std::string& yaml, const std::string& source) {
  YAML::Node root;
  return ParseConfigYaml(yaml, source, root);
}

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(Code::kNotFound, "load_config: cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::vector<std::string> load_config(const std::string& path) { return Load(ReadFile(path), path); }

std::vector<std::string> load_config_string(const std::string& yaml, const std::string& source) {
  return Load(yaml, source);
}

std::optional<SignalConfig> get_config(const std::string& name) {
  return client_internal::Session::Get()->GetConfig(name);
}

void clear_configs() { client_internal::Session::Get()->ClearConfigs(); }

namespace client_internal {

void LoadEnvConfigOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    // As the Python package reads it at import: a backward signal without a
    // config is refused when a scope using it opens, not here.
    if (std::optional<std::string> path = TextSetting("GT_CONFIG"))
      Load(ReadFile(*path), *path, UnknownBackward::kRefuseAtScopeOpen);
  });
}

}  // namespace client_internal

}  // namespace gt
