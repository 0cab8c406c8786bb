// What a ZeroMQ socket monitor's events say about one peer's connection to
// the dispatcher: connected (a handshake completed), closed after that, or
// refused for good, with the reason in words. Shared by the client's
// connection watch and gt-worker, so that both say the same thing:
//   - a CURVE handshake the dispatcher refused (a key on no list);
//   - a mechanism mismatch: the dispatcher requires CURVE keys and this side
//     has none, or the other way round;
//   - connections closed before any handshake completed, again and again
//     (kDropsBeforeVerdict): libzmq does not say whether the peer spoke, so
//     one plain connection asks (PeerSpeaksZeroMq). A dispatcher that
//     requires keys greets first and then closes a keyless peer's handshake
//     (over ipc, before libzmq reads the greeting); an address where nothing
//     speaks ZeroMQ (another service, a forwarded port with nothing behind
//     it) says nothing.
// libzmq retries a refused handshake forever; the verdict lets its user stop.
//
// Thread-safety: none; one owner feeds it events.
#pragma once

#include <zmq.h>

#include <cstdint>
#include <string>

namespace gt {

class HandshakeVerdict {
 public:
  // The events Observe reads: pass them to zmq_socket_monitor.
  static constexpr int kEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED |
                                 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;
  static constexpr int kDropsBeforeVerdict = 3;

  // `who` names this side ("client", "worker"); `keys` where its keys are
  // given ("GT_CLIENT_KEY, GT_SERVER_KEY"; "--key, --server-key");
  // `key_list` the dispatcher's list its key belongs on ("clients");
  // `endpoint` the ZeroMQ endpoint connected to.
  HandshakeVerdict(std::string who, std::string keys, std::string key_list, std::string endpoint);

  void Observe(uint16_t event);

  bool connected() const { return connected_; }
  // Connected once, then the connection closed.
  bool closed() const { return closed_; }
  // Why no handshake will ever complete; empty: none known.
  const std::string& refused() const { return refused_; }

 private:
  std::string who_, keys_, key_list_, endpoint_;
  bool connected_ = false;
  bool closed_ = false;
  int drops_ = 0;  // connections closed before any handshake event
  std::string refused_;
};

// Whether whatever accepts a connection at `endpoint` (tcp:// or ipc://)
// greets it as ZeroMQ does (its first byte, within about a second).
bool PeerSpeaksZeroMq(const std::string& endpoint);

// Reads one monitor event ({uint16 event, uint32 value} and the endpoint)
// from `monitor` without waiting; false when none is there.
bool ReadMonitorEvent(void* monitor, uint16_t* event);

}  // namespace gt
