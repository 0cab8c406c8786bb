// Who may talk to the dispatcher's ROUTER socket: CURVE on every connection
// and the ZAP handler admitting the allow-listed keys (docs/SECURITY.md),
// the refusal to listen beyond loopback without them, and the role check
// that keeps a client's key from registering as a worker.
//
// Free functions with no state: the dispatcher owns the socket and the
// ZapHandler they configure. Thread-safety: call them on the thread that
// owns the socket.
#pragma once

#include <memory>
#include <string>

#include <zmq.hpp>

#include "gt/status.h"
#include "host/manifest.h"
#include "net/zap_handler.h"
#include "wire.pb.h"

namespace gt {

// With `manifest.security` enabled: reads the dispatcher's key pair and the
// client and worker allow-lists, starts a ZapHandler on `context` and makes
// `socket` a CURVE server in its domain (a peer that does not finish the
// handshake within the heartbeat timeout is dropped). Returns the handler,
// which the caller polls (ZapHandler::socket) and keeps alive as long as
// `socket`; nullptr when security is off. An error names the key file at
// fault. REQUIRES: `socket` is not bound yet.
Result<std::unique_ptr<ZapHandler>> SecureListener(const HostManifest& manifest, zmq::context_t& context,
                                                   zmq::socket_t& socket);

// OK unless `endpoint` would expose an unauthenticated dispatcher beyond
// loopback: without keys, any peer that reaches it may register as a worker
// and read every client's data. inproc:// and ipc:// (guarded by the file
// system) and loopback tcp are fine, and so is anything with keys or with
// `security.insecure`.
Status CheckExposure(const SecurityConfig& security, const std::string& endpoint);

// "WARNING: ..." when `endpoint` is served without keys because
// `security.insecure` said so (on loopback too: every local user may then
// connect); "" otherwise. gt-dispatcher prints it first, `gt validate`
// beside its ok.
std::string InsecureListenWarning(const SecurityConfig& security, const std::string& endpoint);

// With authentication on, a connection's role is the one its key was
// admitted under: only a worker's key registers (REGISTER, ATTACH), and a
// worker's key opens no client session (it could otherwise name itself a
// client's worker). REQUIRES: authentication is on (a ZapHandler exists).
Status CheckRole(PeerRole role, wire::Envelope::Kind kind);

}  // namespace gt
