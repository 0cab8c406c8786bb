// Which address a host's peers reach it at, for the listeners plugins open
// beside the host's ZeroMQ socket: the sharding stage's rendezvous store on
// the dispatcher, the Gloo endpoint of a worker's backend (StageContext's
// peer_host and dispatcher_host). On one machine that is loopback; across
// machines it must be an address the other hosts route to, and a worker finds
// its own from the route to its dispatcher, so nothing needs configuring.
//
// Thread-safety: plain functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gt/status.h"

namespace gt {

// The host of a "tcp://HOST:PORT" endpoint ("[::1]" unbracketed; "*" read as
// "0.0.0.0"); "" for any other transport (inproc, ipc) or a malformed one.
std::string TcpEndpointHost(const std::string& endpoint);

// OK for an endpoint gt's hosts speak: "tcp://HOST:PORT" whose PORT is "*"
// or a number from 0 to 65535, "ipc://PATH" or "inproc://NAME".
// InvalidArgument naming the endpoint otherwise, before ZeroMQ sees it: it
// keeps only a port's low 16 bits (99999 would be 34463, and a mistyped port
// would reach another one) and says no more than "Invalid argument".
Status CheckEndpoint(const std::string& endpoint);

// A port written as a decimal number from 0 to 65535; nullopt otherwise
// ("*", "", "-1", "99999", "8O"). The one parser of ports for every
// listener: each library behind them keeps only a port's low 16 bits.
std::optional<int> ParsePortNumber(std::string_view text);

// True for an address that means every interface ("0.0.0.0", "::", "*").
bool IsWildcardAddress(const std::string& host);
// True for "localhost", 127.0.0.0/8 and ::1: reachable from this machine only.
bool IsLoopbackAddress(const std::string& host);

// The local address this machine sends from to reach `host` (a name or an
// IPv4/IPv6 address), found from the routing table (a connected UDP socket;
// no packet leaves). "127.0.0.1" for an empty or loopback host, or when the
// host cannot be resolved or routed to.
std::string LocalAddressTowards(const std::string& host);

}  // namespace gt
