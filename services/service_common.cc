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
