// ZeroMQ framing of gt messages: [routing id] envelope [data frame...].
//
// Data frames move between sockets and Blobs without copies: a received frame
// becomes a Blob that owns the zmq::message_t, and a Blob is sent by handing
// ZeroMQ its bytes with a free function that releases the Blob.
//
// Thread-safety: none; a socket belongs to one thread (ZeroMQ's rule).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "gt/instruction.h"
#include "gt/status.h"
#include "wire.pb.h"

namespace gt {

struct WireMessage {
  std::string routing_id;  // ROUTER sockets only
  wire::Envelope envelope;
  std::vector<BlobPtr> frames;
  size_t bytes = 0;        // total size on the wire
};

// Receives the frames of one multipart message. Returns nullopt when nothing
// is waiting (with zmq::recv_flags::dontwait) or the context is closing.
std::optional<std::vector<zmq::message_t>> ReceiveFrames(zmq::socket_t& socket, zmq::recv_flags flags);

// Decodes frames into a WireMessage; `with_routing_id` for ROUTER sockets.
// Fails with InvalidArgument on anything malformed.
Result<WireMessage> DecodeFrames(std::vector<zmq::message_t>&& frames, bool with_routing_id);
// The same into `out`, which a hot loop keeps from message to message:
// parsing into a used Envelope reuses the repeated fields' storage (each
// instruction's message and id arrays), where a fresh one allocates them
// all again. `out` holds only this message afterwards; on failure its
// contents are unspecified.
Status DecodeFramesInto(std::vector<zmq::message_t>&& frames, bool with_routing_id, WireMessage& out);

// Sends envelope + frames; `routing_id` empty for DEALER/PAIR sockets.
// Returns the bytes sent; Unavailable when the peer cannot be reached;
// ResourceExhausted, with nothing sent, when a ROUTER's queue to the peer is
// full (its SNDHWM; a DEALER's send waits instead).
Result<size_t> SendEnvelope(zmq::socket_t& socket, const std::string& routing_id,
                            const wire::Envelope& envelope, const std::vector<BlobPtr>& frames);

// Forwards already-received frames unchanged (no re-encoding).
Result<size_t> SendFrames(zmq::socket_t& socket, const std::string& routing_id,
                          std::vector<zmq::message_t>& frames);

// zmq::poll, but first polls without sleeping for up to `busy_wait`,
// yielding the CPU between polls (a thread woken on this vCPU runs at
// once). Between threads of one process (inproc://) a reply often comes
// within tens of microseconds, and on a virtual machine waking a thread
// whose vCPU went idle costs about as much again (docs/performance/
// round-trip.md).
int PollWithBusyWait(zmq::pollitem_t* items, size_t count, std::chrono::milliseconds timeout,
                     std::chrono::microseconds busy_wait);

// A zmq message that shares `blob`'s bytes.
zmq::message_t BlobToMessage(BlobPtr blob);

// A random, never-zero 64-bit token: what names a client's heartbeats and
// a worker's connections (0 means "none" on the wire).
uint64_t RandomToken();

// Unique inproc:// endpoint name for in-process links.
std::string UniqueInprocEndpoint(const std::string& prefix);

}  // namespace gt
