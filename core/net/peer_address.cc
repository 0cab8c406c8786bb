#include "net/peer_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

namespace gt {

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
