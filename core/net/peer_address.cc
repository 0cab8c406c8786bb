#include "net/peer_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string_view>

namespace gt {

std::string TcpEndpointHost(const std::string& endpoint) {
  constexpr std::string_view kTcp = "tcp://";
  if (endpoint.compare(0, kTcp.size(), kTcp) != 0) return "";
  const std::string rest = endpoint.substr(kTcp.size());
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) return "";
  std::string host = rest.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host == "*" ? "0.0.0.0" : host;
}

std::optional<int> ParsePortNumber(std::string_view text) {
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  const int port = std::stoi(std::string(text));
  return port <= 65535 ? std::optional<int>(port) : std::nullopt;
}

Status CheckEndpoint(const std::string& endpoint) {
  for (std::string_view local : {"ipc://", "inproc://"})
    if (endpoint.compare(0, local.size(), local) == 0) {
      if (endpoint.size() > local.size()) return Status::Ok();
      return InvalidArgument("'" + endpoint + "': the endpoint names no " +
                             (local == "ipc://" ? "socket file" : "inproc name"));
    }
  if (endpoint.compare(0, 6, "tcp://") != 0)
    return InvalidArgument("'" + endpoint + "': expected tcp://HOST:PORT, HOST:PORT, ipc://PATH or inproc://NAME");
  if (TcpEndpointHost(endpoint).empty())
    return InvalidArgument("'" + endpoint + "': expected tcp://HOST:PORT (a host, then a port)");
  const std::string port = endpoint.substr(endpoint.rfind(':') + 1);
  if (port == "*" || ParsePortNumber(port)) return Status::Ok();
  return InvalidArgument(endpoint + ": the port must be a number from 0 to 65535 (or *), not '" + port + "'");
}

bool IsLoopbackAddress(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

bool IsWildcardAddress(const std::string& host) { return host == "0.0.0.0" || host == "::" || host == "*"; }

std::string LocalAddressTowards(const std::string& host) {
  constexpr const char* kLoopback = "127.0.0.1";
  if (host.empty() || host == "localhost" || IsWildcardAddress(host)) return kLoopback;
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  // Any port: connect() on a UDP socket only picks the route.
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) return kLoopback;
  std::string local = kLoopback;
  const int fd = socket(found->ai_family, SOCK_DGRAM, 0);
  sockaddr_storage self{};
  socklen_t length = sizeof(self);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&self), &length) == 0) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* address = self.ss_family == AF_INET6
                              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&self)->sin6_addr)
                              : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&self)->sin_addr);
    if (inet_ntop(self.ss_family, address, text, sizeof(text)) != nullptr) local = text;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return local;
}

}  // namespace gt
