// What the observability_test files share: files and child processes, a
// cluster with the instruction_log stage on both hosts and workloads to keep
// it busy, the written metrics spec (docs/METRICS.md) as rows, and a host's
// Prometheus exposition as families.
#pragma once

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

namespace gt::testing::observability_test {

namespace fs = std::filesystem;
namespace pt = boost::property_tree;

const std::string kSourceDir = GT_SOURCE_DIR;

// ---- files, processes -----------------------------------------------------------

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

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

inline bool WaitFor(const std::function<bool()>& condition, int timeout_ms) {
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

inline Instruction Make(Op op, uint64_t seq, std::vector<TensorId> results, std::vector<TensorId> operands) {
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

inline std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, '|')) {
    size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
    cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  return cells;
}

inline std::vector<std::string> Backticked(const std::string& text) {
  std::vector<std::string> out;
  std::regex re("`([^`]+)`");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

// Every metric row of docs/METRICS.md: the tables whose header starts
// "| name | type | unit | labels | hosts |".
inline std::map<std::string, SpecRow> ReadSpec() {
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

inline std::set<std::string> LabelNames(const std::string& sample) {
  std::set<std::string> names;
  size_t open = sample.find('{');
  if (open == std::string::npos || open > sample.find(' ')) return names;
  std::regex re("([a-zA-Z_][a-zA-Z0-9_]*)=\"(?:[^\"\\\\]|\\\\.)*\"");
  std::string inside = sample.substr(open, sample.find('}', open) - open);
  for (auto it = std::sregex_iterator(inside.begin(), inside.end(), re); it != std::sregex_iterator(); ++it)
    names.insert((*it)[1]);
  return names;
}

inline std::map<std::string, Exported> ReadExposition(const std::string& text) {
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

inline std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out.empty() ? "(none)" : out;
}

}  // namespace gt::testing::observability_test
