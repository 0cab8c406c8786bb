// gt-dispatcher: the dispatcher stream host as a service.
#include <iostream>

#include <boost/program_options.hpp>
#include <zmq.hpp>

#include "discovery_server.h"
#include "dispatcher/dispatcher.h"
#include "dispatcher/listener_security.h"
#include "service_common.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  po::options_description desc("gt-dispatcher options");
  desc.add_options()("help,h", "show this help")(
      "manifest,m", po::value<std::string>()->default_value(""), "pipeline manifest (YAML); default: the embedded default's stages (configs/embedded-dispatcher.yaml)")(
      "listen,l", po::value<std::string>()->default_value(""),
      "endpoint to bind, tcp://HOST:PORT or HOST:PORT (overrides the manifest)")(
      "metrics", po::value<std::string>()->default_value(""),
      "host:port for /metrics, port 0: a free one; \"\": none (overrides the manifest)")(
      "discovery", po::value<std::string>()->default_value(""),
      "host:port serving GET /targets, Prometheus HTTP service discovery; \"\": none (overrides the manifest)")(
      "id", po::value<std::string>()->default_value(""), "instance id (overrides the manifest)")(
      "key", po::value<std::string>()->default_value(""),
      "CURVE key pair file (gt keygen): authenticate every connection (overrides the manifest's security.key)")(
      "client-keys", po::value<std::string>()->default_value(""), "file or directory of the clients' public keys")(
      "worker-keys", po::value<std::string>()->default_value(""), "file or directory of the workers' public keys")(
      "insecure",
      "run without keys (default: this user's key set, ~/.config/gt/keys); any peer that reaches the listen "
      "address, every local user included, may then register as a worker");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "gt-dispatcher: " << e.what() << "\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc;
    return 0;
  }
  auto manifest =
      gt::services::LoadManifestOrExplain(vm["manifest"].as<std::string>(), gt::HostKind::kDispatcher, "dispatcher");
  if (!manifest) return 1;
  if (auto v = vm["listen"].as<std::string>(); !v.empty()) manifest->listen = v;
  manifest->listen = gt::ToZmqEndpoint(manifest->listen);
  // Given at all, even as "" (no metrics), it wins over the manifest.
  if (!vm["metrics"].defaulted()) manifest->metrics = vm["metrics"].as<std::string>();
  if (!vm["discovery"].defaulted()) manifest->discovery = vm["discovery"].as<std::string>();
  if (auto v = vm["id"].as<std::string>(); !v.empty()) manifest->id = v;
  if (auto v = vm["key"].as<std::string>(); !v.empty()) manifest->security.key = v;
  if (auto v = vm["client-keys"].as<std::string>(); !v.empty()) manifest->security.client_keys = v;
  if (auto v = vm["worker-keys"].as<std::string>(); !v.empty()) manifest->security.worker_keys = v;
  if (vm.count("insecure")) manifest->security.insecure = true;
  if (gt::Status s = gt::ValidateSecurity(manifest->security, gt::HostKind::kDispatcher); !s.ok()) {
    std::cerr << "gt-dispatcher: " << s.message() << "\n";
    return 2;
  }
  if (manifest->listen.empty()) manifest->listen = "tcp://127.0.0.1:5555";
  // Without keys: this user's (docs/SECURITY.md, "Keys by default").
  gt::Result<std::string> default_keys = gt::services::UseDefaultDispatcherKeys(manifest->security);
  if (!default_keys.ok()) {
    std::cerr << "gt-dispatcher: " << default_keys.status().message() << "\n";
    return 2;
  }
  if (std::string warning = gt::InsecureListenWarning(manifest->security, manifest->listen); !warning.empty())
    std::cerr << "gt-dispatcher: " << warning << std::endl;  // before anything else it says

  auto registry = std::make_shared<prometheus::Registry>();
  std::string metrics_bound;
  auto exposer = gt::services::ServeMetrics(manifest->metrics, registry, &metrics_bound);
  if (!exposer.ok()) {
    std::cerr << "gt-dispatcher: " << exposer.status().message() << "\n";
    return 1;
  }
  zmq::context_t context(1);
  auto dispatcher = gt::Dispatcher::Create(*manifest, context, *registry);
  if (!dispatcher.ok()) {
    std::cerr << "gt-dispatcher: " << dispatcher.status().ToString() << "\n";
    return 1;
  }
  if (gt::Status s = (*dispatcher)->Bind(manifest->listen); !s.ok()) {
    std::cerr << "gt-dispatcher: " << s.ToString() << "\n";
    return 1;
  }
  // Before the local ipc endpoint: endpoint() names the last one bound.
  const std::string listening = (*dispatcher)->endpoint();
  std::string ipc_not_bound;
  std::unique_ptr<gt::services::LocalIpcBinding> local_ipc = gt::services::BindLocalIpc(
      listening, [d = dispatcher->get()](const std::string& e) { return d->Bind(e); }, &ipc_not_bound);
  if (!ipc_not_bound.empty()) std::cerr << "gt-dispatcher: no local ipc endpoint: " << ipc_not_bound << "\n";
  // Declared after the dispatcher, so destroyed (and its thread joined)
  // before the dispatcher it reads from.
  std::unique_ptr<gt::services::DiscoveryServer> discovery;
  if (!manifest->discovery.empty()) {
    const gt::Dispatcher* d = dispatcher->get();
    std::string own = gt::services::AnnouncedMetricsEndpoint(manifest->metrics, metrics_bound);
    auto server = gt::services::DiscoveryServer::Start(manifest->discovery, [d, own] {
      std::vector<gt::services::DiscoveryTarget> targets;
      if (!own.empty()) targets.push_back({"dispatcher", own, ""});
      for (const gt::WorkerEndpoint& w : d->LiveWorkerEndpoints()) targets.push_back({"worker", w.metrics, w.peer_ip});
      return targets;
    });
    if (!server.ok()) {
      std::cerr << "gt-dispatcher: " << server.status().ToString() << "\n";
      return 1;
    }
    discovery = std::move(*server);
  }
  std::atomic<bool> stop{false};
  gt::services::ShutdownSignal signal(stop);
  std::cout << "gt-dispatcher " << manifest->id << " listening on " << listening
            << (local_ipc ? ", local ipc on " + local_ipc->endpoint() : "")
            << (metrics_bound.empty() ? "" : ", metrics on http://" + metrics_bound + "/metrics")
            << (discovery ? ", discovery on http://" + discovery->bound() + "/targets" : "") << *default_keys
            << std::endl;
  (*dispatcher)->Run(stop);
  std::cout << "gt-dispatcher " << manifest->id << " stopped" << std::endl;
  return 0;
}
