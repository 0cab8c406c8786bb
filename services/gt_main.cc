// gt: the operator's command. `gt --help` lists the subcommands (kSubcommands
// below: inspect, validate, cluster, top, keygen, env) with one line each;
// `gt COMMAND --help` prints one's arguments and runs nothing.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <thread>

#include <boost/program_options.hpp>

#include "gt/settings.h"
#include "dispatcher/listener_security.h"
#include "net/curve_keys.h"
#include "net/default_keys.h"
#include "host/manifest.h"
#include "host/plugin_loader.h"
#include "service_common.h"
#include "top.h"

extern char** environ;

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

// Every subcommand: how it is called, what it does in one line, and what its
// --help adds. `gt --help` lists them; `gt COMMAND --help` (or -h anywhere in
// its arguments) prints its entry and runs nothing (a keygen that wrote
// --help.key, a validate that read a manifest named --help).
struct Subcommand {
  const char* name;
  const char* usage;
  const char* summary;
  const char* details;
};

constexpr Subcommand kSubcommands[] = {
    {"inspect", "gt inspect [NAME] [--check FILE.so]", "list the plugins found, describe one, or say why a file is not one",
     "  (none)            the search path and every plugin: name, kind, version, hosts, options\n"
     "  NAME              one plugin: its file, hosts, ABI and every option's type, default, range\n"
     "  --check FILE.so   load FILE.so as a plugin, or say why it is not one\n"},
    {"validate", "gt validate MANIFEST...", "check pipeline manifests without starting anything",
     "  MANIFEST          a host's YAML manifest (core/include/gt/manifest.h): its plugins are\n"
     "                    loaded and their options checked; exit status 1 if any is not ok\n"},
    {"cluster",
     "gt cluster [--workers N] [--listen ENDPOINT] [--metrics-port PORT] [--discovery HOST:PORT]\n"
     "                  [--manifest FILE] [--worker-manifest FILE] [--insecure]",
     "run a dispatcher and N workers as child processes until Ctrl-C",
     "  --workers, -n N          workers to start (default 2)\n"
     "  --listen ENDPOINT        the dispatcher's endpoint (default tcp://127.0.0.1:5555; port 0: a free\n"
     "                           one, named in the first line of output)\n"
     "  --metrics-port PORT      first /metrics port: the dispatcher's, the workers' follow (0: none)\n"
     "  --discovery HOST:PORT    serve Prometheus service discovery (/targets) there (\"\": none)\n"
     "  --manifest FILE          the dispatcher's manifest (default: the embedded default's stages)\n"
     "  --worker-manifest FILE   every worker's manifest (default: the embedded default's)\n"
     "  --insecure               no keys (default: this user's key set, named in the first line, which\n"
     "                           this user's clients find by themselves; docs/SECURITY.md)\n"},
    {"top", "gt top [--discovery HOST:PORT] [--metrics HOST:PORT]... [--interval SECONDS] [--once]",
     "live per-host and per-stage rates from the hosts' /metrics", nullptr},  // Top() prints its own options
    {"keygen", "gt keygen NAME...", "write CURVE key pairs: NAME.key (private, mode 0600) and NAME.pub",
     "  NAME              a path without extension, e.g. keys/dispatcher keys/workers/w0\n"
     "                    keys/clients/alice (docs/SECURITY.md says where each goes)\n"},
    {"env", "gt env [--markdown]", "every GT_* variable: its type, default and effect",
     "  --markdown        as the rows of README.md's \"Environment variables\" table\n"},
};

const Subcommand* FindSubcommand(const std::string& name) {
  for (const Subcommand& c : kSubcommands)
    if (name == c.name) return &c;
  return nullptr;
}

void PrintUsage(std::ostream& out = std::cout) {
  out << "usage: gt COMMAND [ARGS]   (gt COMMAND --help: its arguments)\n\ncommands:\n";
  for (const Subcommand& c : kSubcommands) out << "  " << std::left << std::setw(10) << c.name << c.summary << "\n";
}

void PrintSubcommandHelp(const Subcommand& c) {
  std::cout << "usage: " << c.usage << "\n" << c.summary << "\n";
  if (c.details) std::cout << "\n" << c.details;
}

bool AsksForHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

std::string HostsOf(uint32_t mask) {
  std::string out;
  if (mask & gt::HostBit(gt::HostKind::kDispatcher)) out = "dispatcher";
  if (mask & gt::HostBit(gt::HostKind::kWorker)) out += out.empty() ? "worker" : ", worker";
  if (mask & gt::HostBit(gt::HostKind::kClient)) out += out.empty() ? "client" : ", client";
  return out;
}

void Describe(const gt::LoadedPlugin& p) {
  const gt::PluginDescriptor& d = *p.descriptor;
  std::cout << d.name << " " << d.version << " (" << gt::PluginKindName(d.kind) << ")\n"
            << "  " << d.description << "\n"
            << "  file:  " << p.path << "\n"
            << "  hosts: " << HostsOf(d.hosts) << "\n"
            << "  abi:   " << gt::kPluginAbiVersion << "\n"
            << "  options:" << (d.option_count ? "" : " none") << "\n";
  for (size_t i = 0; i < d.option_count; ++i) {
    const gt::OptionSpec& o = d.options[i];
    std::cout << "    " << std::left << std::setw(20) << o.name << std::setw(8) << gt::OptionTypeName(o.type)
              << "default " << (*o.default_value ? o.default_value : "\"\"");
    if (*o.unit) std::cout << " " << o.unit;
    if (o.type == gt::OptionType::kInt || o.type == gt::OptionType::kDouble)
      std::cout << "  range [" << o.min << ", " << o.max << "]";
    if (o.env != nullptr) std::cout << "  env $" << o.env;
    std::cout << "\n      " << o.doc << "\n";
  }
}

int Inspect(const std::vector<std::string>& args) {
  if (args.size() == 2 && args[0] == "--check") {
    gt::Result<gt::LoadedPlugin> p = gt::LoadPluginFile(args[1]);
    if (!p.ok()) {
      std::cout << "not a loadable gt plugin: " << p.status().message() << "\n";
      return 1;
    }
    std::cout << args[1] << " is a loadable gt plugin:\n";
    Describe(*p);
    return 0;
  }
  if (args.size() == 1) {
    gt::Result<gt::LoadedPlugin> p = gt::FindPlugin(args[0]);
    if (!p.ok()) {
      std::cerr << p.status().message() << "\n";
      return 1;
    }
    Describe(*p);
    return 0;
  }
  std::cout << "plugin search path:\n";
  for (const auto& dir : gt::PluginSearchPath()) std::cout << "  " << dir << "\n";
  const std::vector<gt::PluginListing> listings = gt::ListPlugins();
  // Each column as wide as its widest cell, two spaces apart.
  std::array<size_t, 4> width = {strlen("NAME"), strlen("KIND"), strlen("VERSION"), strlen("HOSTS")};
  for (const gt::PluginListing& l : listings) {
    if (!l.plugin.ok()) continue;
    const gt::PluginDescriptor& d = *l.plugin->descriptor;
    const std::array<size_t, 4> cells = {strlen(d.name), gt::PluginKindName(d.kind).size(), strlen(d.version),
                                         HostsOf(d.hosts).size()};
    for (size_t i = 0; i < width.size(); ++i) width[i] = std::max(width[i], cells[i]);
  }
  auto row = [&](const std::string& name, const std::string& kind, const std::string& version,
                 const std::string& hosts, const std::string& rest) {
    std::cout << "  " << std::left << std::setw(static_cast<int>(width[0] + 2)) << name
              << std::setw(static_cast<int>(width[1] + 2)) << kind << std::setw(static_cast<int>(width[2] + 2))
              << version << std::setw(static_cast<int>(width[3] + 2)) << hosts << rest << "\n";
  };
  std::cout << "plugins:\n";
  row("NAME", "KIND", "VERSION", "HOSTS", "DESCRIPTION");
  for (const gt::PluginListing& l : listings) {
    if (!l.plugin.ok()) {
      std::cout << "  (unusable) " << l.plugin.status().message() << "\n";
      continue;
    }
    const gt::PluginDescriptor& d = *l.plugin->descriptor;
    row(d.name, std::string(gt::PluginKindName(d.kind)), d.version, HostsOf(d.hosts), d.description);
    if (d.option_count == 0) continue;
    std::cout << "  " << std::setw(static_cast<int>(width[0] + 2)) << "" << "options:";
    for (size_t i = 0; i < d.option_count; ++i) {
      const gt::OptionSpec& o = d.options[i];
      std::cout << (i ? "," : "") << " " << o.name << "=" << (*o.default_value ? o.default_value : "\"\"") << " ("
                << gt::OptionTypeName(o.type) << ")";
    }
    std::cout << "\n";
  }
  return 0;
}

// Where a dispatcher manifest without keys gets them: gt-dispatcher takes
// this user's default key set (made on its first start); "" when the
// manifest gives keys or opts out.
std::string DefaultKeysNote(const gt::HostManifest& m) {
  if (m.host != gt::HostKind::kDispatcher || m.security.enabled() || m.security.insecure) return "";
  gt::Result<std::string> dir = gt::DefaultKeyDir();
  return "no keys given: gt-dispatcher authenticates with this user's key set in " +
         (dir.ok() ? *dir : "(" + dir.status().message() + ")") +
         ", which this user's workers and clients on this machine find by themselves";
}

// What an operator who opted out of authentication must hear: said by
// `gt validate` and gt-dispatcher's first line alike.
std::string InsecureWarning(const gt::HostManifest& m) {
  if (m.host != gt::HostKind::kDispatcher) return "";
  return gt::InsecureListenWarning(m.security, gt::ToZmqEndpoint(m.listen));
}

int Validate(const std::vector<std::string>& files) {
  if (files.empty()) {
    PrintUsage();
    return 2;
  }
  int failures = 0;
  for (const std::string& f : files) {
    gt::Result<gt::HostManifest> m = gt::LoadManifestFile(f, std::nullopt);
    if (m.ok()) {
      if (std::string warning = InsecureWarning(*m); !warning.empty()) std::cout << f << ": " << warning << "\n";
      if (std::string note = DefaultKeysNote(*m); !note.empty()) std::cout << f << ": " << note << "\n";
      std::cout << f << ": ok (" << gt::HostKindName(m->host) << ", " << m->stages.size() << " stage(s)"
                << (m->backend ? ", backend " + std::string(m->backend->plugin.descriptor->name) : "") << ")\n";
    } else {
      std::cout << m.status().message() << "\n";
      ++failures;
    }
  }
  return failures ? 1 : 0;
}

// With `stdout_to` >= 0, the child's standard output goes there.
pid_t Spawn(const std::vector<std::string>& argv, int stdout_to = -1) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdout_to >= 0) posix_spawn_file_actions_adddup2(&actions, stdout_to, STDOUT_FILENO);
  pid_t pid = 0;
  const int failed = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (failed != 0) {
    std::cerr << "gt cluster: cannot start " << argv[0] << "\n";
    return -1;
  }
  return pid;
}

// The first line `fd` delivers within `timeout`; "" on end of file or timeout.
std::string ReadFirstLine(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string line;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd item{fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&item, 1, static_cast<int>(left.count())) <= 0) return "";
    char c = 0;
    if (read(fd, &c, 1) != 1) return "";
    if (c == '\n') return line;
    line += c;
  }
}

// The endpoint a dispatcher's first line says it listens on
// ("gt-dispatcher ID listening on EP[, ...]"); "" if it says none.
std::string ListeningEndpoint(const std::string& line) {
  const std::string marker = " listening on ";
  const size_t at = line.find(marker);
  if (at == std::string::npos) return "";
  const size_t from = at + marker.size();
  return line.substr(from, line.find_first_of(", ", from) - from);
}

// Copies what `fd` delivers to standard output until end of file.
void Forward(int fd) {
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;)
    if (write(STDOUT_FILENO, buffer, static_cast<size_t>(n)) < 0) break;
}

int Cluster(int argc, char** argv) {
  po::options_description desc("gt cluster options");
  desc.add_options()("workers,n", po::value<int>()->default_value(2), "number of workers")(
      "listen", po::value<std::string>()->default_value("tcp://127.0.0.1:5555"),
      "dispatcher endpoint; with port 0 a free port, named in the first line of output")(
      "metrics-port", po::value<int>()->default_value(0), "first metrics port (dispatcher; workers follow); 0: none")(
      "discovery", po::value<std::string>()->default_value(""),
      "host:port where the dispatcher serves Prometheus service discovery (/targets); \"\": none")(
      "manifest", po::value<std::string>()->default_value(""),
      "the dispatcher's manifest; default: the embedded default's stages")(
      "worker-manifest", po::value<std::string>()->default_value(""),
      "every worker's manifest; default: the embedded default's")(
      "insecure", "run without keys: every local user may then connect (default: this user's key set)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "gt cluster: " << e.what() << "\n" << desc;
    return 2;
  }
  fs::path bin = fs::read_symlink("/proc/self/exe").parent_path();
  std::string listen = vm["listen"].as<std::string>();
  int port = vm["metrics-port"].as<int>();
  auto metrics = [port](int k) { return port ? "127.0.0.1:" + std::to_string(port + k) : std::string(); };
  // The workers connect where the dispatcher says it listens: with port 0
  // it binds a free port, which only its first line names. That line is this
  // command's first line too; the rest of its output follows as it comes.
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    std::cerr << "gt cluster: pipe: " << std::strerror(errno) << "\n";
    return 1;
  }
  std::vector<pid_t> children;
  // --metrics and --discovery only when given: an empty one would override
  // the manifest's with none.
  std::vector<std::string> dispatcher = {(bin / "gt-dispatcher").string(), "--listen", listen, "--manifest",
                                         vm["manifest"].as<std::string>()};
  if (port) dispatcher.insert(dispatcher.end(), {"--metrics", metrics(0)});
  if (!vm["discovery"].defaulted()) dispatcher.insert(dispatcher.end(), {"--discovery", vm["discovery"].as<std::string>()});
  const bool insecure = vm.count("insecure") > 0;
  if (insecure) dispatcher.push_back("--insecure");
  children.push_back(Spawn(dispatcher, out[1]));
  close(out[1]);
  const std::string announced = ReadFirstLine(out[0], std::chrono::seconds(30));
  std::thread forward([fd = out[0]] {
    Forward(fd);
    close(fd);
  });
  listen = ListeningEndpoint(announced);
  if (listen.empty()) {
    std::cerr << "gt cluster: the dispatcher did not start" << (announced.empty() ? "" : ": " + announced) << "\n";
    if (children[0] > 0) {
      kill(children[0], SIGTERM);
      waitpid(children[0], nullptr, 0);
    }
    forward.join();
    return 1;
  }
  std::cout << announced << std::endl;
  for (int i = 0; i < vm["workers"].as<int>(); ++i) {
    // Without --metrics-port, "" (none): every worker would ask for the port
    // their shared manifest names, and all but one would fail. Without
    // --insecure they take this user's key set, as the dispatcher did.
    std::vector<std::string> worker = {(bin / "gt-worker").string(), "--connect", listen, "--id",
                                       "worker-" + std::to_string(i), "--metrics", metrics(i + 1), "--manifest",
                                       vm["worker-manifest"].as<std::string>()};
    if (insecure) worker.push_back("--insecure");
    children.push_back(Spawn(worker));
  }
  std::atomic<bool> stop{false};
  gt::services::ShutdownSignal signal(stop);
  bool failed = false;  // a process ended by itself: the cluster did not run as asked
  while (!stop) {
    int status = 0;
    pid_t done = waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      std::cerr << "gt cluster: process " << done << " exited; stopping the cluster\n";
      failed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (size_t i = children.size(); i-- > 0;)
    if (children[i] > 0) kill(children[i], SIGTERM);
  for (pid_t c : children)
    if (c > 0) waitpid(c, nullptr, 0);
  forward.join();
  return failed ? 1 : 0;
}

// One CURVE key pair per name: NAME.key for the host itself, NAME.pub for
// the peers that must accept it (a dispatcher's allow-list, a client's
// GT_SERVER_KEY).
int Keygen(const std::vector<std::string>& names) {
  if (names.empty()) {
    std::cerr << "usage: gt keygen NAME...   (e.g. gt keygen keys/dispatcher keys/workers/w0 keys/clients/alice)\n";
    return 2;
  }
  for (const std::string& name : names) {
    gt::Result<gt::CurveKeyPair> keys = gt::GenerateCurveKeyPair();
    gt::Status s = keys.ok() ? gt::WriteCurveKeyFiles(name, *keys) : keys.status();
    if (!s.ok()) {
      std::cerr << "gt keygen: " << s.message() << "\n";
      return 1;
    }
    std::cout << "wrote " << name << ".key (keep private) and " << name << ".pub\n";
  }
  return 0;
}

// The default of the plugin option ("hotpath window") a variable overrides,
// from the plugin's descriptor: the one place it is written.
gt::Result<std::string> OptionDefault(std::string_view option) {
  const size_t space = option.find(' ');
  gt::Result<gt::LoadedPlugin> plugin = gt::FindPlugin(std::string(option.substr(0, space)));
  if (!plugin.ok()) return plugin.status();
  const gt::PluginDescriptor& d = *plugin->descriptor;
  for (size_t i = 0; i < d.option_count; ++i)
    if (option.substr(space + 1) == d.options[i].name) return std::string(d.options[i].default_value);
  return gt::NotFound(std::string(option) + ": the plugin declares no such option");
}

// Every GT_* variable; with --markdown, as the rows of README.md's
// "Environment variables" table (tests/python/test_env_table.py).
int Env(const std::vector<std::string>& args) {
  const bool markdown = args.size() == 1 && args[0] == "--markdown";
  if (!args.empty() && !markdown) {
    std::cerr << "gt env: unexpected argument '" << args[0] << "'\nusage: " << FindSubcommand("env")->usage << "\n";
    return 2;
  }
  for (const gt::SettingSpec& s : gt::AllSettings()) {
    gt::Result<std::string> value = s.option ? OptionDefault(s.option) : std::string(s.default_value ? s.default_value : "");
    if (!value.ok()) {
      std::cerr << "gt env: " << s.name << ": " << value.status().message() << "\n";
      return 1;
    }
    const std::string given = value->empty() ? "unset" : "`" + *value + "`";
    std::string effect = s.doc;
    if (s.option) {
      const std::string_view option(s.option);
      const size_t space = option.find(' ');
      effect += " (" + std::string(option.substr(0, space)) + " `" + std::string(option.substr(space + 1)) + "`)";
    }
    if (markdown)
      std::cout << "| `" << s.name << "` | " << given << " | " << effect << " |\n";
    else
      std::cout << std::left << std::setw(24) << s.name << std::setw(9) << gt::SettingTypeName(s.type) << given
                << "\n    " << effect << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(std::cerr);
    return 2;
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    PrintUsage();
    return 0;
  }
  const Subcommand* sub = FindSubcommand(command);
  if (sub == nullptr) {
    std::cerr << "gt: unknown command '" << command << "'\n";
    PrintUsage(std::cerr);
    return 2;
  }
  std::vector<std::string> rest(argv + 2, argv + argc);
  if (command == "top") return gt::services::Top(argc - 1, argv + 1);  // its --help lists its options
  if (AsksForHelp(rest)) {
    PrintSubcommandHelp(*sub);
    return 0;
  }
  if (command == "inspect") return Inspect(rest);
  if (command == "validate") return Validate(rest);
  if (command == "cluster") return Cluster(argc - 1, argv + 1);
  if (command == "keygen") return Keygen(rest);
  return Env(rest);
}
