#include "host/plugin_loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include <boost/dll/shared_library.hpp>

#include "gt/settings.h"

namespace gt {
namespace {

namespace fs = std::filesystem;

std::string PluginFileName(std::string_view name) { return "gt_" + std::string(name) + ".so"; }

// The option table is part of the descriptor: a plugin whose own table is
// broken (a default its spec rejects, a name declared twice) is refused when
// it is loaded, not reported against every manifest that uses it.
Status CheckOptionTable(const PluginDescriptor& d, const std::string& path) {
  const std::string plugin = path + ": plugin '" + d.name + "'";
  for (size_t i = 0; i < d.option_count; ++i) {
    const OptionSpec& spec = d.options[i];
    if (spec.name == nullptr || *spec.name == '\0')
      return PluginError(plugin + ": option #" + std::to_string(i) + " has no name");
    const std::string option = plugin + ": option '" + spec.name + "'";
    if (spec.default_value == nullptr || spec.unit == nullptr || spec.doc == nullptr)
      return PluginError(option + " lacks a default, unit or doc (use \"\" for none)");
    if (spec.type != OptionType::kBool && spec.type != OptionType::kInt && spec.type != OptionType::kDouble &&
        spec.type != OptionType::kString)
      return PluginError(option + " has an unknown type");
    for (size_t k = 0; k < i; ++k)
      if (std::strcmp(d.options[k].name, spec.name) == 0) return PluginError(option + " is declared twice");
    if ((spec.type == OptionType::kInt || spec.type == OptionType::kDouble) && !(spec.min <= spec.max))
      return PluginError(option + " has an empty range");
    if (Result<OptionValue> v = ParseOptionValue(spec, spec.default_value); !v.ok())
      return PluginError(option + ": its default does not fit its own spec: " + v.status().message());
  }
  return Status::Ok();
}

Status CheckDescriptor(const PluginDescriptor* d, const std::string& path) {
  if (d == nullptr) return PluginError(path + ": gt_plugin_descriptor() returned null");
  if (d->name == nullptr || *d->name == '\0') return PluginError(path + ": descriptor has no name");
  if (d->version == nullptr || d->description == nullptr)
    return PluginError(path + ": descriptor of '" + d->name + "' lacks version or description");
  if (d->kind != PluginKind::kModifier && d->kind != PluginKind::kBackend)
    return PluginError(path + ": descriptor of '" + d->name + "' has an unknown kind");
  bool has_factory = d->kind == PluginKind::kModifier ? d->create_stage != nullptr : d->create_backend != nullptr;
  if (!has_factory) return PluginError(path + ": plugin '" + d->name + "' has no factory for its kind");
  if (d->option_count > 0 && d->options == nullptr)
    return PluginError(path + ": plugin '" + d->name + "' declares options but no option table");
  if ((d->hosts & kEveryHost) == 0) return PluginError(path + ": plugin '" + d->name + "' allows no host");
  return CheckOptionTable(*d, path);
}

// Libraries stay loaded once loaded: unloading a library whose code may
// still be referenced (static destructors, thread-locals) is not worth it.
std::mutex cache_mutex;
std::map<std::string, LoadedPlugin>& Cache() {  // GUARDED_BY(cache_mutex)
  static auto* cache = new std::map<std::string, LoadedPlugin>();
  return *cache;
}

Result<LoadedPlugin> LoadUncached(const std::string& path) {
  auto library = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code ec;
  library->load(path, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local, ec);
  if (ec) return NotFound(path + ": not a loadable shared library (" + ec.message() + ")");
  if (!library->has("gt_plugin_abi_version"))
    return NotFound(path + ": not a gt plugin (no gt_plugin_abi_version symbol)");
  uint32_t abi = library->get<uint32_t()>("gt_plugin_abi_version")();
  if (abi != kPluginAbiVersion)
    return PluginError(path + ": plugin ABI version " + std::to_string(abi) + " does not match host ABI version " +
                       std::to_string(kPluginAbiVersion));
  if (!library->has("gt_plugin_descriptor"))
    return PluginError(path + ": exports no gt_plugin_descriptor symbol");
  const PluginDescriptor* descriptor = library->get<const PluginDescriptor*()>("gt_plugin_descriptor")();
  if (Status s = CheckDescriptor(descriptor, path); !s.ok()) return s;
  return LoadedPlugin{std::static_pointer_cast<void>(library), descriptor, path};
}

// <libdir>/gt/plugins, where <libdir> is the directory this libgt_core.so
// was loaded from: an installed copy finds the plugins installed beside it,
// whatever prefix it was installed to. Empty if the loader cannot say.
std::string PluginDirBesideCore() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&PluginDirBesideCore), &info) == 0 || info.dli_fname == nullptr)
    return "";
  std::error_code ec;
  fs::path library = fs::weakly_canonical(fs::path(info.dli_fname), ec);
  if (ec || !library.has_parent_path()) return "";
  return (library.parent_path() / "gt" / "plugins").string();
}

// The same directory named twice (a build tree in GT_PLUGIN_PATH, the install
// directory that is also the one beside libgt_core) is searched once, where
// it comes first.
void AppendUnique(std::vector<std::string>& dirs, std::vector<std::string>& seen, std::string dir) {
  if (dir.empty()) return;
  std::error_code ec;
  std::string key = fs::weakly_canonical(fs::path(dir), ec).string();
  if (ec) key = dir;
  if (std::find(seen.begin(), seen.end(), key) != seen.end()) return;
  seen.push_back(std::move(key));
  dirs.push_back(std::move(dir));
}

}  // namespace

std::vector<std::string> PluginSearchPath() {
  std::vector<std::string> dirs;
  std::vector<std::string> seen;  // canonical forms of `dirs`
  if (std::optional<std::string> env = TextSetting("GT_PLUGIN_PATH")) {
    std::string_view rest(*env);
    while (!rest.empty()) {
      size_t colon = rest.find(':');
      AppendUnique(dirs, seen, std::string(rest.substr(0, colon)));
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  static const std::string beside_core = PluginDirBesideCore();
  AppendUnique(dirs, seen, beside_core);
  AppendUnique(dirs, seen, GT_INSTALL_PLUGIN_DIR);
  AppendUnique(dirs, seen, GT_BUILD_PLUGIN_DIR);
  return dirs;
}

Result<LoadedPlugin> LoadPluginFile(const std::string& path) {
  std::error_code ec;
  std::string key = fs::weakly_canonical(path, ec).string();
  if (ec) key = path;
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (auto it = Cache().find(key); it != Cache().end()) return it->second;
  if (!fs::exists(key)) return NotFound(path + ": no such file");
  Result<LoadedPlugin> loaded = LoadUncached(key);
  if (loaded.ok()) Cache().emplace(key, *loaded);
  return loaded;
}

Result<LoadedPlugin> FindPlugin(std::string_view name) {
  std::string file = PluginFileName(name);
  for (const std::string& dir : PluginSearchPath()) {
    fs::path candidate = fs::path(dir) / file;
    std::error_code ec;
    if (!fs::exists(candidate, ec)) continue;
    Result<LoadedPlugin> loaded = LoadPluginFile(candidate.string());
    if (!loaded.ok()) return loaded;
    if (std::string_view(loaded->descriptor->name) != name)
      return PluginError(candidate.string() + ": file name says '" + std::string(name) + "' but descriptor says '" +
                         loaded->descriptor->name + "'");
    return loaded;
  }
  std::string searched;
  for (const std::string& dir : PluginSearchPath()) searched += (searched.empty() ? "" : ":") + dir;
  return NotFound("unknown plugin '" + std::string(name) + "' (no " + file + " in " + searched + ")");
}

std::vector<PluginListing> ListPlugins() {
  std::vector<PluginListing> out;
  std::set<std::string> seen_files;
  for (const std::string& dir : PluginSearchPath()) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      std::string f = entry.path().filename().string();
      if (f.rfind("gt_", 0) == 0 && entry.path().extension() == ".so") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      if (!seen_files.insert(f.filename().string()).second) continue;
      out.push_back({f.string(), LoadPluginFile(f.string())});
    }
  }
  return out;
}

namespace {
template <typename T, typename Factory>
Result<PluginInstance<T>> Create(const LoadedPlugin& plugin, const StageContext& context, Factory factory) {
  const char* name = plugin.descriptor->name;
  try {
    Result<std::unique_ptr<T>> made = factory(context);
    if (!made.ok()) return Status(made.status().code(), "plugin '" + std::string(name) + "' (stage '" +
                                                            context.stage + "'): " + made.status().message());
    if (!*made) return PluginError("plugin '" + std::string(name) + "' factory returned null");
    return PluginInstance<T>(plugin.library, std::move(*made));
  } catch (const std::exception& e) {
    return PluginError("plugin '" + std::string(name) + "' threw while creating stage '" + context.stage + "': " + e.what());
  } catch (...) {
    return PluginError("plugin '" + std::string(name) + "' threw while creating stage '" + context.stage + "'");
  }
}
}  // namespace

Result<PluginInstance<Stage>> CreateStage(const LoadedPlugin& plugin, const StageContext& context) {
  if (plugin.descriptor->kind != PluginKind::kModifier)
    return InvalidArgument("plugin '" + std::string(plugin.descriptor->name) + "' is not a modifier");
  return Create<Stage>(plugin, context, plugin.descriptor->create_stage);
}

Result<PluginInstance<Backend>> CreateBackend(const LoadedPlugin& plugin, const StageContext& context) {
  if (plugin.descriptor->kind != PluginKind::kBackend)
    return InvalidArgument("plugin '" + std::string(plugin.descriptor->name) + "' is not a backend");
  return Create<Backend>(plugin, context, plugin.descriptor->create_backend);
}

}  // namespace gt
