#include "dispatcher/listener_security.h"

#include "net/curve_keys.h"
#include "net/peer_address.h"

namespace gt {

Result<std::unique_ptr<ZapHandler>> SecureListener(const HostManifest& manifest, zmq::context_t& context,
                                                   zmq::socket_t& socket) {
  const SecurityConfig& security = manifest.security;
  if (!security.enabled()) return std::unique_ptr<ZapHandler>();
  Result<CurveKeyPair> own = ReadCurveKeyFile(security.key, true);
  if (!own.ok()) return own.status();
  Result<std::vector<std::string>> clients = ReadCurvePublicKeys(security.client_keys);
  if (!clients.ok()) return clients.status();
  Result<std::vector<std::string>> workers = ReadCurvePublicKeys(security.worker_keys);
  if (!workers.ok()) return workers.status();
  Result<std::unique_ptr<ZapHandler>> zap = ZapHandler::Create(context, *clients, *workers);
  if (!zap.ok()) return zap.status();
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, own->secret_key);
  socket.set(zmq::sockopt::zap_domain, "gt");
  // A peer that connects and never completes the handshake is dropped.
  socket.set(zmq::sockopt::handshake_ivl, static_cast<int>(manifest.heartbeat_timeout_ms));
  return zap;
}

Status CheckExposure(const SecurityConfig& security, const std::string& endpoint) {
  if (security.enabled() || security.insecure) return Status::Ok();
  const std::string host = TcpEndpointHost(endpoint);
  if (host.empty() || IsLoopbackAddress(host)) return Status::Ok();
  return FailedPrecondition("refusing to listen on " + endpoint +
                            " without authentication: any peer reaching it could register as a worker and read "
                            "every client's tensors. Give keys (security: {key, clients, workers}; gt keygen "
                            "writes them; see docs/SECURITY.md), bind 127.0.0.1, or accept the risk with "
                            "security: {insecure: true} (--insecure)");
}

std::string InsecureListenWarning(const SecurityConfig& security, const std::string& endpoint) {
  if (security.enabled() || !security.insecure) return "";
  const std::string host = TcpEndpointHost(endpoint);
  // On this machine only, it is still open to every user of the machine.
  const bool local = endpoint.rfind("inproc://", 0) != 0 && (host.empty() || IsLoopbackAddress(host));
  return "WARNING: INSECURE (security.insecure / --insecure): " + endpoint +
         " is served without authentication; " +
         (local ? "every user of this machine" : "anyone who reaches it") +
         " can register as a worker and read every client's tensors (docs/SECURITY.md)";
}

Status CheckRole(PeerRole role, wire::Envelope::Kind kind) {
  const bool registering = kind == wire::Envelope::REGISTER || kind == wire::Envelope::ATTACH;
  if (registering && role != PeerRole::kWorker)
    return InvalidArgument(std::string("a ") + PeerRoleName(role) +
                           " may not register as a worker (only a key on the workers list may)");
  if (!registering && role != PeerRole::kClient)
    return InvalidArgument(std::string("a ") + PeerRoleName(role) +
                           " connection carries no client messages; register first");
  return Status::Ok();
}

}  // namespace gt
