// Whether a client's socket is connected to its dispatcher, read from the
// socket's monitor (a completed ZeroMQ handshake; a closed connection), so
// that a sync point fails naming the endpoint instead of waiting forever:
// when no dispatcher completes a handshake within a timeout
// (GT_CONNECT_TIMEOUT), or once the connection it had closes. A dispatcher
// that comes back cannot answer for the old one (it knows neither this
// client's syncs nor its tensors), so a closed connection is final.
//
// Thread-safety: none; the session uses it under its mutex.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "gt/status.h"
#include "net/handshake_verdict.h"

namespace gt::client_internal {

class ConnectionWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // Watches `socket`, or nothing (an error) when the monitor cannot be
  // attached. REQUIRES: `socket` not connected yet (the first connection's
  // event must not be missed); `timeout` > 0.
  // `endpoint` names it in errors; `zmq_endpoint` is what `socket` connects to.
  static Result<std::unique_ptr<ConnectionWatch>> Attach(zmq::context_t& context, zmq::socket_t& socket,
                                                         std::string endpoint, std::string zmq_endpoint,
                                                         std::chrono::milliseconds timeout);

  // The monitor's socket, to poll beside the watched one.
  zmq::pollitem_t PollItem();
  // Reads the events that arrived.
  void Drain();
  // How long a poll may wait before Check() has news; -1 while connected.
  std::chrono::milliseconds PollTimeout(Clock::time_point now) const;
  // Unavailable naming the endpoint when the connection closed, or none
  // came within the timeout; else OK.
  Status Check(Clock::time_point now) const;
  // Connected once, then the connection closed (the dispatcher went away,
  // or restarted): the only failure a session may recover from.
  bool Lost() const { return verdict_.closed(); }

 private:
  ConnectionWatch(zmq::context_t& context, std::string endpoint, std::string zmq_endpoint,
                  std::chrono::milliseconds timeout);

  zmq::socket_t monitor_;
  std::string endpoint_;
  std::chrono::milliseconds timeout_;
  Clock::time_point started_;
  HandshakeVerdict verdict_;  // what the monitor's events said so far
};

// GT_CONNECT_TIMEOUT in seconds (default 5); 0: wait forever (std::nullopt).
// InvalidArgument naming the variable for anything but a number of seconds
// from 0 to a day.
Result<std::optional<std::chrono::milliseconds>> ConnectTimeoutFromEnv();

}  // namespace gt::client_internal
