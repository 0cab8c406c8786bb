// The signal-config YAML reader (gt/config.h, load_config): gt's only reader
// of that YAML. The Python package calls parse_config_string through its
// extension, so both report the same problems in the same words. What a
// config means by itself, and registering it, is config.cc's.
#include "config_yaml.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gt/distributed.h"
#include "gt/gt.h"

namespace gt::client_internal {
namespace {

constexpr const char* kSignalKeys = "shard, replicated, placements, backward, compile";
constexpr const char* kMeshKeys = "workers, axes";
constexpr const char* kShardKeys = "axis, workers, replicated";

// ---- scalar types, matched by hand ------------------------------------------
// std::regex matches recursively, one stack frame per character: a scalar of
// ~100,000 digits overflowed the stack (a thread's smaller stack, such as
// Python's, at less). These run in constant stack on any input.

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsOctal(char c) { return c >= '0' && c <= '7'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Non-empty and every character passes `ok`.
template <typename Pred>
bool AllOf(std::string_view s, Pred ok) {
  return !s.empty() && std::all_of(s.begin(), s.end(), ok);
}

std::string_view WithoutSign(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return s;
}

// Where the run of digits from `at` ends.
size_t DigitsEnd(std::string_view s, size_t at) {
  while (at < s.size() && IsDigit(s[at])) ++at;
  return at;
}

bool IsNullText(std::string_view s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

bool IsBoolText(std::string_view s) {
  return s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE";
}

// [-+]?[0-9]+ | 0o[0-7]+ | 0x[0-9a-fA-F]+
bool IsIntText(std::string_view s) {
  if (s.substr(0, 2) == "0o") return AllOf(s.substr(2), IsOctal);
  if (s.substr(0, 2) == "0x") return AllOf(s.substr(2), IsHex);
  return AllOf(WithoutSign(s), IsDigit);
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? | [-+]?\.(inf|Inf|INF) | \.(nan|NaN|NAN)
bool IsFloatText(std::string_view s) {
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return true;
  s = WithoutSign(s);
  if (s == ".inf" || s == ".Inf" || s == ".INF") return true;
  size_t at = DigitsEnd(s, 0);
  const bool whole = at > 0;
  if (at < s.size() && s[at] == '.') {
    const size_t fraction_end = DigitsEnd(s, at + 1);
    if (!whole && fraction_end == at + 1) return false;  // a '.' with no digit on either side
    at = fraction_end;
  } else if (!whole) {
    return false;
  }
  if (at < s.size() && (s[at] == 'e' || s[at] == 'E')) {
    size_t exponent = at + 1;
    if (exponent < s.size() && (s[exponent] == '-' || s[exponent] == '+')) ++exponent;
    at = DigitsEnd(s, exponent);
    if (at == exponent) return false;
  }
  return at == s.size();
}

// The YAML 1.2 core-schema type of a node: null, bool, int, float or str for
// a scalar (a quoted scalar is always a str), else sequence or mapping.
std::string KindOf(const YAML::Node& node) {
  if (!node || node.IsNull()) return "null";
  if (node.IsSequence()) return "sequence";
  if (node.IsMap()) return "mapping";
  if (node.Tag() == "!") return "str";  // quoted
  const std::string& s = node.Scalar();
  if (IsNullText(s)) return "null";
  if (IsBoolText(s)) return "bool";
  if (IsIntText(s)) return "int";
  if (IsFloatText(s)) return "float";
  return "str";
}

// "str 'zero'", "int 7", "null", "a sequence": what a problem says it got.
std::string Describe(const YAML::Node& node) {
  const std::string kind = KindOf(node);
  if (kind == "null") return "null";
  if (kind == "sequence" || kind == "mapping") return "a " + kind;
  if (kind == "str") return "str '" + node.Scalar() + "'";
  return kind + " " + node.Scalar();
}

}  // namespace

// Where a problem is: "SOURCE:LINE: PATH" (the line of `node`, 1-based).
std::string ProblemAt(const std::string& source, const YAML::Node& node, const std::string& path) {
  const YAML::Mark mark = node.Mark();
  return source + (mark.line >= 0 ? ":" + std::to_string(mark.line + 1) : "") + ": " + path;
}

namespace {

// Reads an int; nullopt (and a problem at `where`) for anything else.
std::optional<int64_t> ReadInt(const YAML::Node& node, const std::string& where, std::vector<std::string>& problems) {
  if (KindOf(node) == "int") {
    const std::string& text = node.Scalar();
    const bool octal = text.rfind("0o", 0) == 0;
    try {
      // Base 10 unless prefixed: YAML's 010 is ten.
      size_t used = 0;
      const int64_t value = octal ? std::stoll(text.substr(2), &used, 8)
                                  : std::stoll(text, &used, text.rfind("0x", 0) == 0 ? 16 : 10);
      if (used + (octal ? 2 : 0) == text.size()) return value;
    } catch (const std::out_of_range&) {
      problems.push_back(where + ": int " + text + " is out of range");
      return std::nullopt;
    }
  }
  problems.push_back(where + ": expected int, got " + Describe(node));
  return std::nullopt;
}

std::optional<bool> ReadBool(const YAML::Node& node, const std::string& where, std::vector<std::string>& problems) {
  if (KindOf(node) == "bool") {
    const char c = node.Scalar()[0];
    return c == 't' || c == 'T';
  }
  problems.push_back(where + ": expected bool, got " + Describe(node));
  return std::nullopt;
}

// The shard mapping of signal `name`; nullopt if it has a problem.
// `replicated` is set by the predecessor's form of a copy on every worker,
// `shard: {replicated: true, workers: ...}` (the workers then hold copies).
std::optional<ShardConfig> ReadShard(const YAML::Node& value, const std::string& name, const std::string& source,
                                     std::vector<std::string>& problems, bool& replicated) {
  const size_t before = problems.size();
  ShardConfig shard;
  std::string axis_where;
  std::string replicated_where;
  for (const auto& s : value) {
    const std::string key = s.first.Scalar();
    const std::string where = ProblemAt(source, s.first, name + ".shard." + key);
    if (key == "axis") {
      axis_where = where;
      if (auto axis = ReadInt(s.second, where, problems)) shard.axis = *axis;
    } else if (key == "replicated") {
      if (auto b = ReadBool(s.second, where, problems)) replicated = *b;
      replicated_where = where;
    } else if (key == "workers") {
      if (s.second.IsNull()) continue;  // every live worker, as when left out
      if (!s.second.IsSequence()) {
        problems.push_back(where + ": expected a list of worker indexes, got " + Describe(s.second));
        continue;
      }
      if (s.second.size() == 0)
        problems.push_back(where + ": expected at least one worker (leave workers out for every live worker)");
      std::set<int64_t> seen;
      for (size_t i = 0; i < s.second.size(); ++i) {
        const YAML::Node item = s.second[i];
        const std::string item_where = ProblemAt(source, item, name + ".shard.workers[" + std::to_string(i) + "]");
        std::optional<int64_t> w = ReadInt(item, item_where, problems);
        if (!w) continue;
        if (*w < 0)
          problems.push_back(item_where + ": worker index must be >= 0, got " + std::to_string(*w));
        else if (*w > INT_MAX)
          problems.push_back(item_where + ": worker index " + std::to_string(*w) + " is out of range");
        else if (!seen.insert(*w).second)
          problems.push_back(where + ": lists worker " + std::to_string(*w) + " twice");
        else
          shard.workers.push_back(static_cast<int>(*w));
      }
    } else {
      problems.push_back(where + ": unknown key '" + key + "' (known: " + kShardKeys + ")");
    }
  }
  // The predecessor's file writes its default axis (0) next to replicated:
  // true; any other axis asks for a split the copies cannot have.
  if (replicated && shard.axis != 0)
    problems.push_back(replicated_where + ": replicated: true keeps whole copies, so axis " +
                       std::to_string(shard.axis) + " (" + axis_where + ") has nothing to split");
  if (problems.size() != before) return std::nullopt;
  return shard;
}

// A list of worker indexes (`node` a sequence); nullopt after a problem.
std::optional<std::vector<int>> ReadWorkers(const YAML::Node& node, const std::string& source, const std::string& path,
                                            std::vector<std::string>& problems) {
  const size_t before = problems.size();
  std::vector<int> workers;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string where = ProblemAt(source, node[i], path + "[" + std::to_string(i) + "]");
    std::optional<int64_t> w = ReadInt(node[i], where, problems);
    if (w && (*w < 0 || *w > INT_MAX)) problems.push_back(where + ": worker index " + std::to_string(*w) + " is out of range");
    else if (w) workers.push_back(static_cast<int>(*w));
  }
  if (problems.size() != before) return std::nullopt;
  return workers;
}

// The file's `mesh:` (gt::distributed::DeviceMesh); nullopt after a problem.
std::optional<distributed::DeviceMesh> ReadMesh(const YAML::Node& key, const YAML::Node& value,
                                                const std::string& source, std::vector<std::string>& problems) {
  const std::string here = ProblemAt(source, key, "mesh");
  if (!value.IsMap()) {
    problems.push_back(here + ": the file's device mesh (mesh names no signal): expected a mapping with keys " +
                       kMeshKeys + ", got " + Describe(value));
    return std::nullopt;
  }
  if (!value["workers"] || !value["workers"].IsSequence() || value["workers"].size() == 0) {
    problems.push_back(here + ".workers: expected a non-empty list of worker indexes, or of rows of them");
    return std::nullopt;
  }
  const size_t before = problems.size();
  for (const auto& field : value)
    if (field.first.Scalar() != "workers" && field.first.Scalar() != "axes")
      problems.push_back(ProblemAt(source, field.first, "mesh." + field.first.Scalar()) + ": unknown key '" +
                         field.first.Scalar() + "' (known: " + kMeshKeys + ")");
  const YAML::Node workers = value["workers"];
  const bool grid = workers[0].IsSequence();
  std::vector<std::vector<int>> rows;
  for (size_t r = 0; r < (grid ? workers.size() : 1); ++r) {
    const YAML::Node row = grid ? workers[r] : workers;
    const std::string path = grid ? "mesh.workers[" + std::to_string(r) + "]" : "mesh.workers";
    if (!row.IsSequence()) {
      problems.push_back(ProblemAt(source, row, path) + ": expected a list of worker indexes, got " + Describe(row));
      continue;
    }
    if (std::optional<std::vector<int>> read = ReadWorkers(row, source, path, problems)) rows.push_back(std::move(*read));
  }
  std::vector<std::string> axes;
  if (const YAML::Node names = value["axes"]) {
    if (!names.IsSequence()) problems.push_back(ProblemAt(source, names, "mesh.axes") + ": expected a list of names, got " + Describe(names));
    for (size_t i = 0; names.IsSequence() && i < names.size(); ++i) axes.push_back(names[i].Scalar());
  } else {
    axes = grid ? std::vector<std::string>{"dim0", "dim1"} : std::vector<std::string>{"workers"};
  }
  if (problems.size() != before) return std::nullopt;
  try {
    if (grid) return distributed::DeviceMesh(rows, axes);
    if (axes.size() != 1) throw Error(Code::kInvalidArgument, "expected 1 axis name for a 1-D mesh, got " + std::to_string(axes.size()));
    return distributed::DeviceMesh(rows[0], axes[0]);
  } catch (const Error& e) {
    problems.push_back(here + ": " + e.what());
    return std::nullopt;
  }
}

// `placements: [shard(0), replicate]`: one per mesh axis; nullopt after a problem.
std::optional<std::vector<distributed::Placement>> ReadPlacements(const YAML::Node& value, const std::string& where,
                                                                  std::vector<std::string>& problems) {
  if (!value.IsSequence() || value.size() == 0) {
    problems.push_back(where + ": expected a non-empty list of placements (shard(DIM), replicate), one per mesh axis, got " +
                       Describe(value));
    return std::nullopt;
  }
  std::vector<distributed::Placement> out;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string text = value[i].IsScalar() ? value[i].Scalar() : "";
    const std::string item = where + "[" + std::to_string(i) + "]";
    if (text == "replicate" || text == "replicate()") {
      out.push_back(distributed::Replicate());
    } else if (text == "partial" || text == "partial()") {
      problems.push_back(item + ": partial cannot be asked for (a pending sum is what a contraction over a split dim makes)");
    } else if (text.rfind("shard(", 0) == 0 && text.back() == ')' && text.size() > 7 &&
               AllOf(WithoutSign(std::string_view(text).substr(6, text.size() - 7)), IsDigit)) {
      try {
        out.push_back(distributed::Shard(std::stoll(text.substr(6, text.size() - 7))));
      } catch (const std::exception&) {
        problems.push_back(item + ": dim " + text.substr(6, text.size() - 7) + " is out of range");
      }
    } else {
      problems.push_back(item + ": expected shard(DIM) or replicate, got " + Describe(value[i]));
    }
  }
  if (out.size() != value.size()) return std::nullopt;
  return out;
}

ParsedConfigs ParseDocument(const YAML::Node& root, const std::string& source) {
  ParsedConfigs out;
  std::vector<std::string>& problems = out.problems;
  if (!root || root.IsNull()) return out;
  if (!root.IsMap()) {
    problems.push_back(ProblemAt(source, root, "") + "expected a mapping of signal names to configs, got " + Describe(root));
    return out;
  }
  std::optional<distributed::DeviceMesh> mesh;
  bool mesh_given = false;
  for (const auto& entry : root) {
    if (entry.first.IsScalar() && entry.first.Scalar() == "mesh") {
      mesh_given = true;
      mesh = ReadMesh(entry.first, entry.second, source, problems);
    }
  }
  for (const auto& entry : root) {
    const YAML::Node& body = entry.second;
    const size_t before = problems.size();
    const std::string name = entry.first.IsScalar() ? entry.first.Scalar() : "";
    if (name == "mesh") continue;  // read above: not a signal
    if (KindOf(entry.first) != "str" || name.empty()) {
      problems.push_back(ProblemAt(source, entry.first, name.empty() ? "<key>" : name) +
                         ": a signal name must be a non-empty string, got " + Describe(entry.first));
      continue;
    }
    const std::string here = ProblemAt(source, entry.first, name);
    if (!body.IsNull() && !body.IsMap()) {
      problems.push_back(here + ": expected a mapping with keys " + kSignalKeys + ", got " + Describe(body));
      continue;
    }
    SignalConfig config;
    std::optional<std::vector<distributed::Placement>> placements;
    std::string placements_where;
    for (const auto& field : body) {
      const std::string key = field.first.Scalar();
      const YAML::Node& value = field.second;
      const std::string where = ProblemAt(source, field.first, name + "." + key);
      if (key == "shard") {
        if (value.IsNull()) continue;  // no shard, as when left out
        if (!value.IsMap()) {
          problems.push_back(where + ": expected a mapping with keys " + kShardKeys + ", got " + Describe(value));
          continue;
        }
        bool replicated = false;
        config.shard = ReadShard(value, name, source, problems, replicated);
        if (config.shard && replicated) {  // copies on the shard's workers (none named: every live one)
          config.replicated = true;
          config.replicas = std::move(config.shard->workers);
          config.shard.reset();
        }
      } else if (key == "replicated") {
        if (auto b = ReadBool(value, where, problems)) config.replicated = *b;
      } else if (key == "placements") {
        placements_where = where;
        placements = ReadPlacements(value, where, problems);
      } else if (key == "compile") {
        if (auto b = ReadBool(value, where, problems)) config.compile = *b;
      } else if (key == "backward") {
        if (value.IsNull()) continue;  // none, as when left out
        if (KindOf(value) != "str" || value.Scalar().empty())
          problems.push_back(where + ": expected a signal name (str), got " + Describe(value));
        else
          config.backward = value.Scalar();
      } else {
        problems.push_back(where + ": unknown key '" + key + "' (known: " + kSignalKeys + ")");
      }
    }
    if (placements) {
      if (config.shard || config.replicated) {
        problems.push_back(placements_where + ": placements exclude shard and replicated");
      } else if (!mesh) {
        if (!mesh_given) problems.push_back(placements_where + ": placements need the file's mesh: section");
      } else {
        try {
          const SignalConfig placed = distributed::signal_config(*mesh, *placements);
          config.shard = placed.shard;
          config.replicated = placed.replicated;
          config.replicas = placed.replicas;
          config.mesh = placed.mesh;
        } catch (const Error& e) {
          problems.push_back(placements_where + ": " + e.what());
        }
      }
    }
    for (std::string& p : ConfigProblems(here, config)) problems.push_back(std::move(p));  // shard with replicated
    if (problems.size() == before) out.signals.emplace_back(name, std::move(config));
  }
  return out;
}

}  // namespace

// A problem is one line (Summary and the Python package list them one a
// line): a line break that came from the YAML (a block scalar, a quoted key)
// is shown escaped, so that no input can add a line that reads as a problem.
std::string OneLine(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}

// "SOURCE: N problems:" and the problems, one a line.
std::string Summary(const std::string& source, const std::vector<std::string>& problems) {
  return source + ": " + std::to_string(problems.size()) + " problem" + (problems.size() == 1 ? "" : "s") + ":" +
         JoinLines(problems);
}

// Reads `yaml` into `root`; a problem for text that is not YAML.
ParsedConfigs ParseConfigYaml(const std::string& yaml, const std::string& source, YAML::Node& root) {
  ParsedConfigs out;
  bool loaded = false;
  try {
    root = YAML::Load(yaml);
    loaded = true;
  } catch (const YAML::Exception& e) {
    // yaml-cpp's message may quote the offending character: a line break too.
    out.problems.push_back(source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                           ": invalid YAML: " + e.msg);
  }
  if (loaded) out = ParseDocument(root, source);
  for (std::string& problem : out.problems) problem = OneLine(problem);
  return out;
}

}  // namespace gt::client_internal
