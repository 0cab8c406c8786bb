// What the gt services share: graceful shutdown on SIGINT/SIGTERM, the
// /metrics endpoint, and manifest loading with command-line overrides.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include "manifest.h"

namespace gt::services {

// Sets `stop` when SIGINT or SIGTERM arrives (an Asio signal_set on its own
// thread). Destroying it restores nothing: the process is ending.
class ShutdownSignal {
 public:
  explicit ShutdownSignal(std::atomic<bool>& stop);
  ~ShutdownSignal();

 private:
  boost::asio::io_context io_;
  boost::asio::signal_set signals_;
  std::thread thread_;
};

// Serves `registry` on http://<address>/metrics. Returns null (and prints
// why) when `address` is empty or cannot be bound.
std::unique_ptr<prometheus::Exposer> ServeMetrics(const std::string& address,
                                                  std::shared_ptr<prometheus::Registry> registry,
                                                  std::string* bound);

// Splits "host:port" ("[v6]:port" too) into its parts, brackets removed.
// Returns false when there is no ':' separating a port.
bool SplitHostPort(const std::string& address, std::string* host, std::string* port);

// True for a host that means "every interface": "", 0.0.0.0, ::, *.
bool IsWildcardHost(const std::string& host);

// What a worker announces to the dispatcher as its metrics endpoint, given
// the configured `address` and the `bound` one from ServeMetrics(): the bound
// host and port, except that a wildcard host stays a wildcard ("0.0.0.0")
// so that service discovery can publish an address reachable from elsewhere.
// "" when `bound` is "".
std::string AnnouncedMetricsEndpoint(const std::string& address, const std::string& bound);

// Loads `file` (or `fallback_yaml` when file is empty) as a manifest for
// `host`, printing every problem and returning nullopt when invalid.
std::optional<HostManifest> LoadManifestOrExplain(const std::string& file, const std::string& fallback_yaml,
                                                  HostKind host);

}  // namespace gt::services
