// Signal configs of this client: validation, the YAML reader, and the hand-over
// to the session, which sends them to the dispatcher (see gt/config.h).
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "gt/gt.h"
#include "session.h"

namespace gt {
namespace {

constexpr const char* kSignalKeys = "shard, replicated, backward, compile";
constexpr const char* kShardKeys = "axis, workers";

// Problems of `config` in itself, each as "PATH: what" with PATH under `where`.
std::vector<std::string> Problems(const std::string& where, const SignalConfig& config) {
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
  return out;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "\n  " + l;
  return out;
}

std::string At(const std::string& source, const YAML::Node& node, const std::string& path) {
  const YAML::Mark mark = node.Mark();
  return source + (mark.line >= 0 ? ":" + std::to_string(mark.line + 1) : "") + ": " + path;
}

// Reads an int scalar; nullopt (and a problem) for anything else.
std::optional<int64_t> ReadInt(const YAML::Node& node, const std::string& where, std::vector<std::string>& problems) {
  if (node.IsScalar()) {
    try {
      const std::string text = node.Scalar();
      size_t used = 0;
      int64_t value = std::stoll(text, &used, 0);
      if (used == text.size()) return value;
    } catch (...) {
    }
  }
  problems.push_back(where + ": expected an int, got " + (node.IsScalar() ? "'" + node.Scalar() + "'" : "a collection"));
  return std::nullopt;
}

std::optional<bool> ReadBool(const YAML::Node& node, const std::string& where, std::vector<std::string>& problems) {
  if (node.IsScalar()) {
    const std::string& t = node.Scalar();
    if (t == "true" || t == "True" || t == "TRUE") return true;
    if (t == "false" || t == "False" || t == "FALSE") return false;
  }
  problems.push_back(where + ": expected true or false, got " + (node.IsScalar() ? "'" + node.Scalar() + "'" : "a collection"));
  return std::nullopt;
}

std::vector<std::string> LoadDocument(const YAML::Node& root, const std::string& source) {
  std::vector<std::string> problems;
  std::vector<std::pair<std::string, SignalConfig>> found;
  if (!root || root.IsNull()) return {};
  if (!root.IsMap()) throw Error(Code::kInvalidArgument, source + ": expected a mapping of signal names to configs");
  for (const auto& entry : root) {
    const std::string name = entry.first.Scalar();
    const YAML::Node& body = entry.second;
    const size_t before = problems.size();
    SignalConfig config;
    if (name.empty()) {
      problems.push_back(At(source, entry.first, "<key>") + ": a signal name must be a non-empty string");
      continue;
    }
    if (!body.IsNull() && !body.IsMap()) {
      problems.push_back(At(source, body, name) + ": expected a mapping with keys " + kSignalKeys);
      continue;
    }
    for (const auto& field : body) {
      const std::string key = field.first.Scalar();
      const YAML::Node& value = field.second;
      const std::string where = At(source, field.first, name + "." + key);
      if (key == "shard") {
        if (!value.IsMap()) {
          problems.push_back(where + ": expected a mapping with keys " + kShardKeys);
          continue;
        }
        ShardConfig shard;
        for (const auto& s : value) {
          const std::string skey = s.first.Scalar();
          const std::string swhere = At(source, s.first, name + ".shard." + skey);
          if (skey == "axis") {
            if (auto axis = ReadInt(s.second, swhere, problems)) shard.axis = *axis;
          } else if (skey == "workers") {
            if (!s.second.IsSequence()) {
              problems.push_back(swhere + ": expected a list of worker indexes");
              continue;
            }
            for (size_t i = 0; i < s.second.size(); ++i)
              if (auto w = ReadInt(s.second[i], swhere + "[" + std::to_string(i) + "]", problems))
                shard.workers.push_back(static_cast<int>(*w));
          } else {
            problems.push_back(swhere + ": unknown key '" + skey + "' (known: " + kShardKeys + ")");
          }
        }
        config.shard = shard;
      } else if (key == "replicated") {
        if (auto b = ReadBool(value, where, problems)) config.replicated = *b;
      } else if (key == "compile") {
        if (auto b = ReadBool(value, where, problems)) config.compile = *b;
      } else if (key == "backward") {
        if (!value.IsScalar() || value.Scalar().empty())
          problems.push_back(where + ": expected a signal name");
        else
          config.backward = value.Scalar();
      } else {
        problems.push_back(where + ": unknown key '" + key + "' (known: " + kSignalKeys + ")");
      }
    }
    for (const std::string& p : Problems(At(source, entry.first, name), config)) problems.push_back(p);
    if (problems.size() == before) found.emplace_back(name, std::move(config));
  }
  // A backward signal must be defined in the file or registered already.
  for (const auto& [name, config] : found) {
    if (config.backward.empty()) continue;
    bool known = client_internal::Session::Get()->GetConfig(config.backward).has_value();
    for (const auto& other : found) known = known || other.first == config.backward;
    if (!known)
      problems.push_back(At(source, root[name]["backward"], name + ".backward") + ": unknown signal '" +
                         config.backward + "' (not in this file and not registered)");
  }
  if (!problems.empty())
    throw Error(Code::kInvalidArgument, source + ": " + std::to_string(problems.size()) + " problem" +
                                            (problems.size() == 1 ? "" : "s") + ":" + Join(problems));
  std::vector<std::string> names;
  for (auto& [name, config] : found) {
    client_internal::Session::Get()->SetConfig(name, config);
    names.push_back(name);
  }
  return names;
}

}  // namespace

void register_config(const std::string& name, const SignalConfig& config) {
  if (name.empty()) throw Error(Code::kInvalidArgument, "register_config: a signal needs a non-empty name");
  std::vector<std::string> problems = Problems(name, config);
  if (!problems.empty())
    throw Error(Code::kInvalidArgument, "invalid config for signal '" + name + "':" + Join(problems));
  client_internal::Session::Get()->SetConfig(name, config);
}

std::vector<std::string> load_config(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw Error(Code::kNotFound, "load_config: cannot read " + path);
  } catch (const YAML::Exception& e) {
    throw Error(Code::kInvalidArgument, path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return LoadDocument(root, path);
}

std::vector<std::string> load_config_string(const std::string& yaml, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw Error(Code::kInvalidArgument, source + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return LoadDocument(root, source);
}

std::optional<SignalConfig> get_config(const std::string& name) {
  return client_internal::Session::Get()->GetConfig(name);
}

void clear_configs() { client_internal::Session::Get()->ClearConfigs(); }

namespace client_internal {

void LoadEnvConfigOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* path = std::getenv("GT_CONFIG");
    if (path && *path) load_config(path);
  });
}

}  // namespace client_internal

}  // namespace gt
