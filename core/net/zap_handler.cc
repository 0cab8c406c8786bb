#include "net/zap_handler.h"

#include <zmq.h>

#include "net/transport.h"

namespace gt {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr const char* kWorkerUser = "gt-worker";
constexpr const char* kClientUser = "gt-client";

// Z85 text to the 32 bytes ZAP's credentials frame carries.
std::string BinaryKey(const std::string& z85) {
  std::string key(32, '\0');
  zmq_z85_decode(reinterpret_cast<uint8_t*>(key.data()), z85.c_str());
  return key;
}

// The 32 bytes of a key as Z85 text.
std::string TextKey(const std::string& binary) {
  char text[41] = {};
  if (binary.size() != 32 || !zmq_z85_encode(text, reinterpret_cast<const uint8_t*>(binary.data()), 32)) return "";
  return text;
}

// ZAP's User-Id for a connection: "ROLE/KEY", the role's name and the Z85
// public key the peer proved.
std::string UserIdOf(const zmq::message_t& message) {
  const char* user = zmq_msg_gets(const_cast<zmq_msg_t*>(message.handle()), "User-Id");
  return user ? user : "";
}

}  // namespace

PeerRole PeerRoleOf(const zmq::message_t& message) {
  const std::string id = UserIdOf(message);
  const std::string role = id.substr(0, id.find('/'));
  if (role == kWorkerUser) return PeerRole::kWorker;
  if (role == kClientUser) return PeerRole::kClient;
  return PeerRole::kAny;
}

std::string PeerKeyOf(const zmq::message_t& message) {
  const std::string id = UserIdOf(message);
  const size_t slash = id.find('/');
  return slash == std::string::npos ? "" : id.substr(slash + 1);
}

const char* PeerRoleName(PeerRole role) {
  switch (role) {
    case PeerRole::kAny:
      return "unauthenticated peer";
    case PeerRole::kClient:
      return "client";
    case PeerRole::kWorker:
      return "worker";
  }
  return "?";
}

Result<std::unique_ptr<ZapHandler>> ZapHandler::Create(zmq::context_t& context, const std::vector<std::string>& clients,
                                                      const std::vector<std::string>& workers) {
  std::unique_ptr<ZapHandler> handler(new ZapHandler(context));
  for (const std::string& key : clients) handler->roles_[BinaryKey(key)] = PeerRole::kClient;
  for (const std::string& key : workers) {
    auto [it, added] = handler->roles_.emplace(BinaryKey(key), PeerRole::kWorker);
    if (it->second != PeerRole::kWorker)
      return InvalidArgument("public key " + key + " is on both the client and the worker list");
  }
  handler->socket_.set(zmq::sockopt::linger, 0);
  try {
    handler->socket_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("cannot start the ZAP handler (one authenticating dispatcher per process): ") +
                       e.what());
  }
  return handler;
}

void ZapHandler::AnswerPending() {
  for (;;) {
    auto request = ReceiveFrames(socket_, zmq::recv_flags::dontwait);
    if (!request) return;
    std::vector<std::string> reply = Answer(*request);
    for (size_t i = 0; i < reply.size(); ++i)
      socket_.send(zmq::buffer(reply[i]), i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

// Request: version, request id, domain, address, routing id, mechanism,
// credentials... Reply: version, request id, status code, status text,
// user id, metadata.
std::vector<std::string> ZapHandler::Answer(const std::vector<zmq::message_t>& request) {
  const std::string id = request.size() > 1 ? request[1].to_string() : std::string();
  auto refuse = [&](const char* why) {
    ++refused_;
    return std::vector<std::string>{"1.0", id, "400", why, "", ""};
  };
  if (request.size() < 7 || request[0].to_string() != "1.0") return refuse("malformed ZAP request");
  if (request[5].to_string() != "CURVE") return refuse("CURVE required");
  auto role = roles_.find(request[6].to_string());
  if (role == roles_.end()) return refuse("key not allowed");
  const std::string user = std::string(role->second == PeerRole::kWorker ? kWorkerUser : kClientUser) + "/" +
                           TextKey(request[6].to_string());
  return {"1.0", id, "200", "OK", user, ""};
}

}  // namespace gt
