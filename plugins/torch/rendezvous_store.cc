#include "rendezvous_store.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "net/rendezvous_protocol.h"

namespace gt::torch_backend {
namespace {

namespace wire = rendezvous_wire;

std::string Bytes(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::vector<uint8_t> Vector(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

}  // namespace

RendezvousStore::RendezvousStore(const std::string& host, uint16_t port, std::string secret,
                                 std::chrono::milliseconds timeout)
    : c10d::Store(timeout),
      where_(host + ":" + std::to_string(port)),
      secret_(std::move(secret)),
      context_(1),
      socket_(context_, zmq::socket_type::dealer) {
  socket_.set(zmq::sockopt::linger, 0);
  const bool ipv6 = host.find(':') != std::string::npos;
  if (ipv6) socket_.set(zmq::sockopt::ipv6, 1);
  socket_.connect("tcp://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port));
}

RendezvousStore::~RendezvousStore() = default;

std::pair<char, std::string> RendezvousStore::Request(char op, const std::vector<std::string>& args) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  socket_.send(zmq::const_buffer(&id, sizeof id), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(secret_), zmq::send_flags::sndmore);
  socket_.send(zmq::const_buffer(&op, 1), args.empty() ? zmq::send_flags::none : zmq::send_flags::sndmore);
  for (size_t i = 0; i < args.size(); ++i)
    socket_.send(zmq::buffer(args[i]), i + 1 < args.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0)
      throw std::runtime_error("the rendezvous store at " + where_ + " did not answer within " +
                               std::to_string(timeout_.count()) + " ms");
    std::vector<zmq::message_t> frames;
    for (bool more = true; more;) {
      zmq::message_t frame;
      (void)socket_.recv(frame, zmq::recv_flags::none);
      more = frame.more();
      frames.push_back(std::move(frame));
    }
    uint64_t answered = 0;
    if (frames.size() != 3 || frames[0].size() != sizeof answered || frames[1].size() != 1) continue;
    std::memcpy(&answered, frames[0].data(), sizeof answered);
    if (answered != id) continue;  // an answer to a request that timed out earlier
    return {*frames[1].data<char>(), frames[2].to_string()};
  }
}

std::string RendezvousStore::Expect(std::pair<char, std::string> answer, const std::string& what) const {
  switch (answer.first) {
    case wire::kOk: return std::move(answer.second);
    case wire::kRefused:
      throw std::runtime_error("the rendezvous store at " + where_ + " refused " + what + ": a wrong store key");
    case wire::kTooLarge:
      throw std::runtime_error("the rendezvous store at " + where_ + " refused " + what +
                               ": past its bounds on key and value sizes or keys kept");
    case wire::kMissing: throw std::runtime_error("the rendezvous store at " + where_ + " holds no " + what);
    default: throw std::runtime_error("the rendezvous store at " + where_ + " could not read " + what);
  }
}

void RendezvousStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  Expect(Request(wire::kSet, {key, Bytes(value)}), "set of " + key);
}

std::vector<uint8_t> RendezvousStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                                 const std::vector<uint8_t>& desired) {
  return Vector(Expect(Request(wire::kCompareSet, {key, Bytes(expected), Bytes(desired)}), "compare-set of " + key));
}

std::vector<uint8_t> RendezvousStore::get(const std::string& key) {
  wait({key}, timeout_);
  return Vector(Expect(Request(wire::kGet, {key}), "key " + key));
}

int64_t RendezvousStore::add(const std::string& key, int64_t value) {
  return std::strtoll(Expect(Request(wire::kAdd, {key, std::to_string(value)}), "add to " + key).c_str(), nullptr, 10);
}

bool RendezvousStore::deleteKey(const std::string& key) {
  return Expect(Request(wire::kDelete, {key}), "delete of " + key) == "1";
}

bool RendezvousStore::check(const std::vector<std::string>& keys) {
  return Expect(Request(wire::kCheck, keys), "check") == "1";
}

int64_t RendezvousStore::getNumKeys() {
  return std::strtoll(Expect(Request(wire::kNumKeys, {}), "key count").c_str(), nullptr, 10);
}

void RendezvousStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto pause = std::chrono::milliseconds(1);; pause = std::min(2 * pause, std::chrono::milliseconds(20))) {
    if (check(keys)) return;
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("keys not set in the rendezvous store at " + where_ + " within " +
                               std::to_string(timeout.count()) + " ms");
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace gt::torch_backend
