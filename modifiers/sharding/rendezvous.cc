#include "rendezvous.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <zmq.hpp>

#include "gt/log.h"
#include "gt/op_attrs.h"
#include "net/rendezvous_protocol.h"

namespace gt::sharding {
namespace {

namespace wire = rendezvous_wire;

// 128 random bits as hex: unguessable by a peer that reaches the store.
std::string RandomStoreKey() {
  std::random_device device;
  std::string key;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 8; ++i) {
    const uint32_t word = device();
    for (int nibble = 0; nibble < 4; ++nibble) key += kHex[(word >> (4 * nibble)) & 0xf];
  }
  return key;
}

// The keys and values, within the bounds of rendezvous_protocol.h.
class BoundedMap {
 public:
  // kOk, or kTooLarge when `value` under `key` would pass a bound.
  wire::Status Set(const std::string& key, std::string value) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    const size_t old = it == map_.end() ? 0 : key.size() + it->second.size();
    if (key.size() > wire::kMaxKeyBytes || value.size() > wire::kMaxValueBytes) return wire::kTooLarge;
    if (it == map_.end() && map_.size() >= wire::kMaxKeys) return wire::kTooLarge;
    if (bytes_ - old + key.size() + value.size() > wire::kMaxStoredBytes) return wire::kTooLarge;
    bytes_ = bytes_ - old + key.size() + value.size();
    map_[key] = std::move(value);
    return wire::kOk;
  }
  bool Get(const std::string& key, std::string* value) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    *value = it->second;
    return true;
  }
  bool Erase(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    bytes_ -= key.size() + it->second.size();
    map_.erase(it);
    return true;
  }
  size_t Size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.size();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::string> map_;  // GUARDED_BY(mu_)
  size_t bytes_ = 0;                                  // GUARDED_BY(mu_)
};

class StoreRendezvous final : public Rendezvous {
 public:
  explicit StoreRendezvous(std::string store_key)
      : store_key_(std::move(store_key)), context_(1), socket_(context_, zmq::socket_type::router) {}
  ~StoreRendezvous() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  Status Listen(const std::string& host, int64_t port) {
    try {
      socket_.set(zmq::sockopt::linger, 0);
      socket_.set(zmq::sockopt::maxmsgsize, wire::kMaxMessageBytes);
      // A peer that connects and never completes ZeroMQ's greeting is dropped.
      socket_.set(zmq::sockopt::handshake_ivl, 5000);
      const bool ipv6 = host.find(':') != std::string::npos;
      if (ipv6) socket_.set(zmq::sockopt::ipv6, 1);
      std::string bound_port = port ? std::to_string(port) : "*";
      try {
        bound_port = Bind(host, bound_port);
      } catch (const zmq::error_t& e) {
        // libzmq binds addresses and interfaces, not names: a name binds
        // the addresses it resolves to (and only those).
        if (e.num() != ENODEV) throw;
        std::vector<std::string> addresses = Resolve(host);  // IPv4 ones: the workers connect over IPv4
        if (addresses.empty()) throw;
        for (const std::string& a : addresses) bound_port = Bind(a, bound_port);
      }
      address_ = host + ":" + bound_port + "/" + store_key_;
    } catch (const zmq::error_t& e) {
      return Unavailable("sharding: cannot host the rendezvous store on " + host + ":" + std::to_string(port) + ": " +
                         e.what());
    }
    thread_ = std::thread([this] { Serve(); });
    return Status::Ok();
  }

  const std::string& address() const override { return address_; }

  // Binds `host`:`port` ("*": a free one); returns the port bound.
  std::string Bind(const std::string& host, const std::string& port) {
    const bool ipv6 = host.find(':') != std::string::npos;
    socket_.bind("tcp://" + (ipv6 ? "[" + host + "]" : host) + ":" + port);
    const std::string bound = socket_.get(zmq::sockopt::last_endpoint);
    return bound.substr(bound.rfind(':') + 1);
  }

  // The numeric IPv4 addresses `host` resolves to.
  static std::vector<std::string> Resolve(const std::string& host) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    std::vector<std::string> out;
    if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return out;
    for (addrinfo* a = found; a; a = a->ai_next) {
      char text[NI_MAXHOST];
      if (::getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST) != 0) continue;
      if (std::find(out.begin(), out.end(), text) == out.end()) out.emplace_back(text);
    }
    ::freeaddrinfo(found);
    return out;
  }
  void MarkLost(uint64_t generation, int worker) override {
    map_.Set(LostMemberKey(store_key_, worker), std::to_string(generation));
  }

 private:
  void Serve() {
    while (!stop_) {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      try {
        if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
        // A request has at most kMaxFrames frames, and nothing past a wrong
        // secret is kept: a stranger's long message is read and dropped frame
        // by frame, never gathered.
        std::vector<zmq::message_t> frames;
        bool refused = false, too_long = false;
        for (bool more = true; more;) {
          zmq::message_t frame;
          if (!socket_.recv(frame, zmq::recv_flags::dontwait)) break;
          more = frame.more();
          if (refused || too_long) continue;
          frames.push_back(std::move(frame));
          refused = frames.size() == 3 && frames[2].to_string() != store_key_;
          too_long = frames.size() > kMaxFrames;
        }
        if (!too_long) Answer(frames);
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) return;
      }
    }
  }

  // frames: [routing id][request id][secret][op][arguments...] (check names up to 256 keys)
  static constexpr size_t kMaxFrames = 4 + 256;
  void Answer(std::vector<zmq::message_t>& frames) {
    if (frames.size() < 3) return;  // not a request: no answer
    std::string value;
    wire::Status status = wire::kBadRequest;
    if (frames[2].to_string() != store_key_) {
      status = wire::kRefused;
      log::WarningPeer charged("rendezvous store");
      log::Warn("sharding", "refused a rendezvous store request without the store's secret");
    } else if (frames.size() >= 4 && frames[3].size() == 1) {
      std::vector<std::string> args;
      for (size_t i = 4; i < frames.size(); ++i) args.push_back(frames[i].to_string());
      status = Execute(static_cast<wire::Op>(*frames[3].data<char>()), args, &value);
    }
    const char code = static_cast<char>(status);
    try {
      socket_.send(frames[0], zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      socket_.send(frames[1], zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      socket_.send(zmq::const_buffer(&code, 1), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      socket_.send(zmq::buffer(value), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {  // the peer is gone: nothing to answer
    }
  }

  wire::Status Execute(wire::Op op, const std::vector<std::string>& args, std::string* value) {
    auto needs = [&](size_t n) { return args.size() == n; };
    switch (op) {
      case wire::kSet: return needs(2) ? map_.Set(args[0], args[1]) : wire::kBadRequest;
      case wire::kGet: return !needs(1) ? wire::kBadRequest : map_.Get(args[0], value) ? wire::kOk : wire::kMissing;
      case wire::kAdd: {
        if (!needs(2)) return wire::kBadRequest;
        std::lock_guard<std::mutex> lock(add_mu_);  // read, add, write as one
        std::string held = "0";
        (void)map_.Get(args[0], &held);
        long long sum = 0;  // wraps instead of overflowing (undefined) on a hostile member's numbers
        __builtin_add_overflow(std::strtoll(held.c_str(), nullptr, 10), std::strtoll(args[1].c_str(), nullptr, 10), &sum);
        *value = std::to_string(sum);
        return map_.Set(args[0], *value);
      }
      case wire::kCheck: {
        std::string ignored;
        bool all = !args.empty();
        for (const std::string& key : args) all = all && map_.Get(key, &ignored);
        *value = all ? "1" : "0";
        return wire::kOk;
      }
      case wire::kDelete: *value = needs(1) && map_.Erase(args[0]) ? "1" : "0"; return wire::kOk;
      case wire::kNumKeys: *value = std::to_string(map_.Size()); return wire::kOk;
      case wire::kCompareSet: {
        if (!needs(3)) return wire::kBadRequest;
        std::lock_guard<std::mutex> lock(add_mu_);
        std::string held;
        const bool set = map_.Get(args[0], &held);
        if ((!set && args[1].empty()) || (set && held == args[1])) {
          if (wire::Status s = map_.Set(args[0], args[2]); s != wire::kOk) return s;
          *value = args[2];
        } else {
          *value = set ? held : args[1];
        }
        return wire::kOk;
      }
    }
    return wire::kBadRequest;
  }

  std::string store_key_;
  std::string address_;
  zmq::context_t context_;
  zmq::socket_t socket_;  // the serving thread's once it starts
  std::atomic<bool> stop_{false};
  std::thread thread_;
  BoundedMap map_;
  std::mutex add_mu_;  // kAdd and kCompareSet read and write as one
};

}  // namespace

Result<std::unique_ptr<Rendezvous>> StartStore(const std::string& host, int64_t port) {
  auto store = std::make_unique<StoreRendezvous>(RandomStoreKey());
  if (Status s = store->Listen(host, port); !s.ok()) return s;
  return std::unique_ptr<Rendezvous>(std::move(store));
}

}  // namespace gt::sharding
