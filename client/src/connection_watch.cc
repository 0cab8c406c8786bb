#include "connection_watch.h"

#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "gt/settings.h"

namespace gt::client_internal {
namespace {

std::string UniqueMonitorEndpoint() {
  static std::atomic<uint64_t> next{0};
  return "inproc://gt-client-monitor-" + std::to_string(next.fetch_add(1));
}

}  // namespace

ConnectionWatch::ConnectionWatch(zmq::context_t& context, std::string endpoint, std::chrono::milliseconds timeout)
    : monitor_(context, zmq::socket_type::pair), endpoint_(std::move(endpoint)), timeout_(timeout),
      started_(Clock::now()) {}

Result<std::unique_ptr<ConnectionWatch>> ConnectionWatch::Attach(zmq::context_t& context, zmq::socket_t& socket,
                                                                 std::string endpoint,
                                                                 std::chrono::milliseconds timeout) {
  const std::string address = UniqueMonitorEndpoint();
  if (zmq_socket_monitor(socket.handle(), address.c_str(), ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED |
                                                             ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                                                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) != 0)
    return Internal(std::string("cannot monitor the connection to the dispatcher: ") + zmq_strerror(zmq_errno()));
  std::unique_ptr<ConnectionWatch> watch(new ConnectionWatch(context, std::move(endpoint), timeout));
  watch->monitor_.set(zmq::sockopt::linger, 0);
  watch->monitor_.connect(address);
  return watch;
}

zmq::pollitem_t ConnectionWatch::PollItem() { return zmq::pollitem_t{monitor_.handle(), 0, ZMQ_POLLIN, 0}; }

// Each event is two frames: {uint16 event, uint32 value} and the endpoint.
void ConnectionWatch::Drain() {
  for (;;) {
    zmq::message_t first;
    if (!monitor_.recv(first, zmq::recv_flags::dontwait)) return;
    uint16_t event = 0;
    if (first.size() >= sizeof(event)) std::memcpy(&event, first.data(), sizeof(event));
    for (bool more = first.more(); more;) {
      zmq::message_t rest;
      if (!monitor_.recv(rest, zmq::recv_flags::dontwait)) break;
      more = rest.more();
    }
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED && !closed_) connected_ = true;
    // Definitive: libzmq would retry, and be refused, forever.
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH && !connected_)
      refused_ = "the dispatcher refused this client's key (GT_CLIENT_KEY is not on its clients list)";
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && !connected_)
      refused_ = "the handshake failed: the dispatcher requires CURVE keys (GT_CLIENT_KEY, GT_SERVER_KEY) or this "
                 "client gives keys a dispatcher without them does not take";
    if (event == ZMQ_EVENT_DISCONNECTED && connected_) {
      connected_ = false;
      closed_ = true;
    }
    // The dispatcher may close a connection whose mechanism it does not
    // take before this side reads its greeting (no handshake event then);
    // libzmq reconnects and, most times, is closed on again.
    if (event == ZMQ_EVENT_DISCONNECTED && !connected_ && !closed_ && ++handshake_drops_ >= kDropsBeforeRefused &&
        refused_.empty())
      refused_ = "the dispatcher closed " + std::to_string(handshake_drops_) +
                 " connections during the handshake: it requires CURVE keys (GT_CLIENT_KEY, GT_SERVER_KEY), or "
                 "does not take the ones given";
  }
}

std::chrono::milliseconds ConnectionWatch::PollTimeout(Clock::time_point now) const {
  if (connected_) return std::chrono::milliseconds(-1);
  if (closed_ || !refused_.empty()) return std::chrono::milliseconds(0);
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(started_ + timeout_ - now);
  return std::max(left, std::chrono::milliseconds(0)) + std::chrono::milliseconds(1);
}

Status ConnectionWatch::Check(Clock::time_point now) const {
  if (closed_) return Unavailable("lost the dispatcher at " + endpoint_ + ": its connection closed");
  if (!connected_ && !refused_.empty()) return Unavailable("cannot connect to " + endpoint_ + ": " + refused_);
  if (connected_ || now - started_ <= timeout_) return Status::Ok();
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g s", static_cast<double>(timeout_.count()) / 1000.0);
  return Unavailable("no dispatcher answers at " + endpoint_ + ": not connected within " + seconds +
                     " (GT_CONNECT_TIMEOUT)");
}

Result<std::optional<std::chrono::milliseconds>> ConnectTimeoutFromEnv() {
  Result<double> seconds = SecondsSetting("GT_CONNECT_TIMEOUT");
  if (!seconds.ok()) return seconds.status();
  if (*seconds == 0) return std::optional<std::chrono::milliseconds>();
  return std::optional<std::chrono::milliseconds>(
      std::max<int64_t>(1, static_cast<int64_t>(std::llround(*seconds * 1000))));
}

}  // namespace gt::client_internal
