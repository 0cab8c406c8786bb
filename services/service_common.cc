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
#include "gt/options.h"
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
  std::string host, port;
  if (!SplitHostPort(address, &host, &port)) return gt::InvalidArgument(where + "expected host:port");
  // Checked here: the HTTP server would keep the port's low 16 bits.
  if (!gt::ParsePortNumber(port))
    return gt::InvalidArgument(where + "the port must be a number from 0 to 65535, not '" + port + "'");
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(address);
    exposer->RegisterCollectable(registry);
    std::vector<int> ports = exposer->GetListeningPorts();
    std::string host = address.substr(0, address.rfind(':'));
    if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
    if (bound && !ports.empty()) *bound = host + ":" + std::to_string(ports[0]);
    return exposer;
  } catch (const std::exception& e) {
    return gt::Unavailable(where + "cannot listen there (the port is taken, or the host is not this machine's): " +
                           e.what());
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

namespace {

// The port of "host:port" when it is a plain 1..65535 number, else 0.
int ParsePort(const std::string& text) { return gt::ParsePortNumber(text).value_or(0); }

// "tcp://HOST:PORT" split; false for anything else.
bool SplitTcp(const std::string& endpoint, std::string* host, int* port) {
  constexpr std::string_view kTcp = "tcp://";
  if (endpoint.compare(0, kTcp.size(), kTcp) != 0) return false;
  std::string port_text;
  if (!SplitHostPort(endpoint.substr(kTcp.size()), host, &port_text)) return false;
  *port = ParsePort(port_text);
  return *port != 0;
}

}  // namespace

std::string LocalIpcEndpointForListen(const std::string& bound_tcp) {
  std::string host;
  int port = 0;
  if (!LocalIpcEnabled() || !SplitTcp(bound_tcp, &host, &port)) return "";
  if (!IsLocalHost(host) && host != "0.0.0.0" && host != "*") return "";
  return "ipc://" + LocalIpcPath(port);
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

std::string PreferLocalIpc(const std::string& endpoint) {
  std::string host;
  int port = 0;
  if (!SplitTcp(endpoint, &host, &port)) return endpoint;
  const std::string local = LocalDispatcherEndpoint(host, port);
  return local.empty() ? endpoint : local;
}

std::optional<HostManifest> LoadManifestOrExplain(const std::string& file, HostKind host,
                                                  const std::string& default_id) {
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

std::string ZmqEndpoint(const std::string& address) {
  return address.empty() || address.find("://") != std::string::npos ? address : "tcp://" + address;
}

}  // namespace gt::services
