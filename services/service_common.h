// What the gt services share: graceful shutdown on SIGINT/SIGTERM, the
// /metrics endpoint, and manifest loading with command-line overrides.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include "gt/endpoint.h"
#include "gt/status.h"
#include "net/local_ipc.h"
#include "host/manifest.h"

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

// Serves `registry` on http://<address>/metrics, setting `bound` to the
// host:port it got (port 0: a free one). Null when `address` is empty; an
// error naming the address when it cannot be served there: a host that was
// asked for metrics and went on without them would be a silent hole in its
// operators' dashboards.
gt::Result<std::unique_ptr<prometheus::Exposer>> ServeMetrics(const std::string& address,
                                                              std::shared_ptr<prometheus::Registry> registry,
                                                              std::string* bound);

// True for a host that means "every interface": "", 0.0.0.0, ::, *.
bool IsWildcardHost(const std::string& host);

// What a worker announces to the dispatcher as its metrics endpoint, given
// the configured `address` and the `bound` one from ServeMetrics(): the bound
// host and port, except that a wildcard host stays a wildcard ("0.0.0.0")
// so that service discovery can publish an address reachable from elsewhere.
// "" when `bound` is "".
std::string AnnouncedMetricsEndpoint(const std::string& address, const std::string& bound);

// Local ipc (core/net/local_ipc.h: LocalIpcEndpointForListen, PreferLocalIpc):
// binding what a dispatcher binds.

// A local ipc endpoint this process bound. Destroying it removes the socket
// file if it is still the one bound (same device and inode): ZeroMQ leaves
// it behind, and the next dispatcher on the port would find it stale.
class LocalIpcBinding {
 public:
  explicit LocalIpcBinding(std::string endpoint);
  ~LocalIpcBinding();
  LocalIpcBinding(const LocalIpcBinding&) = delete;
  LocalIpcBinding& operator=(const LocalIpcBinding&) = delete;

  const std::string& endpoint() const { return endpoint_; }

 private:
  std::string endpoint_;
  std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

// Binds the local ipc endpoint next to `bound_tcp` with `bind` (the
// dispatcher's Bind) when LocalIpcEndpointForListen names one: a stale socket
// file is removed first; one in use or not this user's is left alone and
// nothing is bound. Returns the binding, or null (with `why` set when one was
// wanted but not bound). Never fatal: tcp still works.
// REQUIRES: this process holds `bound_tcp` already (so that no other
// dispatcher can be starting on the same port while the file is probed).
std::unique_ptr<LocalIpcBinding> BindLocalIpc(const std::string& bound_tcp,
                                              const std::function<Status(const std::string&)>& bind,
                                              std::string* why);

// A dispatcher given no keys and not told `security.insecure` authenticates
// with this user's default key set (core/net/default_keys.h), made when
// absent: `security` then names its files. Returns ", keys in DIR" for the
// dispatcher's first line; "" when keys were given or it runs insecure.
gt::Result<std::string> UseDefaultDispatcherKeys(SecurityConfig& security);

// Checks the GT_* settings (CheckSettings), then loads `file` as a manifest
// for `host`, or, when file is empty, the embedded default's
// (DefaultDispatcherManifest / DefaultWorkerManifest) under the id
// `default_id`; prints every problem and returns nullopt when invalid.
std::optional<HostManifest> LoadManifestOrExplain(const std::string& file, HostKind host,
                                                  const std::string& default_id);

}  // namespace gt::services
