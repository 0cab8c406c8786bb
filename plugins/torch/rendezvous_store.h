// The workers' side of the collective rendezvous store (issue 39): c10d's
// Store interface, which Gloo's process groups meet through, over the
// dispatcher's store (net/rendezvous_protocol.h) instead of c10d::TCPStore.
// Every request carries the store's secret (the store key a collective
// names); a refusal, a bound passed or no answer within the timeout throws
// std::runtime_error naming it, which forming the group reports.
//
// Thread-safety: every method may be called from any thread (one request
// at a time).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <zmq.hpp>

namespace gt::torch_backend {

class RendezvousStore final : public c10d::Store {
 public:
  // Connects to the store at `host`:`port` (no request is sent yet).
  RendezvousStore(const std::string& host, uint16_t port, std::string secret, std::chrono::milliseconds timeout);
  ~RendezvousStore() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  // Waits (up to the timeout) for `key` to be set.
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  // One request's answer: its status and value. Throws on no answer.
  std::pair<char, std::string> Request(char op, const std::vector<std::string>& args);
  // The value of an kOk answer; throws naming `what` on any other.
  std::string Expect(std::pair<char, std::string> answer, const std::string& what) const;

  std::mutex mu_;
  std::string where_;  // "host:port", for errors
  std::string secret_;
  zmq::context_t context_;
  zmq::socket_t socket_;  // GUARDED_BY(mu_)
  uint64_t next_id_ = 1;  // GUARDED_BY(mu_)
};

}  // namespace gt::torch_backend
