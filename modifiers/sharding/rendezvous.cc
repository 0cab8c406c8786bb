#include "rendezvous.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <exception>
#include <iostream>
#include <random>
#include <vector>

#include "gt/op_attrs.h"

namespace gt::sharding {
namespace {

class TcpStoreRendezvous final : public Rendezvous {
 public:
  TcpStoreRendezvous(std::shared_ptr<c10d::TCPStore> store, std::string address, std::string store_key)
      : store_(std::move(store)), address_(std::move(address) + "/" + store_key), store_key_(std::move(store_key)) {}
  const std::string& address() const override { return address_; }
  void MarkLost(uint64_t generation, int worker) override {
    try {
      const std::string value = std::to_string(generation);
      store_->set(LostMemberKey(store_key_, worker), std::vector<uint8_t>(value.begin(), value.end()));
    } catch (const std::exception& e) {  // the members then wait out their timeout, as before
      std::cerr << "sharding: cannot mark worker " << worker << " lost in the rendezvous store: " << e.what() << "\n";
    }
  }

 private:
  std::shared_ptr<c10d::TCPStore> store_;  // serving while this lives
  std::string address_;
  std::string store_key_;
};

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

}  // namespace

Result<std::unique_ptr<Rendezvous>> StartTcpStore(const std::string& host, int64_t port) {
  std::shared_ptr<c10d::TCPStore> store;
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(port);
    options.isServer = true;
    options.waitWorkers = false;
    store = std::make_shared<c10d::TCPStore>(host, options);
  } catch (const std::exception& e) {
    return Unavailable("sharding: cannot host the rendezvous store on " + host + ":" + std::to_string(port) + ": " +
                       e.what());
  }
  std::string address = host + ":" + std::to_string(store->getPort());
  return std::unique_ptr<Rendezvous>(new TcpStoreRendezvous(std::move(store), std::move(address), RandomStoreKey()));
}

}  // namespace gt::sharding
