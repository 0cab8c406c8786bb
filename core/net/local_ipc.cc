#include "net/local_ipc.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gt/endpoint.h"
#include "gt/settings.h"

namespace gt {

std::string LocalIpcPath(int port) {
  // Loopback ports belong to a network namespace, /tmp to a mount namespace:
  // two clusters in two network namespaces sharing /tmp must not meet here.
  struct stat st;
  const std::string net = ::stat("/proc/self/ns/net", &st) == 0 ? std::to_string(st.st_ino) + "-" : std::string();
  return "/tmp/gt-dispatcher-" + net + std::to_string(port) + ".sock";
}

bool LocalIpcEnabled() {
  // A bad value keeps the default: the client's first op and a service's
  // start already failed on it (CheckSettings).
  Result<bool> on = SwitchSetting("GT_LOCAL_IPC");
  return !on.ok() || *on;
}

LocalSocket ProbeLocalSocket(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? LocalSocket::kAbsent : LocalSocket::kForeign;
  if (!S_ISSOCK(st.st_mode) || st.st_uid != ::geteuid()) return LocalSocket::kForeign;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return LocalSocket::kForeign;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return LocalSocket::kForeign;
  int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  int err = rc == 0 ? 0 : errno;
  ::close(fd);
  if (rc == 0 || err == EAGAIN) return LocalSocket::kListening;  // EAGAIN: listening, backlog full
  return err == ECONNREFUSED ? LocalSocket::kStale : LocalSocket::kForeign;
}

bool IsLocalHost(const std::string& host) { return host == "127.0.0.1" || host == "localhost"; }

std::string LocalDispatcherEndpoint(const std::string& host, int port) {
  if (!IsLocalHost(host) || port <= 0 || !LocalIpcEnabled()) return "";
  const std::string path = LocalIpcPath(port);
  return ProbeLocalSocket(path) == LocalSocket::kListening ? "ipc://" + path : "";
}

std::string LocalIpcEndpointForListen(const std::string& bound_tcp) {
  std::optional<TcpAddress> tcp = ParseTcpEndpoint(bound_tcp);
  if (!tcp || !LocalIpcEnabled()) return "";
  if (!IsLocalHost(tcp->host) && tcp->host != "0.0.0.0" && tcp->host != "*") return "";
  return "ipc://" + LocalIpcPath(tcp->port);
}

std::string PreferLocalIpc(const std::string& endpoint) {
  std::optional<TcpAddress> tcp = ParseTcpEndpoint(endpoint);
  const std::string local = tcp ? LocalDispatcherEndpoint(tcp->host, tcp->port) : "";
  return local.empty() ? endpoint : local;
}

}  // namespace gt
