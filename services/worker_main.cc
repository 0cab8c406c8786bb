// gt-worker: the worker stream host as a service.
#include <iostream>

#include <boost/program_options.hpp>
#include <zmq.hpp>

#include "gt/log.h"
#include "net/default_keys.h"
#include "service_common.h"
#include "start_afresh.h"
#include "worker/worker.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  po::options_description desc("gt-worker options");
  desc.add_options()("help,h", "show this help")(
      "manifest,m", po::value<std::string>()->default_value(""), "pipeline manifest (YAML); default: the embedded default's (configs/embedded-worker.yaml)")(
      "connect,c", po::value<std::string>()->default_value(""),
      "dispatcher endpoint, tcp://HOST:PORT or HOST:PORT (overrides the manifest)")(
      "metrics", po::value<std::string>()->default_value(""),
      "host:port for /metrics, port 0: a free one; \"\": none (overrides the manifest)")(
      "id", po::value<std::string>()->default_value(""), "worker id (overrides the manifest)")(
      "key", po::value<std::string>()->default_value(""),
      "CURVE key pair file (gt keygen) whose public key is on the dispatcher's workers list")(
      "server-key", po::value<std::string>()->default_value(""), "the dispatcher's public key file (.pub)")(
      "insecure",
      "connect without keys, to a dispatcher started with --insecure (default on this machine: this user's key "
      "set, ~/.config/gt/keys)")(
      "reconnect-grace", po::value<double>(),
      "seconds a worker that lost its dispatcher keeps its tensors, waiting for it (overrides the manifest's "
      "reconnect_grace_ms; default 60)")(
      "after-grace", po::value<std::string>(), "exit | wait: what the worker does once that grace is over (default exit)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "gt-worker: " << e.what() << "\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc;
    return 0;
  }
  auto manifest =
      gt::services::LoadManifestOrExplain(vm["manifest"].as<std::string>(), gt::HostKind::kWorker, "worker");
  if (!manifest) return 1;
  if (auto v = vm["connect"].as<std::string>(); !v.empty()) manifest->connect = v;
  manifest->connect = gt::ToZmqEndpoint(manifest->connect);
  // Given at all, even as "" (no metrics), it wins over the manifest.
  if (!vm["metrics"].defaulted()) manifest->metrics = vm["metrics"].as<std::string>();
  if (auto v = vm["id"].as<std::string>(); !v.empty()) manifest->id = v;
  if (auto v = vm["key"].as<std::string>(); !v.empty()) manifest->security.key = v;
  if (auto v = vm["server-key"].as<std::string>(); !v.empty()) manifest->security.server_key = v;
  if (vm.count("reconnect-grace")) {
    const double seconds = vm["reconnect-grace"].as<double>();
    if (!(seconds >= 0 && seconds <= 3600)) {
      std::cerr << "gt-worker: --reconnect-grace: " << seconds << " is not between 0 and 3600 seconds\n";
      return 2;
    }
    manifest->reconnect_grace_ms = static_cast<int64_t>(seconds * 1000);
  }
  if (vm.count("after-grace")) {
    const std::string after = vm["after-grace"].as<std::string>();
    if (after != "exit" && after != "wait") {
      std::cerr << "gt-worker: --after-grace: '" << after << "': exit or wait\n";
      return 2;
    }
    manifest->exit_after_grace = after == "exit";
  }
  if (gt::Status s = gt::ValidateSecurity(manifest->security, gt::HostKind::kWorker); !s.ok()) {
    std::cerr << "gt-worker: " << s.message() << "\n";
    return 2;
  }
  if (manifest->connect.empty()) manifest->connect = "tcp://127.0.0.1:5555";
  // Without keys, a dispatcher on this machine is this user's: its default key set's.
  std::string default_keys;
  gt::Result<gt::CurveClientKeys> keys =
      gt::ResolveConnectKeys({manifest->security.key, manifest->security.server_key}, manifest->connect,
                             vm.count("insecure") > 0, "worker", &default_keys);
  if (!keys.ok()) {
    std::cerr << "gt-worker: " << keys.status().message() << " (or give --key and --server-key, or --insecure)\n";
    return 2;
  }
  manifest->security.key = keys->key_file;
  manifest->security.server_key = keys->server_key_file;

  auto registry = std::make_shared<prometheus::Registry>();
  std::string metrics_bound;
  auto exposer = gt::services::ServeMetrics(manifest->metrics, registry, &metrics_bound);
  if (!exposer.ok()) {
    std::cerr << "gt-worker: " << exposer.status().message() << "\n";
    return 1;
  }
  gt::log::RouteProtobufLog();  // a malformed message must not write a line each (gt/log.h)
  zmq::context_t context(1);
  auto worker = gt::Worker::Create(*manifest, context, *registry);
  if (!worker.ok()) {
    std::cerr << "gt-worker: " << worker.status().ToString() << "\n";
    return 1;
  }
  (*worker)->set_metrics_endpoint(gt::services::AnnouncedMetricsEndpoint(manifest->metrics, metrics_bound));
  std::atomic<bool> stop{false};
  gt::services::ShutdownSignal signal(stop);
  // A loopback tcp address of a dispatcher on this machine: its local ipc
  // socket when it has one (GT_LOCAL_IPC=0: as given).
  const std::string endpoint = gt::PreferLocalIpc(manifest->connect);
  std::cout << "gt-worker " << manifest->id << " connecting to " << endpoint
            << (endpoint == manifest->connect ? "" : " (local ipc for " + manifest->connect + ")")
            << (metrics_bound.empty() ? "" : ", metrics on http://" + metrics_bound + "/metrics") << default_keys
            << std::endl;
  gt::Status s = (*worker)->Run(endpoint, stop);
  if ((*worker)->declared_lost() && !stop) {
    // Everything it held is gone for its clients: registered again, empty.
    std::cerr << "gt-worker: " << s.message() << "; starting afresh" << std::endl;
    s = gt::services::StartAfresh(argv);  // returns only if it failed
  }
  if (!s.ok()) {
    std::cerr << "gt-worker: " << s.ToString() << "\n";
    return 1;
  }
  std::cout << "gt-worker " << manifest->id << " stopped" << std::endl;
  return 0;
}
