#include "connection_watch.h"

#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "gt/settings.h"

namespace gt::client_internal {
namespace {

std::string UniqueMonitorEndpoint() {
  static std::atomic<uint64_t> next{0};
  return "inproc://gt-client-monitor-" + std::to_string(next.fetch_add(1));
}

}  // namespace

ConnectionWatch::ConnectionWatch(zmq::context_t& context, std::string endpoint, std::string zmq_endpoint,
                                 std::chrono::milliseconds timeout)
    : monitor_(context, zmq::socket_type::pair), endpoint_(std::move(endpoint)), timeout_(timeout),
      started_(Clock::now()), verdict_("client", "GT_CLIENT_KEY, GT_SERVER_KEY", "clients", std::move(zmq_endpoint)) {}

Result<std::unique_ptr<ConnectionWatch>> ConnectionWatch::Attach(zmq::context_t& context, zmq::socket_t& socket,
                                                                 std::string endpoint, std::string zmq_endpoint,
                                                                 std::chrono::milliseconds timeout) {
  const std::string address = UniqueMonitorEndpoint();
  if (zmq_socket_monitor(socket.handle(), address.c_str(), HandshakeVerdict::kEvents) != 0)
    return Internal(std::string("cannot monitor the connection to the dispatcher: ") + zmq_strerror(zmq_errno()));
  std::unique_ptr<ConnectionWatch> watch(
      new ConnectionWatch(context, std::move(endpoint), std::move(zmq_endpoint), timeout));
  watch->monitor_.set(zmq::sockopt::linger, 0);
  watch->monitor_.connect(address);
  return watch;
}

zmq::pollitem_t ConnectionWatch::PollItem() { return zmq::pollitem_t{monitor_.handle(), 0, ZMQ_POLLIN, 0}; }

void ConnectionWatch::Drain() {
  for (uint16_t event = 0; ReadMonitorEvent(monitor_.handle(), &event);) verdict_.Observe(event);
}

std::chrono::milliseconds ConnectionWatch::PollTimeout(Clock::time_point now) const {
  if (verdict_.connected()) return std::chrono::milliseconds(-1);
  if (verdict_.closed() || !verdict_.refused().empty()) return std::chrono::milliseconds(0);
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(started_ + timeout_ - now);
  return std::max(left, std::chrono::milliseconds(0)) + std::chrono::milliseconds(1);
}

Status ConnectionWatch::Check(Clock::time_point now) const {
  if (verdict_.closed()) return Unavailable("lost the dispatcher at " + endpoint_ + ": its connection closed");
  if (!verdict_.connected() && !verdict_.refused().empty())
    return Unavailable("cannot connect to " + endpoint_ + ": " + verdict_.refused());
  if (verdict_.connected() || now - started_ <= timeout_) return Status::Ok();
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
