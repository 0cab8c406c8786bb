// Observability against real processes:
//  - the written metrics spec (docs/METRICS.md) and what a running dispatcher
//    and worker export agree, name by name, type, labels and host;
//  - the dispatcher's Prometheus service discovery lists its own and its live
//    workers' metrics endpoints, and forgets a worker that is lost;
//  - every panel and variable query of every Grafana dashboard returns data
//    from a real Prometheus that found the cluster through that discovery
//    with a config derived from configs/prometheus.yml;
//  - `gt top --once` shows every host and stage of a live cluster.
// Every process a test starts is stopped by the test. The dashboards and the
// real Prometheus are in dashboard_test.cc, the shared parts in
// observability_test_support.h; both make the suite observability_test.
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
#include "observability_test_support.h"

namespace gt::testing {
namespace {
using namespace observability_test;

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
