// Whether a client's socket is connected to its dispatcher, read from the
// socket's monitor (ZMQ_EVENT_CONNECTED / ZMQ_EVENT_DISCONNECTED), so that a
// sync point fails, naming the endpoint, when there has been no dispatcher
// for longer than a timeout (GT_CONNECT_TIMEOUT) instead of waiting forever:
// no dispatcher at the address, or one that went away mid-run. A long op
// on a connected dispatcher never times out.
//
// Thread-safety: none; the session uses it under its mutex.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "gt/status.h"

namespace gt::client_internal {

class ConnectionWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // Watches `socket`. REQUIRES: `socket` not connected yet (the first
  // connection's event must not be missed); `timeout` > 0.
  ConnectionWatch(zmq::context_t& context, zmq::socket_t& socket, std::string endpoint,
                  std::chrono::milliseconds timeout);
  ~ConnectionWatch();

  // The monitor's socket, to poll beside the watched one.
  zmq::pollitem_t PollItem();
  // Reads the events that arrived.
  void Drain();
  // How long a poll may wait before Check() has news; -1 while connected.
  std::chrono::milliseconds PollTimeout(Clock::time_point now) const;
  // Unavailable naming the endpoint when not connected for longer than
  // the timeout; else OK.
  Status Check(Clock::time_point now) const;

 private:
  zmq::socket_t monitor_;
  std::string endpoint_;
  std::chrono::milliseconds timeout_;
  bool connected_ = false;
  bool ever_connected_ = false;
  Clock::time_point disconnected_since_;
};

// GT_CONNECT_TIMEOUT in seconds (default 5); 0 or less: wait forever
// (std::nullopt).
std::optional<std::chrono::milliseconds> ConnectTimeoutFromEnv();

}  // namespace gt::client_internal
