#include "net/handshake_verdict.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <utility>

namespace gt {

HandshakeVerdict::HandshakeVerdict(std::string who, std::string keys, std::string key_list, std::string endpoint)
    : who_(std::move(who)), keys_(std::move(keys)), key_list_(std::move(key_list)), endpoint_(std::move(endpoint)) {}

void HandshakeVerdict::Observe(uint16_t event) {
  if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED && !closed_) {
    connected_ = true;
    refused_.clear();
  }
  if (connected_ || closed_) {
    if (event == ZMQ_EVENT_DISCONNECTED && connected_) {
      connected_ = false;
      closed_ = true;
    }
    return;
  }
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
    refused_ = "the dispatcher refused this " + who_ + "'s key (its .pub is not on the " + key_list_ + " list)";
  const std::string mismatch = "the handshake failed: the dispatcher requires CURVE keys (" + keys_ + ") or this " +
                               who_ + " gives keys a dispatcher without them does not take (one started with "
                               "--insecure: connect with --insecure or GT_INSECURE=1; or a wrong server key)";
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) refused_ = mismatch;
  if (event == ZMQ_EVENT_DISCONNECTED && ++drops_ >= kDropsBeforeVerdict && refused_.empty())
    refused_ = PeerSpeaksZeroMq(endpoint_)
                   ? mismatch
                   : "nothing there answered: " + std::to_string(drops_) +
                         " connections were accepted and closed without a word of ZeroMQ (not a gt dispatcher: "
                         "another service, or a forwarded port with nothing behind it)";
}

namespace {

// A connected stream socket to `endpoint`, or -1.
int ConnectPlain(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string path = endpoint.substr(6);
    if (path.size() >= sizeof address.sun_path) return -1;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) return fd;
    if (fd >= 0) ::close(fd);
    return -1;
  }
  if (endpoint.rfind("tcp://", 0) != 0) return -1;
  const std::string rest = endpoint.substr(6);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return -1;
  std::string host = rest.substr(0, colon);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), rest.substr(colon + 1).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

bool PeerSpeaksZeroMq(const std::string& endpoint) {
  const int fd = ConnectPlain(endpoint);
  if (fd < 0) return false;
  pollfd item{fd, POLLIN, 0};
  unsigned char first = 0;
  // A ZeroMQ peer sends its signature (0xFF ... 0x7F) as soon as it accepts.
  const bool greeted = ::poll(&item, 1, 1000) == 1 && ::recv(fd, &first, 1, 0) == 1 && first == 0xFF;
  ::close(fd);
  return greeted;
}

bool ReadMonitorEvent(void* monitor, uint16_t* event) {
  zmq_msg_t first;
  zmq_msg_init(&first);
  if (zmq_msg_recv(&first, monitor, ZMQ_DONTWAIT) < 0) {
    zmq_msg_close(&first);
    return false;
  }
  *event = 0;
  if (zmq_msg_size(&first) >= sizeof(*event)) std::memcpy(event, zmq_msg_data(&first), sizeof(*event));
  bool more = zmq_msg_more(&first);
  zmq_msg_close(&first);
  while (more) {
    zmq_msg_t rest;
    zmq_msg_init(&rest);
    if (zmq_msg_recv(&rest, monitor, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&rest);
      break;
    }
    more = zmq_msg_more(&rest);
    zmq_msg_close(&rest);
  }
  return true;
}

}  // namespace gt
