#include "connection_watch.h"

#include <zmq.h>

#include <atomic>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace gt::client_internal {
namespace {

std::string UniqueMonitorEndpoint() {
  static std::atomic<uint64_t> next{0};
  return "inproc://gt-client-monitor-" + std::to_string(next.fetch_add(1));
}

}  // namespace

ConnectionWatch::ConnectionWatch(zmq::context_t& context, zmq::socket_t& socket, std::string endpoint,
                                 std::chrono::milliseconds timeout)
    : monitor_(context, zmq::socket_type::pair),
      endpoint_(std::move(endpoint)),
      timeout_(timeout),
      disconnected_since_(Clock::now()) {
  const std::string address = UniqueMonitorEndpoint();
  zmq_socket_monitor(socket.handle(), address.c_str(), ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED);
  monitor_.set(zmq::sockopt::linger, 0);
  monitor_.connect(address);
}

ConnectionWatch::~ConnectionWatch() = default;

zmq::pollitem_t ConnectionWatch::PollItem() { return zmq::pollitem_t{monitor_.handle(), 0, ZMQ_POLLIN, 0}; }

// Each event is two frames: {uint16 event, uint32 value} and the endpoint.
void ConnectionWatch::Drain() {
  for (;;) {
    zmq::message_t first;
    if (!monitor_.recv(first, zmq::recv_flags::dontwait)) return;
    uint16_t event = 0;
    if (first.size() >= sizeof(event)) std::memcpy(&event, first.data(), sizeof(event));
    while (first.more()) {
      zmq::message_t rest;
      if (!monitor_.recv(rest, zmq::recv_flags::dontwait)) break;
      if (!rest.more()) break;
    }
    if (event == ZMQ_EVENT_CONNECTED) {
      connected_ = ever_connected_ = true;
    } else if (event == ZMQ_EVENT_DISCONNECTED && connected_) {
      connected_ = false;
      disconnected_since_ = Clock::now();
    }
  }
}

std::chrono::milliseconds ConnectionWatch::PollTimeout(Clock::time_point now) const {
  if (connected_) return std::chrono::milliseconds(-1);
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(disconnected_since_ + timeout_ - now);
  return std::max(left, std::chrono::milliseconds(0)) + std::chrono::milliseconds(1);
}

Status ConnectionWatch::Check(Clock::time_point now) const {
  if (connected_ || now - disconnected_since_ <= timeout_) return Status::Ok();
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g s", static_cast<double>(timeout_.count()) / 1000.0);
  const std::string limit = std::string(seconds) + " (GT_CONNECT_TIMEOUT)";
  if (!ever_connected_) return Unavailable("no dispatcher answers at " + endpoint_ + ": not connected within " + limit);
  return Unavailable("lost the dispatcher at " + endpoint_ + ": disconnected for more than " + limit);
}

std::optional<std::chrono::milliseconds> ConnectTimeoutFromEnv() {
  const char* env = std::getenv("GT_CONNECT_TIMEOUT");
  double seconds = env && *env ? std::atof(env) : 5.0;
  if (seconds <= 0) return std::nullopt;
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace gt::client_internal
