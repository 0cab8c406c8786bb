#include "net/transport.h"

#include <atomic>
#include <random>
#include <thread>

namespace gt {
namespace {

class FrameBlob final : public Blob {
 public:
  explicit FrameBlob(zmq::message_t&& message) : message_(std::move(message)) {}
  const std::byte* data() const override { return static_cast<const std::byte*>(message_.data()); }
  size_t size() const override { return message_.size(); }

 private:
  zmq::message_t message_;
};

void ReleaseBlob(void* /*data*/, void* hint) { delete static_cast<BlobPtr*>(hint); }

}  // namespace

std::optional<std::vector<zmq::message_t>> ReceiveFrames(zmq::socket_t& socket, zmq::recv_flags flags) {
  std::vector<zmq::message_t> frames;
  try {
    zmq::message_t first;
    if (!socket.recv(first, flags)) return std::nullopt;
    bool more = first.more();
    frames.push_back(std::move(first));
    while (more) {
      zmq::message_t next;
      (void)socket.recv(next, zmq::recv_flags::none);
      more = next.more();
      frames.push_back(std::move(next));
    }
  } catch (const zmq::error_t& e) {
    if (e.num() == ETERM || e.num() == EINTR) return std::nullopt;
    throw;
  }
  return frames;
}

Result<WireMessage> DecodeFrames(std::vector<zmq::message_t>&& frames, bool with_routing_id) {
  WireMessage out;
  if (Status decoded = DecodeFramesInto(std::move(frames), with_routing_id, out); !decoded.ok()) return decoded;
  return out;
}

Status DecodeFramesInto(std::vector<zmq::message_t>&& frames, bool with_routing_id, WireMessage& out) {
  out.routing_id.clear();
  out.frames.clear();
  out.bytes = 0;
  size_t next = 0;
  if (with_routing_id) {
    if (frames.empty()) return InvalidArgument("message without routing id");
    out.routing_id.assign(static_cast<const char*>(frames[0].data()), frames[0].size());
    next = 1;
  }
  for (size_t i = next; i < frames.size(); ++i) out.bytes += frames[i].size();
  if (next >= frames.size()) return InvalidArgument("message without an envelope frame");
  const zmq::message_t& head = frames[next];
  // ParseFromArray clears `envelope` first; cleared repeated elements are kept for reuse.
  if (!out.envelope.ParseFromArray(head.data(), static_cast<int>(head.size())))
    return InvalidArgument("envelope frame of " + std::to_string(head.size()) + " bytes is not a gt.wire.Envelope");
  if (out.envelope.kind() == wire::Envelope::UNKNOWN)
    return InvalidArgument("envelope has no kind");
  for (size_t i = next + 1; i < frames.size(); ++i)
    out.frames.push_back(std::make_shared<FrameBlob>(std::move(frames[i])));
  return Status::Ok();
}

int PollWithBusyWait(zmq::pollitem_t* items, size_t count, std::chrono::milliseconds timeout,
                     std::chrono::microseconds busy_wait) {
  if (busy_wait.count() > 0) {
    const auto until = std::chrono::steady_clock::now() + busy_wait;
    do {
      if (int ready = zmq::poll(items, count, std::chrono::milliseconds(0)); ready > 0) return ready;
      std::this_thread::yield();  // a thread woken on this vCPU runs at once
    } while (std::chrono::steady_clock::now() < until);
  }
  return zmq::poll(items, count, timeout);
}

uint64_t RandomToken() {
  std::random_device random;
  return (static_cast<uint64_t>(random()) << 32 | random()) | 1;
}

zmq::message_t BlobToMessage(BlobPtr blob) {
  if (!blob || blob->size() == 0) return zmq::message_t();
  void* data = const_cast<std::byte*>(blob->data());  // ZeroMQ only reads it
  size_t size = blob->size();
  return zmq::message_t(data, size, &ReleaseBlob, new BlobPtr(std::move(blob)));
}

namespace {
Result<size_t> SendAll(zmq::socket_t& socket, const std::string& routing_id,
                       std::vector<zmq::message_t>& frames) {
  size_t bytes = 0;
  try {
    if (!routing_id.empty()) {
      // A ROUTER's queue to each peer is bounded (its SNDHWM) and, with
      // ZMQ_ROUTER_MANDATORY, a full one is said here instead of waited on.
      // Only a message's first frame can find it full.
      zmq::message_t id(routing_id.data(), routing_id.size());
      if (!socket.send(id, zmq::send_flags::sndmore | zmq::send_flags::dontwait))
        return ResourceExhausted("the peer's queue is full");
    }
    for (size_t i = 0; i < frames.size(); ++i) {
      bytes += frames[i].size();
      auto flag = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
      if (!socket.send(frames[i], flag)) return Unavailable("send would block");
    }
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("send failed: ") + e.what());
  }
  return bytes;
}
}  // namespace

Result<size_t> SendEnvelope(zmq::socket_t& socket, const std::string& routing_id,
                            const wire::Envelope& envelope, const std::vector<BlobPtr>& data) {
  std::vector<zmq::message_t> frames;
  frames.reserve(1 + data.size());
  std::string head;
  envelope.SerializeToString(&head);
  frames.emplace_back(head.data(), head.size());
  for (const BlobPtr& blob : data) frames.push_back(BlobToMessage(blob));
  return SendAll(socket, routing_id, frames);
}

Result<size_t> SendFrames(zmq::socket_t& socket, const std::string& routing_id,
                          std::vector<zmq::message_t>& frames) {
  return SendAll(socket, routing_id, frames);
}

std::string UniqueInprocEndpoint(const std::string& prefix) {
  static std::atomic<uint64_t> counter{0};
  return "inproc://" + prefix + "-" + std::to_string(counter.fetch_add(1));
}

}  // namespace gt
