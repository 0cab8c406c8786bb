// Endpoints and host:port addresses: the one parser of both, used by the
// client (gt::connect), the services (--listen, --connect, --metrics,
// --discovery), manifests (listen, connect), the dispatcher and workers, and
// the collectives' rendezvous addresses. Local ipc, the choice of a unix
// socket for a dispatcher on this machine, is in core/net/local_ipc.h.
//
// Thread-safety: plain functions on strings.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gt/status.h"

namespace gt {

// "HOST:PORT" split at its last colon; "[V6]:PORT" split after the bracket,
// the host unbracketed. Neither part is checked (ParsePortNumber checks a
// port); nullopt when there is no colon, or a bracket is not closed just
// before one.
struct HostPort {
  std::string host;
  std::string port;
};
std::optional<HostPort> SplitHostPort(std::string_view address);

// A port written as a decimal number from 0 to 65535; nullopt otherwise
// ("*", "", "-1", "99999", "8O"). The one parser of ports for every
// listener: each library behind them keeps only a port's low 16 bits.
std::optional<int> ParsePortNumber(std::string_view text);

// A bare "HOST:PORT" as ZeroMQ's "tcp://HOST:PORT"; an endpoint that names
// its transport ("tcp://", "ipc://", "inproc://"), or "", unchanged.
std::string ToZmqEndpoint(std::string_view address);

// "tcp://HOST:PORT" with a port from 1 to 65535: its host (unbracketed, as
// written) and port; nullopt for any other transport, "*" or 0 as the port,
// or a malformed one.
struct TcpAddress {
  std::string host;
  int port = 0;
};
std::optional<TcpAddress> ParseTcpEndpoint(std::string_view endpoint);

// The host of a "tcp://HOST:PORT" endpoint ("[::1]" unbracketed; "*" read as
// "0.0.0.0"); "" for any other transport (inproc, ipc) or a malformed one.
std::string TcpEndpointHost(const std::string& endpoint);

// OK for an endpoint gt's hosts speak: "tcp://HOST:PORT" whose PORT is "*"
// or a number from 0 to 65535, "ipc://PATH" or "inproc://NAME".
// InvalidArgument naming the endpoint otherwise, before ZeroMQ sees it: it
// keeps only a port's low 16 bits (99999 would be 34463, and a mistyped port
// would reach another one) and says no more than "Invalid argument".
Status CheckEndpoint(const std::string& endpoint);

}  // namespace gt
