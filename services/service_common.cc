#include "service_common.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string_view>

#include "embedded/embedded_cluster.h"
#include "gt/settings.h"
#include "net/default_keys.h"
#include "net/peer_address.h"

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

gt::Result<std::unique_ptr<prometheus::Exposer>> ServeMetrics(const std::string& address,
                                                              std::shared_ptr<prometheus::Registry> registry,
                                                              std::string* bound) {
  if (address.empty()) return std::unique_ptr<prometheus::Exposer>();
  const std::string where = "cannot serve metrics on " + address + ": ";
  std::optional<gt::HostPort> split = gt::SplitHostPort(address);
  if (!split) return gt::InvalidArgument(where + "expected host:port");
  // Checked here: the HTTP server would keep the port's low 16 bits.
  if (!gt::ParsePortNumber(split->port))
    return gt::InvalidArgument(where + "the port must be a number from 0 to 65535, not '" + split->port + "'");
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(address);
    exposer->RegisterCollectable(registry);
    std::vector<int> ports = exposer->GetListeningPorts();
    std::string host = IsWildcardHost(split->host)            ? std::string("127.0.0.1")
                       : split->host.find(':') != std::string::npos ? "[" + split->host + "]"
                                                                    : split->host;
    if (bound && !ports.empty()) *bound = host + ":" + std::to_string(ports[0]);
    return exposer;
  } catch (const std::exception& e) {
    return gt::Unavailable(where + "cannot listen there (the port is taken, or the host is not this machine's): " +
                           e.what());
  }
}

bool IsWildcardHost(const std::string& host) { return host.empty() || IsWildcardAddress(host); }

std::string AnnouncedMetricsEndpoint(const std::string& address, const std::string& bound) {
  std::optional<HostPort> bound_at = SplitHostPort(bound);
  if (bound.empty() || !bound_at) return bound;
  if (std::optional<HostPort> given = SplitHostPort(address); given && IsWildcardHost(given->host))
    return "0.0.0.0:" + bound_at->port;
  return bound;
}

LocalIpcBinding::LocalIpcBinding(std::string endpoint)
    : endpoint_(std::move(endpoint)), path_(endpoint_.substr(std::string_view("ipc://").size())) {
  struct stat st;
  if (::lstat(path_.c_str(), &st) == 0) {
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }
}

LocalIpcBinding::~LocalIpcBinding() {
  struct stat st;
  if (ino_ != 0 && ::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) ::unlink(path_.c_str());
}

std::unique_ptr<LocalIpcBinding> BindLocalIpc(const std::string& bound_tcp,
                                              const std::function<Status(const std::string&)>& bind,
                                              std::string* why) {
  std::string endpoint = LocalIpcEndpointForListen(bound_tcp);
  if (endpoint.empty()) return nullptr;
  const std::string path = endpoint.substr(std::string_view("ipc://").size());
  // This process holds the tcp port now, so no other dispatcher of this
  // machine can be starting on it: a probe-then-bind race needs a second
  // process that is no dispatcher for this port.
  switch (ProbeLocalSocket(path)) {
    case LocalSocket::kAbsent:
      break;
    case LocalSocket::kStale:
      // ZeroMQ would unlink any file there on bind; only a dead one may go.
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        *why = path + ": cannot remove the stale socket: " + std::strerror(errno);
        return nullptr;
      }
      break;
    case LocalSocket::kListening:
      *why = path + " is in use by another process; local clients use tcp";
      return nullptr;
    case LocalSocket::kForeign:
      *why = path + " exists and is not a socket of this user; local clients use tcp";
      return nullptr;
  }
  if (Status s = bind(endpoint); !s.ok()) {
    *why = s.ToString();
    return nullptr;
  }
  return std::make_unique<LocalIpcBinding>(endpoint);
}

std::optional<HostManifest> LoadManifestOrExplain(const std::string& file, HostKind host,
                                                  const std::string& default_id) {
  if (Status s = CheckSettings(); !s.ok()) {
    std::cerr << s.message() << "\n";
    return std::nullopt;
  }
  Result<HostManifest> manifest = !file.empty()                    ? LoadManifestFile(file, host)
                                  : host == HostKind::kDispatcher ? DefaultDispatcherManifest()
                                                                   : DefaultWorkerManifest();
  if (!manifest.ok()) {
    std::cerr << manifest.status().message() << "\n";
    return std::nullopt;
  }
  if (file.empty()) manifest->id = default_id;
  return std::move(*manifest);
}

gt::Result<std::string> UseDefaultDispatcherKeys(SecurityConfig& security) {
  if (security.enabled() || security.insecure) return std::string();
  gt::Result<gt::DefaultKeySet> set = gt::EnsureDefaultKeySet();
  if (!set.ok())
    return gt::FailedPrecondition(set.status().message() +
                                  " (or give keys with --key, or run without any with --insecure)");
  security.key = set->DispatcherKey();
  security.client_keys = set->ClientKeys();
  security.worker_keys = set->WorkerKeys();
  security.user_key_set = true;
  return ", keys in " + set->dir;
}

}  // namespace gt::services
