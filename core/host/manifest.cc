#include "host/manifest.h"

#include "host/shipped_configs.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "gt/settings.h"
#include "net/curve_keys.h"

namespace gt {
namespace {

struct Checker {
  std::vector<ManifestProblem> problems;

  void Add(const std::string& path, const YAML::Node& at, std::string message) {
    int line = at.IsDefined() && at.Mark().line >= 0 ? at.Mark().line + 1 : 0;
    problems.push_back({path, line, std::move(message)});
  }
};

const std::set<std::string>& TopLevelKeys() {
  static const std::set<std::string> keys = {"host", "id", "listen", "connect", "metrics", "discovery",
                                             "heartbeat_interval_ms", "heartbeat_timeout_ms", "security", "limits",
                                             "reconnect_grace_ms", "after_grace", "resume_wait_ms",
                                             "clients", "stages", "backend"};
  return keys;
}

std::string Known(const std::set<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out.empty() ? "none" : out;
}

std::optional<std::string> ScalarAt(Checker& c, const YAML::Node& parent, const std::string& key,
                                    const std::string& path) {
  YAML::Node node = parent[key];
  if (!node.IsDefined() || node.IsNull()) return std::nullopt;
  if (!node.IsScalar()) {
    c.Add(path, node, "expected a scalar");
    return std::nullopt;
  }
  return node.Scalar();
}

void ParseInt(Checker& c, const YAML::Node& root, const std::string& key, int64_t* out, const std::string& path = "",
              double min = 1, double max = 3.6e6, const char* unit = "ms") {
  const std::string where = path.empty() ? key : path;
  std::optional<std::string> text = ScalarAt(c, root, key, where);
  if (!text) return;
  OptionSpec spec{key.c_str(), OptionType::kInt, "", unit, "", min, max};
  Result<OptionValue> v = ParseOptionValue(spec, *text);
  if (!v.ok()) return c.Add(where, root[key], v.status().message());
  *out = std::get<int64_t>(*v);
}

// A map section whose keys must come from `known`; nullopt when absent.
std::optional<YAML::Node> Section(Checker& c, const YAML::Node& root, const std::string& name,
                                  const std::set<std::string>& known) {
  YAML::Node node = root[name];
  if (!node.IsDefined() || node.IsNull()) return std::nullopt;
  if (!node.IsMap()) {
    c.Add(name, node, "expected a map (" + Known(known) + ")");
    return std::nullopt;
  }
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    if (!known.count(key)) c.Add(name + "." + key, kv.first, "unknown key '" + key + "' (known: " + Known(known) + ")");
  }
  return node;
}

void CheckSecurity(Checker& c, const YAML::Node& root, std::optional<HostKind> host, SecurityConfig* out) {
  const bool dispatcher = host == HostKind::kDispatcher;
  const std::set<std::string> known = dispatcher ? std::set<std::string>{"key", "clients", "workers", "insecure"}
                                                 : std::set<std::string>{"key", "server_key"};
  std::optional<YAML::Node> section = Section(c, root, "security", known);
  if (!section) return;
  const YAML::Node& node = *section;
  out->key = ScalarAt(c, node, "key", "security.key").value_or("");
  out->server_key = ScalarAt(c, node, "server_key", "security.server_key").value_or("");
  out->client_keys = ScalarAt(c, node, "clients", "security.clients").value_or("");
  out->worker_keys = ScalarAt(c, node, "workers", "security.workers").value_or("");
  if (std::optional<std::string> insecure = ScalarAt(c, node, "insecure", "security.insecure")) {
    if (*insecure != "true" && *insecure != "false") c.Add("security.insecure", node["insecure"], "expected true or false");
    out->insecure = *insecure == "true";
  }
  if (host) {
    if (Status s = ValidateSecurity(*out, *host); !s.ok()) c.Add("security", node, s.message());
  }
}

// The whole of `text` as a finite number; nullopt otherwise ("nan", "2x").
std::optional<double> ParseNumber(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

void CheckLimits(Checker& c, const YAML::Node& root, std::optional<HostKind> host, ClientLimits* out) {
  std::optional<YAML::Node> section = Section(
      c, root, "limits", {"max_live_tensors", "max_inflight", "max_sessions_per_key", "max_compute_seconds_per_minute"});
  if (!section) return;
  const YAML::Node& node = *section;
  if (host != HostKind::kDispatcher) return c.Add("limits", root["limits"], "only a dispatcher enforces client limits");
  ParseInt(c, node, "max_live_tensors", &out->max_live_tensors, "limits.max_live_tensors", 0, 9e15, "");
  ParseInt(c, node, "max_inflight", &out->max_inflight, "limits.max_inflight", 0, 9e15, "");
  ParseInt(c, node, "max_sessions_per_key", &out->max_sessions_per_key, "limits.max_sessions_per_key", 0, 1e6, "");
  const std::string compute = "limits.max_compute_seconds_per_minute";
  if (std::optional<std::string> text = ScalarAt(c, node, "max_compute_seconds_per_minute", compute)) {
    std::optional<double> seconds = ParseNumber(*text);
    if (!seconds || *seconds < 0 || *seconds > 60)
      return c.Add(compute, node["max_compute_seconds_per_minute"],
                   "expected seconds from 0 (no limit) to 60, got '" + *text + "'");
    out->max_compute_seconds_per_minute = *seconds;
  }
}

// A label value Prometheus and dashboards take as is.
bool IsLabelName(const std::string& name) {
  if (name.empty() || name.size() > 32) return false;
  for (char ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.' && ch != '-') return false;
  return true;
}

std::string UnknownKey(const ClientShareConfig& entry) {
  return "'" + entry.file + "' is not a key on the security.clients allow-list: an unknown client";
}

// One `clients:` entry; `allowed` (when the manifest names it) is the security.clients allow-list.
std::optional<ClientShareConfig> CheckClient(Checker& c, const YAML::Node& node, const std::string& path,
                                             const std::vector<std::string>* allowed) {
  if (!node.IsMap()) {
    c.Add(path, node, "expected a map (key, weight, name)");
    return std::nullopt;
  }
  for (const auto& kv : node) {
    const std::string k = kv.first.as<std::string>();
    if (k != "key" && k != "weight" && k != "name") c.Add(path + "." + k, kv.first, "unknown key '" + k + "' (known: key, name, weight)");
  }
  ClientShareConfig entry;
  std::optional<std::string> file = ScalarAt(c, node, "key", path + ".key");
  if (!file) {
    c.Add(path, node, "missing 'key' (a client's public key file, as on the security.clients allow-list)");
    return std::nullopt;
  }
  Result<CurveKeyPair> key = ReadCurveKeyFile(*file, false);
  if (!key.ok()) {
    c.Add(path + ".key", node["key"], key.status().message());
    return std::nullopt;
  }
  entry.public_key = key->public_key;
  entry.file = *file;
  entry.line = node["key"].Mark().line + 1;
  if (allowed && std::find(allowed->begin(), allowed->end(), entry.public_key) == allowed->end())
    c.Add(path + ".key", node["key"], UnknownKey(entry));
  if (std::optional<std::string> weight = ScalarAt(c, node, "weight", path + ".weight")) {
    std::optional<double> w = ParseNumber(*weight);
    if (!w || *w <= 0)
      c.Add(path + ".weight", node["weight"], "a weight is a positive number, got '" + *weight + "'");
    else
      entry.weight = *w;
  }
  entry.name = std::filesystem::path(*file).stem().string();
  entry.name = ScalarAt(c, node, "name", path + ".name").value_or(entry.name);
  if (!IsLabelName(entry.name))
    c.Add(path + (node["name"].IsDefined() ? ".name" : ".key"), node["name"].IsDefined() ? node["name"] : node["key"],
          "a client's name (its metrics label) is 1 to 32 of A-Z a-z 0-9 _ . -, got '" + entry.name + "'");
  return entry;
}

void CheckClients(Checker& c, const YAML::Node& root, std::optional<HostKind> host, const SecurityConfig& security,
                  std::vector<ClientShareConfig>* out) {
  const YAML::Node node = root["clients"];
  if (!node.IsDefined() || node.IsNull()) return;
  if (host != HostKind::kDispatcher) return c.Add("clients", node, "only a dispatcher knows clients' shares");
  if (!node.IsSequence()) return c.Add("clients", node, "expected a list of {key, weight, name}");
  // Without security.clients here, the allow-list may come from the
  // command line: CheckClientShares checks the keys against it later.
  std::optional<std::vector<std::string>> allowed;
  if (!security.client_keys.empty()) {
    Result<std::vector<std::string>> keys = ReadCurvePublicKeys(security.client_keys);
    if (!keys.ok()) return c.Add("clients", node, "cannot check the keys: " + keys.status().message());
    allowed = std::move(*keys);
  }
  std::set<std::string> names, keys;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string path = "clients[" + std::to_string(i) + "]";
    std::optional<ClientShareConfig> entry = CheckClient(c, node[i], path, allowed ? &*allowed : nullptr);
    if (!entry) continue;
    if (!keys.insert(entry->public_key).second) c.Add(path + ".key", node[i]["key"], "this key has an entry already");
    if (!names.insert(entry->name).second) c.Add(path, node[i], "the name '" + entry->name + "' is taken by an earlier entry");
    out->push_back(std::move(*entry));
  }
}

OptionValues CheckOptions(Checker& c, const PluginDescriptor& d, const YAML::Node& options, const std::string& path) {
  OptionValues values;
  std::set<std::string> declared;
  for (size_t i = 0; i < d.option_count; ++i) declared.insert(d.options[i].name);
  // IsDefined() first: an absent key is an invalid node, whose IsMap() throws.
  const bool is_map = options.IsDefined() && options.IsMap();
  if (options.IsDefined() && !options.IsNull() && !is_map) {
    c.Add(path, options, "expected a map of option: value");
  } else if (is_map) {
    for (const auto& kv : options) {
      std::string key = kv.first.as<std::string>();
      if (!declared.count(key))
        c.Add(path + "." + key, kv.first,
              "unknown option '" + key + "' of plugin '" + d.name + "' (known: " + Known(declared) + ")");
    }
  }
  for (size_t i = 0; i < d.option_count; ++i) {
    const OptionSpec& spec = d.options[i];
    YAML::Node given = is_map ? options[spec.name] : YAML::Node();
    std::string opt_path = path + "." + spec.name;
    if (given.IsDefined() && !given.IsNull() && !given.IsScalar()) {
      c.Add(opt_path, given, "option '" + std::string(spec.name) + "' expects " +
                                 std::string(OptionTypeName(spec.type)) + ", got a " +
                                 (given.IsMap() ? "map" : "sequence"));
      continue;
    }
    std::string text = given.IsDefined() && !given.IsNull() ? given.Scalar() : spec.default_value;
    Result<OptionValue> v = ParseOptionValue(spec, text);
    if (!v.ok()) {
      c.Add(opt_path, given.IsDefined() ? given : options, v.status().message());
      continue;
    }
    Result<std::optional<OptionValue>> env = ReadEnvOverride(spec);
    if (!env.ok()) {
      c.Add(opt_path, given.IsDefined() ? given : options, env.status().message());
      continue;
    }
    values.Set(spec.name, *env ? std::move(**env) : std::move(*v));
  }
  return values;
}

std::optional<ManifestStage> CheckStage(Checker& c, const YAML::Node& node, const std::string& path,
                                        PluginKind want, std::optional<HostKind> host) {
  if (!node.IsMap()) {
    c.Add(path, node, "expected a map with 'plugin' (and 'name', 'options')");
    return std::nullopt;
  }
  static const std::set<std::string> keys = {"name", "plugin", "options"};
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    if (!keys.count(key)) c.Add(path + "." + key, kv.first, "unknown key '" + key + "' (known: " + Known(keys) + ")");
  }
  std::optional<std::string> plugin_name = ScalarAt(c, node, "plugin", path + ".plugin");
  if (!plugin_name) {
    const bool bare_null = node["plugin"].IsDefined() && node["plugin"].IsNull();  // YAML reads `null` and `~` as no value
    c.Add(path + ".plugin", node, bare_null ? "'plugin' is YAML null, not a name (the null backend is 'null_backend')" : "missing 'plugin'");
    return std::nullopt;
  }
  Result<LoadedPlugin> plugin = FindPlugin(*plugin_name);
  if (!plugin.ok()) {
    c.Add(path + ".plugin", node["plugin"], plugin.status().message());
    return std::nullopt;
  }
  const PluginDescriptor& d = *plugin->descriptor;
  bool kind_ok = d.kind == want;
  if (!kind_ok)
    c.Add(path + ".plugin", node["plugin"],
          "plugin '" + *plugin_name + "' is a " + std::string(PluginKindName(d.kind)) + ", expected a " +
              std::string(PluginKindName(want)));
  if (host && !(d.hosts & HostBit(*host)))
    c.Add(path + ".plugin", node["plugin"],
          "plugin '" + *plugin_name + "' may not run in a " + std::string(HostKindName(*host)) + " host");
  ManifestStage stage;
  stage.name = ScalarAt(c, node, "name", path + ".name").value_or(*plugin_name);
  stage.plugin = *plugin;
  stage.options = CheckOptions(c, d, node["options"], path + ".options");
  if (!kind_ok) return std::nullopt;
  return stage;
}

// A client's pipeline runs inside the client library: it listens, connects
// and serves metrics as the client does, so only its stages are its own.
void CheckClientKeys(Checker& c, const YAML::Node& root) {
  static const std::set<std::string> keys = {"host", "id", "stages"};
  for (const auto& kv : root) {
    std::string key = kv.first.as<std::string>();
    if (TopLevelKeys().count(key) && !keys.count(key) && key != "backend")
      c.Add(key, kv.first, "a client manifest takes only " + Known(keys) + ", not '" + key + "'");
  }
}

std::optional<HostKind> CheckHost(Checker& c, const YAML::Node& root, std::optional<HostKind> expected) {
  std::optional<std::string> text = ScalarAt(c, root, "host", "host");
  std::optional<HostKind> host;
  if (!text) {
    c.Add("host", root, "missing 'host' (dispatcher, worker or client)");
  } else if (*text == "dispatcher") {
    host = HostKind::kDispatcher;
  } else if (*text == "worker") {
    host = HostKind::kWorker;
  } else if (*text == "client") {
    host = HostKind::kClient;
  } else {
    c.Add("host", root["host"], "host must be 'dispatcher', 'worker' or 'client', got '" + *text + "'");
  }
  if (host && expected && *host != *expected)
    c.Add("host", root["host"], "this manifest is for a " + std::string(HostKindName(*host)) + ", not a " +
                                    std::string(HostKindName(*expected)));
  return expected ? expected : host;
}

// A stage's name as CheckStage will give it ("" when it has none yet).
std::string DeclaredName(const YAML::Node& stage) {
  if (!stage.IsMap()) return "";
  for (const char* key : {"name", "plugin"})
    if (stage[key].IsDefined() && stage[key].IsScalar()) return stage[key].Scalar();
  return "";
}

void CheckStages(Checker& c, const YAML::Node& root, std::optional<HostKind> host, const StageFilter& keep,
                 HostManifest* m) {
  YAML::Node stages = root["stages"];
  if (!stages.IsDefined() || stages.IsNull()) return;
  if (!stages.IsSequence()) return c.Add("stages", stages, "expected a sequence of stages");
  std::set<std::string> names;
  for (size_t i = 0; i < stages.size(); ++i) {
    if (keep && !keep(DeclaredName(stages[i]))) continue;  // not loaded, not checked
    std::string path = "stages[" + std::to_string(i) + "]";
    std::optional<ManifestStage> stage = CheckStage(c, stages[i], path, PluginKind::kModifier, host);
    if (!stage) continue;
    if (!names.insert(stage->name).second)
      c.Add(path + ".name", stages[i], "duplicate stage name '" + stage->name + "'");
    m->stages.push_back(std::move(*stage));
  }
}

void CheckBackend(Checker& c, const YAML::Node& root, std::optional<HostKind> host, HostManifest* m) {
  YAML::Node backend = root["backend"];
  bool present = backend.IsDefined() && !backend.IsNull();
  if (host == HostKind::kDispatcher && present)
    return c.Add("backend", backend, "a dispatcher host takes no backend (its last stage is the router)");
  if (host == HostKind::kClient && present)
    return c.Add("backend", backend, "a client takes no backend (its last stage sends to the dispatcher)");
  if (host == HostKind::kWorker && !present) return c.Add("backend", root, "missing backend: a worker host needs one");
  if (!present) return;
  m->backend = CheckStage(c, backend, "backend", PluginKind::kBackend, host);
  if (m->backend && !backend["name"].IsDefined()) m->backend->name = "backend";
}

HostManifest Check(Checker& c, const YAML::Node& root, std::optional<HostKind> expected, const StageFilter& keep) {
  HostManifest m;
  if (!root.IsMap()) {
    c.Add("", root, "a manifest is a YAML map (host, stages, backend, ...)");
    return m;
  }
  for (const auto& kv : root) {
    std::string key = kv.first.as<std::string>();
    if (!TopLevelKeys().count(key))
      c.Add(key, kv.first, "unknown key '" + key + "' (known: " + Known(TopLevelKeys()) + ")");
  }
  std::optional<HostKind> host = CheckHost(c, root, expected);
  if (host) m.host = *host;
  if (host == HostKind::kClient) CheckClientKeys(c, root);
  m.id = ScalarAt(c, root, "id", "id").value_or(std::string(HostKindName(m.host)));
  m.listen = ScalarAt(c, root, "listen", "listen").value_or("");
  m.connect = ScalarAt(c, root, "connect", "connect").value_or("");
  m.metrics = ScalarAt(c, root, "metrics", "metrics").value_or("");
  m.discovery = ScalarAt(c, root, "discovery", "discovery").value_or("");
  if (!m.discovery.empty() && host == HostKind::kWorker)
    c.Add("discovery", root["discovery"], "only a dispatcher serves discovery (it knows the live workers)");
  ParseInt(c, root, "heartbeat_interval_ms", &m.heartbeat_interval_ms);
  ParseInt(c, root, "heartbeat_timeout_ms", &m.heartbeat_timeout_ms);
  ParseInt(c, root, "reconnect_grace_ms", &m.reconnect_grace_ms);
  ParseInt(c, root, "resume_wait_ms", &m.resume_wait_ms);
  const std::string after = ScalarAt(c, root, "after_grace", "after_grace").value_or("exit");
  if (after != "exit" && after != "wait") c.Add("after_grace", root["after_grace"], "'" + after + "': exit or wait");
  m.exit_after_grace = after != "wait";
  CheckSecurity(c, root, host, &m.security);
  CheckLimits(c, root, host, &m.limits);
  CheckClients(c, root, host, m.security, &m.clients);
  CheckStages(c, root, host, keep, &m);
  CheckBackend(c, root, host, &m);
  return m;
}

std::vector<ManifestProblem> Run(std::string_view yaml, std::optional<HostKind> expected, const StageFilter& keep,
                                 HostManifest* out) {
  Checker c;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    c.problems.push_back({"", e.mark.line >= 0 ? e.mark.line + 1 : 0, "YAML syntax error: " + e.msg});
    return c.problems;
  }
  HostManifest m;
  try {
    m = Check(c, root, expected, keep);
  } catch (const YAML::Exception& e) {  // e.g. a map or sequence used as a key
    c.problems.push_back({"", e.mark.line >= 0 ? e.mark.line + 1 : 0, "unexpected YAML structure: " + e.msg});
    return c.problems;
  }
  if (out) *out = std::move(m);
  return c.problems;
}

}  // namespace

Status CheckClientShares(const HostManifest& manifest) {
  if (manifest.clients.empty()) return Status::Ok();
  const ClientShareConfig& first = manifest.clients.front();
  if (manifest.security.client_keys.empty())
    return InvalidArgument(manifest.source + ":" + std::to_string(first.line) +
                           ": clients: client shares need CURVE keys (security.clients or --client-keys): "
                           "without them the dispatcher cannot tell clients apart");
  Result<std::vector<std::string>> allowed = ReadCurvePublicKeys(manifest.security.client_keys);
  if (!allowed.ok()) return allowed.status();
  for (size_t i = 0; i < manifest.clients.size(); ++i) {
    const ClientShareConfig& entry = manifest.clients[i];
    if (std::find(allowed->begin(), allowed->end(), entry.public_key) == allowed->end())
      return InvalidArgument(manifest.source + ":" + std::to_string(entry.line) + ": clients[" + std::to_string(i) +
                             "].key: " + UnknownKey(entry));
  }
  return Status::Ok();
}

Status ValidateSecurity(const SecurityConfig& security, HostKind host) {
  const bool dispatcher = host == HostKind::kDispatcher;
  const bool keyed = !security.key.empty() || !security.server_key.empty() || !security.client_keys.empty() ||
                     !security.worker_keys.empty();
  if (!keyed) return Status::Ok();
  if (security.key.empty()) return InvalidArgument("missing key: this host's key pair (gt keygen NAME writes NAME.key)");
  if (dispatcher && (security.client_keys.empty() || security.worker_keys.empty()))
    return InvalidArgument("a dispatcher with a key needs both allow-lists: clients and workers (public key files)");
  if (!dispatcher && security.server_key.empty()) return InvalidArgument("missing server_key: the dispatcher's .pub");
  if (dispatcher && security.insecure) return InvalidArgument("insecure contradicts the keys given");
  if (!dispatcher && (!security.client_keys.empty() || !security.worker_keys.empty() || security.insecure))
    return InvalidArgument("allow-lists and insecure are the dispatcher's");
  return Status::Ok();
}

std::vector<ManifestProblem> ValidateManifest(std::string_view yaml, std::optional<HostKind> expected) {
  return Run(yaml, expected, {}, nullptr);
}

Result<HostManifest> ParseManifest(std::string_view yaml, const std::string& source,
                                   std::optional<HostKind> expected, const StageFilter& keep) {
  HostManifest m;
  std::vector<ManifestProblem> problems = Run(yaml, expected, keep, &m);
  if (!problems.empty()) {
    std::ostringstream out;
    out << source << ": " << problems.size() << " problem" << (problems.size() > 1 ? "s" : "") << ":";
    for (const auto& p : problems)
      out << "\n  " << source << ":" << p.line << ": " << (p.path.empty() ? "(root)" : p.path) << ": " << p.message;
    return InvalidArgument(out.str());
  }
  m.source = source;
  return m;
}

Result<bool> CompileStagesFromEnv() {
  Result<std::optional<bool>> compile = SwitchIfSet("GT_COMPILE");
  if (!compile.ok() || compile->has_value()) return compile.ok() ? Result<bool>(**compile) : compile.status();
  Result<std::optional<int64_t>> batch = IntIfSet("GT_WORKER_BATCH_SIZE");
  if (!batch.ok()) return batch.status();
  return batch->has_value() && **batch != 1;
}

Result<bool> CompileScopesEager() {
  Result<std::optional<bool>> compile = SwitchIfSet("GT_COMPILE");
  if (!compile.ok()) return compile.status();
  return compile->has_value() && !**compile;
}

Result<HostManifest> LoadShippedManifest(std::string_view name, HostKind expected, const StageFilter& keep) {
  std::optional<std::string_view> text = ShippedConfig(name);
  if (!text) return Internal("configs/" + std::string(name) + " is not compiled in");
  return ParseManifest(*text, "configs/" + std::string(name) + " (built in)", expected, keep);
}

Result<HostManifest> LoadManifestFile(const std::string& file, std::optional<HostKind> expected) {
  std::ifstream in(file);
  if (!in) return NotFound("cannot read manifest " + file);
  std::stringstream text;
  text << in.rdbuf();
  return ParseManifest(text.str(), file, expected);
}

}  // namespace gt
