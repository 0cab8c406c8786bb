// Which address a host's peers reach it at, for the listeners plugins open
// beside the host's ZeroMQ socket: the sharding stage's rendezvous store on
// the dispatcher, the Gloo endpoint of a worker's backend (StageContext's
// peer_host and dispatcher_host). On one machine that is loopback; across
// machines it must be an address the other hosts route to, and a worker finds
// its own from the route to its dispatcher, so nothing needs configuring.
//
// Thread-safety: plain functions.
#pragma once

#include <string>
#include <string_view>

#include "gt/endpoint.h"  // the endpoint parser (TcpEndpointHost, CheckEndpoint), for callers of both
#include "gt/status.h"

namespace gt {

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
