#include "top.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include <boost/program_options.hpp>

#include "service_common.h"

namespace gt::services {
namespace {

namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;
using Labels = std::map<std::string, std::string>;

constexpr int kScrapeTimeoutMs = 3000;

// ---- one scrape of one endpoint ----------------------------------------------

struct Scrape {
  std::string target;
  Clock::time_point at;
  std::optional<std::string> error;  // set when the endpoint did not answer
  std::vector<MetricSample> samples;

  // Sum of the samples named `name` whose labels include `match`.
  double Sum(const std::string& name, const Labels& match) const {
    double total = 0;
    for (const MetricSample& s : samples) {
      if (s.name != name) continue;
      bool ok = true;
      for (const auto& [k, v] : match) {
        auto it = s.labels.find(k);
        if (it == s.labels.end() || it->second != v) ok = false;
      }
      if (ok) total += s.value;
    }
    return total;
  }

  // Distinct values of label tuple `keys` among samples named `name`.
  std::vector<Labels> Series(const std::string& name, const std::vector<std::string>& keys) const {
    std::set<Labels> seen;
    for (const MetricSample& s : samples) {
      if (s.name != name) continue;
      Labels l;
      for (const std::string& k : keys)
        if (auto it = s.labels.find(k); it != s.labels.end()) l[k] = it->second;
      seen.insert(l);
    }
    return {seen.begin(), seen.end()};
  }
};

Scrape ScrapeTarget(const std::string& target) {
  Scrape s;
  s.target = target;
  Result<std::string> body = HttpGetBody(target, "/metrics", kScrapeTimeoutMs);
  s.at = Clock::now();
  if (!body.ok()) {
    s.error = body.status().message();
    return s;
  }
  s.samples = ParseExposition(*body);
  return s;
}

// ---- rates between two scrapes -----------------------------------------------

struct Window {
  const Scrape& before;
  const Scrape& after;
  double seconds;

  // Per-second increase of counter `name` (summed over matching series). A
  // counter that went down was reset (the host restarted): its new value is
  // the increase.
  double Rate(const std::string& name, const Labels& match) const {
    double a = before.Sum(name, match), b = after.Sum(name, match);
    double increase = b >= a ? b - a : b;
    return seconds > 0 ? increase / seconds : 0;
  }
  double Increase(const std::string& name, const Labels& match) const { return Rate(name, match) * seconds; }

  // Quantile `q` of histogram `name` over the window, as Prometheus'
  // histogram_quantile() computes it (linear within a bucket); nullopt when
  // nothing was observed.
  std::optional<double> Quantile(double q, const std::string& name, const Labels& match) const {
    std::map<double, double> cumulative;  // upper bound -> increase of the bucket counter
    for (const MetricSample& s : after.samples) {
      if (s.name != name + "_bucket") continue;
      auto le = s.labels.find("le");
      if (le == s.labels.end()) continue;
      Labels l = match;
      l["le"] = le->second;
      double bound = le->second == "+Inf" ? INFINITY : std::strtod(le->second.c_str(), nullptr);
      cumulative[bound] = Increase(name + "_bucket", l);
    }
    if (cumulative.empty() || cumulative.rbegin()->second <= 0) return std::nullopt;
    double rank = q * cumulative.rbegin()->second;
    double lower = 0, below = 0;
    for (const auto& [bound, count] : cumulative) {
      if (count >= rank) {
        if (std::isinf(bound)) return lower;  // above the largest finite bound
        if (count == below) return bound;
        return lower + (bound - lower) * (rank - below) / (count - below);
      }
      lower = bound;
      below = count;
    }
    return lower;
  }
};

// ---- formatting --------------------------------------------------------------

std::string Fixed(double v, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << v;
  return out.str();
}

std::string Count(double v) {
  if (v >= 1e9) return Fixed(v / 1e9, 1) + "G";
  if (v >= 1e6) return Fixed(v / 1e6, 1) + "M";
  if (v >= 1e4) return Fixed(v / 1e3, 1) + "k";
  return Fixed(v, v == std::floor(v) ? 0 : 1);
}

std::string Bytes(double v) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return Fixed(v, u == 0 ? 0 : 1) + units[u];
}

std::string Duration(std::optional<double> seconds) {
  if (!seconds) return "-";
  double s = *seconds;
  if (s < 1e-3) return Fixed(s * 1e6, 1) + "us";
  if (s < 1) return Fixed(s * 1e3, 1) + "ms";
  return Fixed(s, 2) + "s";
}

// A table printed with columns as wide as their widest cell.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.size() == 1; }
  void Print(std::ostream& out) const {
    std::vector<size_t> width(rows_[0].size(), 0);
    for (const auto& r : rows_)
      for (size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], r[i].size());
    for (const auto& r : rows_) {
      for (size_t i = 0; i < r.size(); ++i) {
        // Names left-aligned (the first columns), numbers right-aligned.
        bool text = i < text_columns_;
        out << (i ? "  " : "") << (text ? std::left : std::right) << std::setw(static_cast<int>(width[i])) << r[i];
      }
      out << "\n";
    }
  }
  void set_text_columns(size_t n) { text_columns_ = n; }

 private:
  std::vector<std::vector<std::string>> rows_;
  size_t text_columns_ = 1;
};

void Print(const std::vector<Scrape>& before, const std::vector<Scrape>& after, std::ostream& out) {
  Table hosts({"INSTANCE", "ROLE", "TARGET", "MSG IN/s", "MSG OUT/s", "BYTES IN/s", "BYTES OUT/s", "CLIENTS",
               "WORKERS", "TENSORS", "RESIDENT", "ERRORS/s", "MALFORMED/s"});
  hosts.set_text_columns(3);
  Table stages({"INSTANCE", "STAGE", "IN/s", "OUT/s", "DROPPED/s", "INJECTED/s", "ERRORS/s", "QUEUE", "P50", "P99"});
  stages.set_text_columns(2);
  Table ops({"INSTANCE", "OP", "OPS/s", "MEAN", "P99"});
  ops.set_text_columns(2);
  // Who uses which worker, how much (docs/METRICS.md, "Per-client use").
  Table clients({"CLIENT", "WORKER", "BUSY", "INSTR/s", "MOVED/s", "QUEUED", "WEIGHT"});
  clients.set_text_columns(2);
  std::vector<std::string> down;

  for (const Scrape& b : after) {
    auto a = std::find_if(before.begin(), before.end(), [&](const Scrape& s) { return s.target == b.target; });
    if (b.error || a == before.end() || a->error) {
      down.push_back(b.target + ": " + (b.error ? *b.error : a == before.end() ? "joined since the last scrape"
                                                                                : *a->error));
      continue;
    }
    Window w{*a, b, std::chrono::duration<double>(b.at - a->at).count()};
    for (const Labels& host : b.Series("gt_host_messages_received_total", {"host", "instance"})) {
      const std::string& role = host.at("host");
      hosts.Add({host.at("instance"), role, b.target, Count(w.Rate("gt_host_messages_received_total", host)),
                 Count(w.Rate("gt_host_messages_sent_total", host)),
                 Bytes(w.Rate("gt_host_bytes_received_total", host)) , Bytes(w.Rate("gt_host_bytes_sent_total", host)),
                 role == "dispatcher" ? Count(b.Sum("gt_host_clients_connected", host)) : "-",
                 role == "dispatcher" ? Count(b.Sum("gt_host_workers_connected", host)) : "-",
                 role == "worker" ? Count(b.Sum("gt_worker_live_tensors", host)) : "-",
                 role == "worker" ? Bytes(b.Sum("gt_worker_resident_bytes", host)) : "-",
                 Count(w.Rate("gt_stage_errors_total", host)), Count(w.Rate("gt_host_malformed_messages_total", host))});
    }
    for (const Labels& stage : b.Series("gt_stage_instructions_received_total", {"host", "instance", "stage"})) {
      stages.Add({stage.at("instance"), stage.at("stage"), Count(w.Rate("gt_stage_instructions_received_total", stage)),
                  Count(w.Rate("gt_stage_instructions_emitted_total", stage)),
                  Count(w.Rate("gt_stage_instructions_dropped_total", stage)),
                  Count(w.Rate("gt_stage_instructions_injected_total", stage)),
                  Count(w.Rate("gt_stage_errors_total", stage)), Count(b.Sum("gt_stage_queue_depth", stage)),
                  Duration(w.Quantile(0.5, "gt_stage_processing_seconds", stage)),
                  Duration(w.Quantile(0.99, "gt_stage_processing_seconds", stage))});
    }
    for (const Labels& c : b.Series("gt_worker_client_compute_seconds_total", {"instance", "client"})) {
      clients.Add({c.at("client"), c.at("instance"),
                   Fixed(100 * w.Rate("gt_worker_client_compute_seconds_total", c), 1) + "%",
                   Count(w.Rate("gt_worker_client_instructions_total", c)),
                   Bytes(w.Rate("gt_worker_client_bytes_moved_total", c)),
                   Count(b.Sum("gt_worker_client_queued_instructions", c)),
                   Fixed(b.Sum("gt_worker_client_weight", c), 1)});
    }
    for (const Labels& op : b.Series("gt_backend_op_seconds_count", {"instance", "op"})) {
      double n = w.Increase("gt_backend_op_seconds_count", op);
      if (n <= 0) continue;
      ops.Add({op.at("instance"), op.at("op"), Count(n / w.seconds),
               Duration(w.Increase("gt_backend_op_seconds_sum", op) / n),
               Duration(w.Quantile(0.99, "gt_backend_op_seconds", op))});
    }
  }
  hosts.Print(out);
  out << "\n";
  stages.Print(out);
  out << "\n";
  if (ops.empty()) {
    out << "no backend ops ran in this interval\n";
  } else {
    ops.Print(out);
  }
  out << "\n";
  if (clients.empty()) {
    out << "no client has run anything on these workers yet\n";
  } else {
    clients.Print(out);
  }
  for (const std::string& d : down) out << "unreachable: " << d << "\n";
}

struct Round {
  std::vector<Scrape> scrapes;
  bool complete = true;  // discovery and every endpoint answered
};

// Asks discovery for the targets (adding `extra`), then scrapes them all.
Round ScrapeAll(const std::string& discovery, const std::vector<std::string>& extra, std::ostream& err) {
  Round round;
  std::vector<std::string> targets;
  if (!discovery.empty()) {
    Result<std::string> body = HttpGetBody(discovery, "/targets", kScrapeTimeoutMs);
    Result<std::vector<std::string>> found =
        body.ok() ? ParseDiscoveryTargets(*body) : Result<std::vector<std::string>>(body.status());
    if (found.ok()) {
      targets = *found;
    } else {
      err << "gt top: discovery at " << discovery << ": " << found.status().message() << "\n";
      round.complete = false;
    }
  }
  for (const std::string& e : extra)
    if (std::find(targets.begin(), targets.end(), e) == targets.end()) targets.push_back(e);
  for (const std::string& t : targets) {
    round.scrapes.push_back(ScrapeTarget(t));
    if (round.scrapes.back().error) round.complete = false;
  }
  return round;
}

// Why there is nothing to show, and what to run instead.
std::string NothingToWatch(const std::string& discovery) {
  return "gt top: no metrics endpoint to watch" +
         (discovery.empty() ? std::string() : " (none from discovery at " + discovery + ")") +
         ". A plain `gt cluster` serves no metrics: start it with\n"
         "  gt cluster --workers 2 --metrics-port 9100 --discovery 127.0.0.1:9099\n"
         "and run `gt top --discovery 127.0.0.1:9099`, or pass --metrics HOST:PORT of a host that serves "
         "/metrics (a dispatcher's or worker's `metrics:` / --metrics).\n";
}

bool SleepUnless(const std::atomic<bool>& stop, double seconds) {
  auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while (Clock::now() < until) {
    if (stop) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return !stop;
}

}  // namespace

int Top(int argc, char** argv) {
  po::options_description desc("gt top options");
  desc.add_options()("help,h", "show this help")(
      "discovery", po::value<std::string>()->default_value("127.0.0.1:9099"),
      "the dispatcher's discovery address (host:port serving /targets); \"\" for none")(
      "metrics", po::value<std::vector<std::string>>()->composing(),
      "another metrics endpoint (host:port) to scrape; repeatable")(
      "interval", po::value<double>()->default_value(2.0), "seconds between the two scrapes of a rate")(
      "once", "print one snapshot after one interval and exit");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "gt top: " << e.what() << "\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << "usage: gt top [--discovery HOST:PORT] [--metrics HOST:PORT]... [--interval S] [--once]\n" << desc;
    return 0;
  }
  std::string discovery = vm["discovery"].as<std::string>();
  std::vector<std::string> extra = vm.count("metrics") ? vm["metrics"].as<std::vector<std::string>>()
                                                       : std::vector<std::string>{};
  double interval = vm["interval"].as<double>();
  if (!(interval > 0)) {
    std::cerr << "gt top: --interval must be > 0\n";
    return 2;
  }
  if (discovery.empty() && extra.empty()) {
    std::cerr << "gt top: nothing to watch: give --discovery or --metrics\n";
    return 2;
  }
  bool once = vm.count("once") > 0;
  std::atomic<bool> stop{false};
  std::optional<ShutdownSignal> signal;
  if (!once) signal.emplace(stop);

  Round before = ScrapeAll(discovery, extra, std::cerr);
  for (;;) {
    if (!SleepUnless(stop, interval)) return 0;
    Round after = ScrapeAll(discovery, extra, std::cerr);
    if (after.scrapes.empty()) {
      // Issue 40: a plain `gt cluster` serves no metrics; an empty table said nothing.
      std::cerr << NothingToWatch(discovery);
      if (once) return 1;
      before = std::move(after);
      continue;
    }
    std::ostringstream screen;
    if (!once) screen << "\033[H\033[2J";  // home, clear
    screen << "gt top  " << (discovery.empty() ? "" : "discovery " + discovery + "  ") << "interval "
           << Fixed(interval, 1) << "s  (rates between the last two scrapes)\n\n";
    Print(before.scrapes, after.scrapes, screen);
    std::cout << screen.str() << std::flush;
    if (once) return before.complete && after.complete && !after.scrapes.empty() ? 0 : 1;
    before = std::move(after);
  }
}

}  // namespace gt::services
