#include "gt/endpoint.h"

namespace gt {
namespace {

constexpr std::string_view kTcp = "tcp://";

bool StartsWith(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

}  // namespace

std::optional<HostPort> SplitHostPort(std::string_view address) {
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() || address[close + 1] != ':')
      return std::nullopt;
    return HostPort{std::string(address.substr(1, close - 1)), std::string(address.substr(close + 2))};
  }
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  return HostPort{std::string(address.substr(0, colon)), std::string(address.substr(colon + 1))};
}

std::optional<int> ParsePortNumber(std::string_view text) {
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  const int port = std::stoi(std::string(text));
  return port <= 65535 ? std::optional<int>(port) : std::nullopt;
}

std::string ToZmqEndpoint(std::string_view address) {
  if (address.empty() || address.find("://") != std::string_view::npos) return std::string(address);
  return std::string(kTcp) + std::string(address);
}

std::optional<TcpAddress> ParseTcpEndpoint(std::string_view endpoint) {
  if (!StartsWith(endpoint, kTcp)) return std::nullopt;
  std::optional<HostPort> split = SplitHostPort(endpoint.substr(kTcp.size()));
  if (!split) return std::nullopt;
  std::optional<int> port = ParsePortNumber(split->port);
  if (!port || *port == 0) return std::nullopt;
  return TcpAddress{std::move(split->host), *port};
}

std::string TcpEndpointHost(const std::string& endpoint) {
  if (!StartsWith(endpoint, kTcp)) return "";
  std::optional<HostPort> split = SplitHostPort(std::string_view(endpoint).substr(kTcp.size()));
  if (!split || split->host.empty()) return "";
  return split->host == "*" ? "0.0.0.0" : split->host;
}

Status CheckEndpoint(const std::string& endpoint) {
  for (std::string_view local : {"ipc://", "inproc://"})
    if (StartsWith(endpoint, local)) {
      if (endpoint.size() > local.size()) return Status::Ok();
      return InvalidArgument("'" + endpoint + "': the endpoint names no " +
                             (local == "ipc://" ? "socket file" : "inproc name"));
    }
  if (!StartsWith(endpoint, kTcp))
    return InvalidArgument("'" + endpoint + "': expected tcp://HOST:PORT, HOST:PORT, ipc://PATH or inproc://NAME");
  if (TcpEndpointHost(endpoint).empty())
    return InvalidArgument("'" + endpoint + "': expected tcp://HOST:PORT (a host, then a port)");
  const std::string port = endpoint.substr(endpoint.rfind(':') + 1);
  if (port == "*" || ParsePortNumber(port)) return Status::Ok();
  return InvalidArgument(endpoint + ": the port must be a number from 0 to 65535 (or *), not '" + port + "'");
}

}  // namespace gt
