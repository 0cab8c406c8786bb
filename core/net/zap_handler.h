// The dispatcher's ZAP handler (ZeroMQ RFC 27): decides, during each CURVE
// handshake, whether the peer's public key is on an allow-list and under
// which role, so that a connection's role is a property of the key it
// proved, never of what its messages say.
//
// The handler answers on inproc://zeromq.zap.01 of the dispatcher's context;
// the dispatcher's loop polls socket() and calls AnswerPending(). Every
// message received over an admitted connection then carries the role as its
// "User-Id" property, "ROLE/KEY" (PeerRoleOf, PeerKeyOf).
//
// Thread-safety: one thread (the dispatcher's loop).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <zmq.hpp>

#include "gt/status.h"

namespace gt {

enum class PeerRole { kAny, kClient, kWorker };  // kAny: no authentication (loopback only)

// The role ZAP gave the connection `message` came in on: kAny when it
// carries none (a connection without CURVE).
PeerRole PeerRoleOf(const zmq::message_t& message);
// The public key (Z85) that connection proved; "" without CURVE.
std::string PeerKeyOf(const zmq::message_t& message);
const char* PeerRoleName(PeerRole role);

class ZapHandler {
 public:
  // Binds the handler in `context`. `clients` and `workers` are the public
  // keys (Z85) each role admits; a key on both lists is refused (a worker's
  // key must not open client sessions, nor the reverse).
  static Result<std::unique_ptr<ZapHandler>> Create(zmq::context_t& context, const std::vector<std::string>& clients,
                                                     const std::vector<std::string>& workers);

  zmq::socket_t& socket() { return socket_; }
  // Answers every request waiting; never blocks.
  void AnswerPending();
  // Handshakes refused so far (for the metrics).
  uint64_t refused() const { return refused_; }

 private:
  explicit ZapHandler(zmq::context_t& context) : socket_(context, zmq::socket_type::rep) {}
  std::vector<std::string> Answer(const std::vector<zmq::message_t>& request);

  zmq::socket_t socket_;
  std::unordered_map<std::string, PeerRole> roles_;  // 32-byte binary public key -> role
  uint64_t refused_ = 0;
};

}  // namespace gt
