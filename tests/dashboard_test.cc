// The Grafana dashboards against real processes: every panel and variable
// query of every dashboard names only specified metrics through the
// datasource variable, and returns data from a real Prometheus that found the
// cluster through the dispatcher's service discovery, with a config derived
// from configs/prometheus.yml (observability_test_support.h has the cluster
// and the spec). Every process a test starts is stopped by the test. Part of
// observability_test.
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

}  // namespace
}  // namespace gt::testing
