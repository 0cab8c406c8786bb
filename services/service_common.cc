#include "service_common.h"

#include <csignal>
#include <iostream>

namespace gt::services {

ShutdownSignal::ShutdownSignal(std::atomic<bool>& stop) : signals_(io_, SIGINT, SIGTERM) {
  signals_.async_wait([&stop](const boost::system::error_code& ec, int) {
    if (!ec) stop = true;
  });
  thread_ = std::thread([this] { io_.run(); });
}

ShutdownSignal::~ShutdownSignal() {
  io_.stop();
  thread_.join();
}

std::unique_ptr<prometheus::Exposer> ServeMetrics(const std::string& address,
                                                  std::shared_ptr<prometheus::Registry> registry,
                                                  std::string* bound) {
  if (address.empty()) return nullptr;
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(address);
    exposer->RegisterCollectable(registry);
    std::vector<int> ports = exposer->GetListeningPorts();
    std::string host = address.substr(0, address.rfind(':'));
    if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
    if (bound && !ports.empty()) *bound = host + ":" + std::to_string(ports[0]);
    return exposer;
  } catch (const std::exception& e) {
    std::cerr << "cannot serve metrics on " << address << ": " << e.what() << "\n";
    return nullptr;
  }
}

bool SplitHostPort(const std::string& address, std::string* host, std::string* port) {
  if (!address.empty() && address[0] == '[') {
    size_t close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') return false;
    *host = address.substr(1, close - 1);
    *port = address.substr(close + 2);
    return true;
  }
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  return true;
}

bool IsWildcardHost(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "*";
}

std::string AnnouncedMetricsEndpoint(const std::string& address, const std::string& bound) {
  std::string host, port, bound_host, bound_port;
  if (bound.empty() || !SplitHostPort(bound, &bound_host, &bound_port)) return bound;
  if (SplitHostPort(address, &host, &port) && IsWildcardHost(host)) return "0.0.0.0:" + bound_port;
  return bound;
}

std::optional<HostManifest> LoadManifestOrExplain(const std::string& file, const std::string& fallback_yaml,
                                                  HostKind host) {
  Result<HostManifest> manifest = file.empty() ? ParseManifest(fallback_yaml, "<default>", host)
                                               : LoadManifestFile(file, host);
  if (!manifest.ok()) {
    std::cerr << manifest.status().message() << "\n";
    return std::nullopt;
  }
  return std::move(*manifest);
}

}  // namespace gt::services
