// Observability against real processes:
//  - the written metrics spec (docs/METRICS.md) and what a running dispatcher
//    and worker export agree, name by name, type, labels and host;
//  - the dispatcher's Prometheus service discovery lists its own and its live
//    workers' metrics endpoints, and forgets a worker that is lost;
//  - every panel and variable query of every Grafana dashboard returns data
//    from a real Prometheus that found the cluster through that discovery
//    with a config derived from configs/prometheus.yml;
//  - `gt top --once` shows every host and stage of a live cluster.
// Every process a test starts is stopped by the test.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <gtest/gtest.h>

#include "cluster.h"
#include "discovery_server.h"
#include "gt/instruction.h"
#include "host/manifest.h"

extern char** environ;

namespace gt::testing {
namespace {

namespace fs = std::filesystem;
namespace pt = boost::property_tree;

const std::string kSourceDir = GT_SOURCE_DIR;

// ---- files, processes -----------------------------------------------------------

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/gt-observability-XXXXXX";
    path_ = mkdtemp(name) ? name : "";
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  std::string operator/(const std::string& file) const { return path_ + "/" + file; }

 private:
  std::string path_;
};

// A child process with stdout and stderr in `log`; SIGTERMed and reaped when
// destroyed (if it has not exited by then).
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& log) : log_(log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Child() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool started() const { return pid_ > 0; }
  // False once it has exited (and then reaped: the destructor signals nothing).
  bool Running() {
    if (pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) != 0) pid_ = -1;
    return pid_ > 0;
  }
  // Waits for the exit; returns its status, or nullopt (and kills it) after
  // `timeout_ms`.
  std::optional<int> Wait(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (pid_ > 0) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::nullopt;
  }
  std::string Output() const { return ReadFile(log_); }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

bool WaitFor(const std::function<bool()>& condition, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return condition();
}

// ---- a cluster with the instruction_log stage on both hosts ---------------------

// Which stages the test cluster's hosts run besides instruction_log.
enum class Stages { kLogOnly, kWithHotpathAndCompile };

struct Cluster {
  // With `discovery`, the dispatcher serves service discovery on a loopback
  // port it binds itself (processes->discovery_port()).
  Cluster(const TempDir& dir, int workers, bool discovery, Stages stages = Stages::kLogOnly) {
    ClusterOptions options;
    options.workers = workers;
    // With hotpath and compile too (and sharding last in the dispatcher),
    // their metrics are held to the spec. The
    // per-sequence hotpath series appear only once a sequence is hot, so both
    // hosts must find one: the dispatcher runs compile before hotpath (its
    // compile stage exports its series but sees no markers), and passes its
    // hotpath's markers on to the worker, whose own hotpath then finds the
    // repetition and whose compile stage compiles it.
    const bool more = stages != Stages::kLogOnly;
    const std::string hotpath = "  - name: hotpath\n    plugin: hotpath\n";
    const std::string compile = "  - name: compile\n    plugin: compile\n";
    const std::string dispatcher_modifiers = more ? compile + hotpath : std::string();
    const std::string modifiers = more ? hotpath + compile : std::string();
    // A heartbeat timeout well above a loaded 2-core machine's scheduling
    // stalls: a worker declared dead mid-test drops out of discovery and `gt top`.
    std::string d = "host: dispatcher\nid: dispatcher\nheartbeat_interval_ms: 200\nheartbeat_timeout_ms: 5000\n"
                    "stages:\n  - name: log\n    plugin: instruction_log\n    options: {path: " + dir / "d.log" + "}\n" +
                    dispatcher_modifiers + (more ? "  - name: sharding\n    plugin: sharding\n" : "");
    if (discovery) d += "discovery: 127.0.0.1:0\n";
    WriteFile(dir / "dispatcher.yaml", d);
    // Every worker logs to one file, which the test never reads.
    WriteFile(dir / "worker.yaml",
              "host: worker\nheartbeat_interval_ms: 200\nstages:\n  - name: log\n    plugin: instruction_log\n"
              "    options: {path: " + dir / "w.log" + "}\n" + modifiers + "backend:\n  plugin: torch\n");
    options.dispatcher_manifest = dir / "dispatcher.yaml";
    options.worker_manifest = dir / "worker.yaml";
    processes = std::make_unique<ProcessCluster>(options);
  }
  std::unique_ptr<ProcessCluster> processes;
};

Instruction Make(Op op, uint64_t seq, std::vector<TensorId> results, std::vector<TensorId> operands) {
  Instruction inst;
  inst.op = op;
  inst.seq = seq;
  inst.results = std::move(results);
  inst.operands = std::move(operands);
  return inst;
}

// A small, repeatable workload through a RawClient: creation, elementwise,
// matmul, a reduction, a fetch, frees, and one instruction naming an unknown
// tensor (so error counters move too).
class Workload {
 public:
  Workload(zmq::context_t& context, const std::string& endpoint) : client_(context, endpoint) {}

  // One round; true when its sync point was answered.
  bool Round() {
    TensorId a = next_++, b = next_++, c = next_++, d = next_++, e = next_++, bad = next_++;
    std::vector<float> values = {1, 2, 3, 4};
    Instruction from;
    from.op = Op::kFromBytes;
    from.seq = seq_++;
    from.results = {a};
    from.attrs.shape = {2, 2};
    from.payload = CopyToBlob(values.data(), values.size() * sizeof(float));
    Instruction sum = Make(Op::kSum, seq_++, {e}, {d});
    client_.Send({from, Make(Op::kAdd, seq_++, {b}, {a, a}), Make(Op::kMatmul, seq_++, {c}, {a, b}),
                  Make(Op::kRelu, seq_++, {d}, {c}), sum, Make(Op::kFetch, seq_++, {}, {e}),
                  Make(Op::kNeg, seq_++, {bad}, {kUnknown}), Make(Op::kFree, seq_++, {}, {a, b, c, d, e})});
    std::vector<std::pair<wire::Envelope, std::string>> data;
    return client_.Sync(&data).has_value();
  }

 private:
  static constexpr TensorId kUnknown = 1'000'000'000;
  RawClient client_;
  TensorId next_ = 1;
  uint64_t seq_ = 1;
};

// Runs Workload rounds on its own thread until destroyed.
class BackgroundWorkload {
 public:
  explicit BackgroundWorkload(const std::string& endpoint)
      : thread_([this, endpoint] {
          Workload w(context_, endpoint);
          while (!stop_) {
            if (w.Round()) ++rounds_;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }) {}
  ~BackgroundWorkload() {
    stop_ = true;
    thread_.join();
  }
  int rounds() const { return rounds_; }

 private:
  zmq::context_t context_{1};
  std::atomic<bool> stop_{false};
  std::atomic<int> rounds_{0};
  std::thread thread_;
};

// ---- the written spec -----------------------------------------------------------

struct SpecRow {
  std::string type;
  std::set<std::string> labels;
  std::set<std::string> hosts;  // "dispatcher", "worker"
};

std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, '|')) {
    size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
    cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  return cells;
}

std::vector<std::string> Backticked(const std::string& text) {
  std::vector<std::string> out;
  std::regex re("`([^`]+)`");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

// Every metric row of docs/METRICS.md: the tables whose header starts
// "| name | type | unit | labels | hosts |".
std::map<std::string, SpecRow> ReadSpec() {
  std::map<std::string, SpecRow> spec;
  std::istringstream in(ReadFile(kSourceDir + "/docs/METRICS.md"));
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.rfind("| name | type | unit | labels | hosts |", 0) == 0) {
      in_table = true;
      continue;
    }
    if (line.empty() || line[0] != '|') {
      in_table = false;
      continue;
    }
    if (!in_table || line.rfind("|---", 0) == 0) continue;
    std::vector<std::string> c = Cells(line);  // c[0] is the empty text before the first '|'
    if (c.size() < 8) continue;
    std::vector<std::string> name = Backticked(c[1]);
    if (name.size() != 1) continue;
    SpecRow row;
    row.type = c[2];
    for (const std::string& l : Backticked(c[4])) row.labels.insert(l);
    if (c[5] == "both") {
      row.hosts = {"dispatcher", "worker"};
    } else {
      row.hosts = {c[5]};
    }
    spec[name[0]] = row;
  }
  return spec;
}

// ---- what a host exports --------------------------------------------------------

struct Exported {
  std::string type;                              // from # TYPE
  std::set<std::string> suffixes;                // "", "_bucket", "_sum", "_count" seen on samples
  std::set<std::set<std::string>> label_sets;    // label names of samples, le / quantile removed
  bool quantile = false;                         // some sample had `quantile`
  bool le = false;                               // some _bucket sample had `le`
};

std::set<std::string> LabelNames(const std::string& sample) {
  std::set<std::string> names;
  size_t open = sample.find('{');
  if (open == std::string::npos || open > sample.find(' ')) return names;
  std::regex re("([a-zA-Z_][a-zA-Z0-9_]*)=\"(?:[^\"\\\\]|\\\\.)*\"");
  std::string inside = sample.substr(open, sample.find('}', open) - open);
  for (auto it = std::sregex_iterator(inside.begin(), inside.end(), re); it != std::sregex_iterator(); ++it)
    names.insert((*it)[1]);
  return names;
}

std::map<std::string, Exported> ReadExposition(const std::string& text) {
  std::map<std::string, Exported> families;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      families[name].type = type;
    }
  }
  std::istringstream samples(text);
  while (std::getline(samples, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::string name = line.substr(0, line.find_first_of("{ "));
    std::string base = name, suffix;
    for (const char* s : {"_bucket", "_sum", "_count"}) {
      std::string sfx = s;
      if (!families.count(name) && name.size() > sfx.size() && name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0 &&
          families.count(name.substr(0, name.size() - sfx.size()))) {
        base = name.substr(0, name.size() - sfx.size());
        suffix = sfx;
      }
    }
    Exported& f = families[base];  // a sample without a # TYPE gets type ""
    f.suffixes.insert(suffix);
    std::set<std::string> labels = LabelNames(line);
    if (labels.erase("quantile")) f.quantile = true;
    if (suffix == "_bucket" && labels.erase("le")) f.le = true;
    f.label_sets.insert(labels);
  }
  return families;
}

std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out.empty() ? "(none)" : out;
}

TEST(MetricsSpecTest, EveryExportedMetricIsSpecifiedAndEverySpecifiedOneIsExported) {
  std::map<std::string, SpecRow> spec = ReadSpec();
  ASSERT_GT(spec.size(), 20u) << "could not read the metric tables of docs/METRICS.md";

  TempDir dir;
  Cluster cluster(dir, 1, false, Stages::kWithHotpathAndCompile);
  ASSERT_TRUE(cluster.processes->WaitForWorkers(1)) << "worker did not register";
  {
    zmq::context_t context(1);
    Workload workload(context, cluster.processes->endpoint());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(workload.Round());
  }
  std::map<std::string, std::map<std::string, Exported>> hosts = {
      {"dispatcher", ReadExposition(HttpGet(cluster.processes->dispatcher_metrics_port(), "/metrics"))},
      {"worker", ReadExposition(HttpGet(cluster.processes->worker_metrics_ports()[0], "/metrics"))}};

  for (const auto& [host, families] : hosts) {
    ASSERT_FALSE(families.empty()) << "nothing scraped from the " << host;
    for (const auto& [name, f] : families) {
      auto row = spec.find(name);
      if (row == spec.end()) {
        ADD_FAILURE() << name << " (" << f.type << ") is exported by the " << host << " but not in docs/METRICS.md";
        continue;
      }
      const SpecRow& want = row->second;
      EXPECT_TRUE(want.hosts.count(host)) << name << " is exported by the " << host << ", docs/METRICS.md says only "
                                          << Join(want.hosts);
      EXPECT_EQ(f.type, want.type) << name << " on the " << host;
      for (const auto& labels : f.label_sets)
        EXPECT_EQ(Join(labels), Join(want.labels)) << "labels of " << name << " on the " << host;
      if (want.type == "histogram") {
        EXPECT_EQ(f.suffixes, (std::set<std::string>{"_bucket", "_sum", "_count"})) << name << " on the " << host;
        EXPECT_TRUE(f.le) << name << "_bucket has no le label on the " << host;
      } else if (want.type == "summary") {
        EXPECT_EQ(f.suffixes, (std::set<std::string>{"", "_sum", "_count"})) << name << " on the " << host;
        EXPECT_TRUE(f.quantile) << name << " has no quantile label on the " << host;
      } else {
        EXPECT_EQ(f.suffixes, (std::set<std::string>{""})) << name << " on the " << host;
      }
    }
  }
  for (const auto& [name, row] : spec)
    for (const std::string& host : row.hosts)
      EXPECT_TRUE(hosts[host].count(name)) << name << " is in docs/METRICS.md for the " << host
                                           << " but a running " << host << " does not export it";
}

// ---- service discovery ----------------------------------------------------------

// {target -> role} of a discovery document; empty (and a failure) when it is not one.
std::map<std::string, std::string> Targets(const std::string& json) {
  std::map<std::string, std::string> out;
  pt::ptree root;
  try {
    std::istringstream in(json);
    pt::read_json(in, root);
  } catch (const pt::json_parser_error& e) {
    ADD_FAILURE() << "not JSON: " << e.what() << "\n" << json;
    return out;
  }
  for (const auto& [key, group] : root) {
    EXPECT_EQ(key, "") << "not a list:\n" << json;
    for (const auto& [k, t] : group.get_child("targets", pt::ptree()))
      out[t.get_value<std::string>()] = group.get<std::string>("labels.role", "");
  }
  return out;
}

std::string Local(int port) { return "127.0.0.1:" + std::to_string(port); }

TEST(DiscoveryTest, ListsTheDispatcherAndItsLiveWorkersAndForgetsALostOne) {
  TempDir dir;
  Cluster cluster(dir, 2, true);
  ProcessCluster& p = *cluster.processes;
  ASSERT_TRUE(p.WaitForWorkers(2)) << "workers did not register";
  const int discovery = p.discovery_port();
  ASSERT_NE(discovery, 0) << "the dispatcher announced no discovery port";
  std::map<std::string, std::string> all = {{Local(p.dispatcher_metrics_port()), "dispatcher"},
                                            {Local(p.worker_metrics_ports()[0]), "worker"},
                                            {Local(p.worker_metrics_ports()[1]), "worker"}};
  EXPECT_EQ(Targets(HttpGet(discovery, "/targets")), all);

  // Readers on other threads while the dispatcher's thread changes the list.
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i)
    readers.emplace_back([&] {
      while (!stop) {
        if (HttpGet(discovery, "/targets").find("\"role\": \"dispatcher\"") == std::string::npos) ++bad;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  p.KillWorkerForTest(1);
  std::map<std::string, std::string> left = all;
  left.erase(Local(p.worker_metrics_ports()[1]));
  EXPECT_TRUE(WaitFor([&] { return Targets(HttpGet(discovery, "/targets")) == left; }, 20000))
      << HttpGet(discovery, "/targets");
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad, 0) << "some answers did not list the dispatcher";

  EXPECT_NE(HttpGet(discovery, "/metrics").find("not found"), std::string::npos);
}

TEST(DiscoveryTest, WildcardHostsArePublishedAsReachableAddresses) {
  using services::DiscoveryTarget;
  std::string json = services::RenderDiscoveryTargets(
      {
          {"dispatcher", "0.0.0.0:9100", ""},       // the address the request came in on
          {"worker", "0.0.0.0:9101", "10.1.2.3"},   // a worker on another machine: where it connected from
          {"worker", "0.0.0.0:9102", "127.0.0.1"},  // a worker on this machine
          {"worker", "127.0.0.1:9103", "10.1.2.4"}, // an explicit host is kept
          {"worker", "[::]:9104", ""},
          {"worker", "", ""},                       // announced nothing: left out
      },
      "::ffff:192.0.2.2");
  EXPECT_EQ(Targets(json), (std::map<std::string, std::string>{{"192.0.2.2:9100", "dispatcher"},
                                                               {"10.1.2.3:9101", "worker"},
                                                               {"192.0.2.2:9102", "worker"},
                                                               {"127.0.0.1:9103", "worker"},
                                                               {"192.0.2.2:9104", "worker"}}));
  EXPECT_EQ(Targets(services::RenderDiscoveryTargets({}, "127.0.0.1")), (std::map<std::string, std::string>{}));
}

TEST(DiscoveryTest, OnlyADispatcherManifestTakesADiscoveryAddress) {
  EXPECT_TRUE(ValidateManifest("host: dispatcher\ndiscovery: 0.0.0.0:9099\n", std::nullopt).empty());
  Result<HostManifest> m = ParseManifest("host: dispatcher\ndiscovery: 0.0.0.0:9099\n", "d.yaml", std::nullopt);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->discovery, "0.0.0.0:9099");
  std::vector<ManifestProblem> problems =
      ValidateManifest("host: worker\ndiscovery: 0.0.0.0:9099\nbackend:\n  plugin: torch\n", std::nullopt);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].path, "discovery");
  EXPECT_EQ(problems[0].line, 2);
}

// ---- dashboards -----------------------------------------------------------------

struct Query {
  std::string where;  // "<file>: panel 'title'" or "<file>: variable 'name'"
  std::string expr;   // PromQL with Grafana variables still in it
};

struct Dashboard {
  std::string file;
  std::set<std::string> variables;
  std::vector<Query> queries;
  std::vector<std::string> problems;
};

void CollectPanels(const pt::ptree& panels, Dashboard& d, std::set<int>& ids) {
  for (const auto& [k, panel] : panels) {
    std::string title = panel.get<std::string>("title", "");
    int id = panel.get<int>("id", -1);
    if (!ids.insert(id).second) d.problems.push_back("panel id " + std::to_string(id) + " is used twice");
    if (panel.get<std::string>("type", "") == "row") {
      CollectPanels(panel.get_child("panels", pt::ptree()), d, ids);
      continue;
    }
    std::string where = d.file + ": panel '" + title + "'";
    if (panel.get<std::string>("datasource.uid", "") != "${datasource}")
      d.problems.push_back(where + " does not use the ${datasource} variable");
    if (panel.get<std::string>("description", "").empty()) d.problems.push_back(where + " has no description");
    auto targets = panel.get_child_optional("targets");
    if (!targets || targets->empty()) d.problems.push_back(where + " has no query");
    if (targets)
      for (const auto& [kt, t] : *targets) d.queries.push_back({where, t.get<std::string>("expr", "")});
  }
}

std::vector<Dashboard> ReadDashboards() {
  std::vector<Dashboard> out;
  for (const auto& entry : fs::directory_iterator(kSourceDir + "/dashboards")) {
    if (entry.path().extension() != ".json") continue;
    Dashboard d;
    d.file = entry.path().filename().string();
    pt::ptree root;
    try {
      pt::read_json(entry.path().string(), root);
    } catch (const pt::json_parser_error& e) {
      d.problems.push_back(d.file + ": not JSON: " + e.what());
      out.push_back(d);
      continue;
    }
    for (const auto& [k, v] : root.get_child("templating.list", pt::ptree())) {
      std::string name = v.get<std::string>("name", "");
      d.variables.insert(name);
      if (v.get<std::string>("type", "") == "query")
        d.queries.push_back({d.file + ": variable '" + name + "'", v.get<std::string>("query.query", "")});
    }
    std::set<int> ids;
    CollectPanels(root.get_child("panels", pt::ptree()), d, ids);
    out.push_back(d);
  }
  std::sort(out.begin(), out.end(), [](const Dashboard& a, const Dashboard& b) { return a.file < b.file; });
  return out;
}

// `label_values(SELECTOR, label)` (a Grafana variable query) as PromQL that
// returns one series per value; anything else unchanged.
std::string AsPromQL(const std::string& expr) {
  static const std::regex label_values(R"(^\s*label_values\((.*),\s*([a-zA-Z_]+)\s*\)\s*$)");
  std::smatch m;
  if (std::regex_match(expr, m, label_values)) return "count by (" + m[2].str() + ") (" + m[1].str() + ")";
  return expr;
}

// Grafana variables replaced by the regex that matches every value.
std::string Substitute(const std::string& expr) {
  static const std::regex var(R"(\$\{?(instance|stage)\}?)");
  return std::regex_replace(expr, var, ".*");
}

TEST(DashboardTest, PanelsQueryOnlySpecifiedMetricsThroughTheDatasourceVariable) {
  std::map<std::string, SpecRow> spec = ReadSpec();
  std::vector<Dashboard> dashboards = ReadDashboards();
  ASSERT_GE(dashboards.size(), 3u);
  static const std::regex metric(R"(\b((?:gt|exposer)_[a-z_]+))");
  for (const Dashboard& d : dashboards) {
    for (const std::string& p : d.problems) ADD_FAILURE() << p;
    EXPECT_TRUE(d.variables.count("datasource")) << d.file;
    EXPECT_TRUE(d.variables.count("instance")) << d.file;
    for (const Query& q : d.queries) {
      EXPECT_FALSE(q.expr.empty()) << q.where;
      // Every variable a query uses is defined.
      static const std::regex var(R"(\$\{?([a-zA-Z_]+)\}?)");
      for (auto it = std::sregex_iterator(q.expr.begin(), q.expr.end(), var); it != std::sregex_iterator(); ++it)
        EXPECT_TRUE(d.variables.count((*it)[1])) << q.where << " uses undefined $" << (*it)[1];
      // Every metric it names is in the spec (a histogram through _bucket/_sum/_count).
      for (auto it = std::sregex_iterator(q.expr.begin(), q.expr.end(), metric); it != std::sregex_iterator(); ++it) {
        std::string name = (*it)[1];
        bool known = spec.count(name) > 0;
        for (const char* s : {"_bucket", "_sum", "_count"})
          if (name.size() > strlen(s) && name.compare(name.size() - strlen(s), strlen(s), s) == 0)
            known = known || spec.count(name.substr(0, name.size() - strlen(s))) > 0;
        EXPECT_TRUE(known) << q.where << " uses " << name << ", which docs/METRICS.md does not list";
      }
    }
  }
}

// ---- a real Prometheus ----------------------------------------------------------

std::string UrlEncode(const std::string& s) {
  std::string out;
  char buf[4];
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

struct QueryResult {
  bool ok = false;      // status "success"
  int series = 0;       // result vector size
  int numbers = 0;      // samples whose value is a number (not NaN)
  double first = NAN;   // the first sample's value
  std::string body;
};

QueryResult Instant(int port, const std::string& promql) {
  QueryResult r;
  r.body = HttpGet(port, "/api/v1/query?query=" + UrlEncode(promql));
  pt::ptree root;
  try {
    std::istringstream in(r.body);
    pt::read_json(in, root);
  } catch (const pt::json_parser_error&) {
    return r;
  }
  r.ok = root.get<std::string>("status", "") == "success";
  for (const auto& [k, series] : root.get_child("data.result", pt::ptree())) {
    ++r.series;
    // "value": [time, "text"]: the second child.
    auto value = series.get_child("value", pt::ptree());
    if (value.size() != 2) continue;
    std::string text = std::next(value.begin())->second.get_value<std::string>();
    double v = text == "NaN" ? NAN : std::strtod(text.c_str(), nullptr);
    if (r.series == 1) r.first = v;
    if (!std::isnan(v)) ++r.numbers;
  }
  return r;
}

// configs/prometheus.yml pointed at `discovery`, scraping every second.
std::string DeriveConfig(int discovery) {
  std::string config = ReadFile(kSourceDir + "/configs/prometheus.yml");
  struct Edit {
    std::regex from;
    std::string to;
  };
  std::vector<Edit> edits = {
      {std::regex(R"(url: http://[^/\s]+/targets)"), "url: http://127.0.0.1:" + std::to_string(discovery) + "/targets"},
      {std::regex(R"(scrape_interval: \S+)"), "scrape_interval: 1s"},
      {std::regex(R"(evaluation_interval: \S+)"), "evaluation_interval: 1s"},
      {std::regex(R"(refresh_interval: \S+)"), "refresh_interval: 1s"},
  };
  for (const Edit& e : edits) {
    EXPECT_TRUE(std::regex_search(config, e.from)) << "configs/prometheus.yml has no line to set to '" << e.to << "'";
    config = std::regex_replace(config, e.from, e.to);
  }
  return config;
}

TEST(PrometheusTest, EveryDashboardPanelReturnsDataFromARealPrometheus) {
  const std::string prometheus = GT_PROMETHEUS_BIN;
  if (prometheus.empty()) GTEST_SKIP() << "prometheus is not installed (scripts/setup.sh installs it)";
  std::vector<Dashboard> dashboards = ReadDashboards();
  ASSERT_GE(dashboards.size(), 3u);

  TempDir dir;
  const int workers = 2;
  Cluster cluster(dir, workers, true);
  ASSERT_TRUE(cluster.processes->WaitForWorkers(workers)) << "workers did not register";
  const int discovery = cluster.processes->discovery_port();
  ASSERT_NE(discovery, 0) << "the dispatcher announced no discovery port";
  BackgroundWorkload workload(cluster.processes->endpoint());

  WriteFile(dir / "prometheus.yml", DeriveConfig(discovery));
  // Prometheus must be told its port, and one probed free can be taken by a
  // parallel test's process before it binds: a start that finds it taken is
  // retried on another.
  std::unique_ptr<Child> started;
  int port = 0;
  for (int attempt = 0; attempt < 5 && !started; ++attempt) {
    port = FreeTcpPort();
    auto child = std::make_unique<Child>(
        std::vector<std::string>{prometheus, "--config.file=" + dir / "prometheus.yml",
                                 "--storage.tsdb.path=" + dir / "tsdb",
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port), "--log.level=warn"},
        dir / "prometheus.log");
    ASSERT_TRUE(child->started());
    const bool ready = WaitFor(
        [&] { return !child->Running() || HttpGet(port, "/-/ready").find("Ready") != std::string::npos; }, 60000);
    if (ready && child->Running()) {
      started = std::move(child);
    } else {
      ASSERT_NE(child->Output().find("address already in use"), std::string::npos)
          << "Prometheus did not become ready:\n" << child->Output();
    }
  }
  ASSERT_TRUE(started) << "Prometheus found every port it was given taken";
  Child& server = *started;

  // Every host found through discovery and scraped at least three times, so
  // that every [1m] rate has two samples.
  const int hosts = workers + 1;
  ASSERT_TRUE(WaitFor([&] { return Instant(port, "count(up{job=\"gt\"} == 1)").first == hosts; }, 60000))
      << "Prometheus did not find the " << hosts << " hosts through discovery: "
      << Instant(port, "up").body << "\n" << server.Output();
  ASSERT_TRUE(WaitFor([&] { return Instant(port, "min(count_over_time(up{job=\"gt\"}[1m]))").first >= 3; }, 60000))
      << Instant(port, "count_over_time(up[1m])").body;
  EXPECT_GT(workload.rounds(), 0);

  // Every query of every dashboard, until each returns at least one number.
  std::vector<std::pair<Query, QueryResult>> failing;
  WaitFor(
      [&] {
        failing.clear();
        for (const Dashboard& d : dashboards)
          for (const Query& q : d.queries) {
            QueryResult r = Instant(port, Substitute(AsPromQL(q.expr)));
            if (!r.ok || r.numbers == 0) failing.emplace_back(q, r);
          }
        return failing.empty();
      },
      60000);
  for (const auto& [q, r] : failing)
    ADD_FAILURE() << q.where << " returned no data:\n  " << Substitute(AsPromQL(q.expr)) << "\n  " << r.body;
  size_t total = 0;
  for (const Dashboard& d : dashboards) total += d.queries.size();
  std::cout << "evaluated " << total << " dashboard queries against Prometheus; " << failing.size() << " without data\n";
}

// ---- gt top ---------------------------------------------------------------------

TEST(GtTopTest, OnceShowsEveryHostAndStageOfALiveCluster) {
  TempDir dir;
  Cluster cluster(dir, 2, true);
  ASSERT_TRUE(cluster.processes->WaitForWorkers(2)) << "workers did not register";
  const int discovery = cluster.processes->discovery_port();
  ASSERT_NE(discovery, 0) << "the dispatcher announced no discovery port";
  BackgroundWorkload workload(cluster.processes->endpoint());
  ASSERT_TRUE(WaitFor([&] { return workload.rounds() > 0; }, 20000));

  Child top({BinDir() + "/gt", "top", "--once", "--interval", "1", "--discovery", Local(discovery)}, dir / "top.out");
  std::optional<int> status = top.Wait(60000);
  std::string out = top.Output();
  ASSERT_EQ(status, 0) << out;
  // One row per host, with its role and scrape target ...
  EXPECT_TRUE(std::regex_search(out, std::regex("\ndispatcher +dispatcher +127\\.0\\.0\\.1:" +
                                                std::to_string(cluster.processes->dispatcher_metrics_port()) + " ")))
      << out;
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(std::regex_search(out, std::regex("\nworker-" + std::to_string(i) + " +worker +127\\.0\\.0\\.1:" +
                                                  std::to_string(cluster.processes->worker_metrics_ports()[i]) + " ")))
        << out;
  // ... one per stage of every host ...
  for (const char* row : {"\ndispatcher +log ", "\ndispatcher +router ", "\nworker-0 +log ", "\nworker-0 +backend ",
                          "\nworker-1 +backend "})
    EXPECT_TRUE(std::regex_search(out, std::regex(row))) << "no row matching '" << row + 1 << "' in\n" << out;
  // ... instructions flowing into the router, and the ops the workers ran.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("\ndispatcher +router +([0-9.]+[kMG]?) "))) << out;
  EXPECT_NE(m[1].str(), "0") << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\nworker-[01] +matmul +[0-9.]+"))) << out;
  // ... and who uses which worker (the workload's session), how much.
  EXPECT_TRUE(std::regex_search(out, std::regex("\nsession-[0-9]+ +worker-[01] +[0-9.]+% "))) << out;
  EXPECT_EQ(out.find("unreachable"), std::string::npos) << out;
}

TEST(GtTopTest, OnceFailsWhenNothingAnswers) {
  TempDir dir;
  Child top({BinDir() + "/gt", "top", "--once", "--interval", "0.1", "--discovery", Local(FreeTcpPort())},
            dir / "top.out");
  std::optional<int> status = top.Wait(30000);
  EXPECT_EQ(status, 1) << top.Output();
  EXPECT_NE(top.Output().find("discovery at 127.0.0.1:"), std::string::npos) << top.Output();
  // Issue 40: against a plain `gt cluster` (no metrics) it says what to pass.
  EXPECT_NE(top.Output().find("--metrics-port 9100 --discovery 127.0.0.1:9099"), std::string::npos) << top.Output();
}

}  // namespace
}  // namespace gt::testing
