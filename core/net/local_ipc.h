// Local ipc (README "Running a cluster"), the one rule of it: a dispatcher
// that listens on tcp port P of 127.0.0.1, localhost or every IPv4 interface
// also binds ipc://LocalIpcPath(P) (LocalIpcEndpointForListen;
// services/service_common.h, BindLocalIpc), and a client or worker told to
// reach localhost:P uses that socket instead when a dispatcher of this user
// listens on it (PreferLocalIpc): ipc is faster on one machine
// (docs/performance/transport.md). GT_LOCAL_IPC=0 turns it off.
//
// Thread-safety: plain functions; they read the environment and the file
// system.
#pragma once

#include <string>

namespace gt {

// "/tmp/gt-dispatcher-<netns>-<port>.sock", <netns> the inode of this
// process's network namespace (loopback ports are per namespace, /tmp is
// not). /tmp rather than $XDG_RUNTIME_DIR, which a service and a shell of the
// same user often disagree on (or lack).
std::string LocalIpcPath(int port);

// False when GT_LOCAL_IPC is set to a switch's off value (0, false, no, off).
bool LocalIpcEnabled();

// What is at a local ipc socket path, as far as this process can tell.
enum class LocalSocket {
  kAbsent,     // nothing there
  kListening,  // a socket of this user that accepts connections
  kStale,      // a socket of this user that nothing listens on (a dead dispatcher's)
  kForeign,    // anything else: another user's, not a socket, or unprobeable; never touched
};
LocalSocket ProbeLocalSocket(const std::string& path);

// Only names that one dispatcher holds exclusively once it listens on the
// loopback port; IPv6 stays tcp (::1 and 127.0.0.1 can be two dispatchers).
bool IsLocalHost(const std::string& host);

// "ipc://LocalIpcPath(port)" when `host` is a local host name, local ipc is
// enabled and a dispatcher of this user listens there; "" otherwise (the
// caller keeps tcp).
std::string LocalDispatcherEndpoint(const std::string& host, int port);

// For a dispatcher bound at `bound_tcp` ("tcp://HOST:P", P a number): the
// local ipc endpoint it also binds when HOST is a local host name or the IPv4
// wildcard and local ipc is enabled; "" otherwise.
std::string LocalIpcEndpointForListen(const std::string& bound_tcp);

// For a host about to connect to `endpoint`: the local dispatcher's ipc
// endpoint when `endpoint` is "tcp://HOST:P" and LocalDispatcherEndpoint names
// one; else `endpoint` itself.
std::string PreferLocalIpc(const std::string& endpoint);

}  // namespace gt
