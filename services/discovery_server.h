// Prometheus HTTP service discovery for a gt cluster.
//
// gt-dispatcher serves, on its own small HTTP listener (`discovery:` in the
// manifest, or --discovery), the metrics endpoints of itself and of every live
// worker, in the format of Prometheus' http_sd_configs
// (https://prometheus.io/docs/prometheus/latest/http_sd/):
//
//   GET /targets  ->  200, Content-Type: application/json
//   [{"targets": ["127.0.0.1:9100"], "labels": {"role": "dispatcher"}},
//    {"targets": ["10.0.0.7:9101"], "labels": {"role": "worker"}}]
//
// One scrape config with `honor_labels: true` (configs/prometheus.yml) then
// finds workers as they register and forgets them when they are lost. Any
// other path answers 404, any other method 405.
//
// A target whose announced host is a wildcard (0.0.0.0, ::) listens on every
// interface of its machine; it is published as an address Prometheus can
// reach: for a worker that connected over tcp from another machine, the IP it
// connected from; otherwise the address the discovery request itself arrived
// on (the dispatcher's machine). An explicit host is published unchanged.
//
// Thread-safety: the server runs one Boost.Asio thread of its own; `source`
// is called on that thread, once per request, and must be thread-safe
// (Dispatcher::LiveWorkerEndpoints() is).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gt/status.h"

namespace gt::services {

struct DiscoveryTarget {
  std::string role;     // the target's `role` label: "dispatcher" or "worker"
  std::string metrics;  // "host:port" of its /metrics; the host may be a wildcard
  std::string peer_ip;  // where a worker connected from (tcp only), else ""
};

// The JSON body of GET /targets for `targets`, wildcard hosts resolved as the
// header comment says with `local_ip` the address the request arrived on.
// Targets with an empty or unparsable `metrics` are left out.
std::string RenderDiscoveryTargets(const std::vector<DiscoveryTarget>& targets, const std::string& local_ip);

class DiscoveryServer {
 public:
  using Source = std::function<std::vector<DiscoveryTarget>()>;

  // Binds `address` ("host:port"; port 0 picks a free one; host "" or
  // 0.0.0.0 for every interface) and starts serving on a new thread.
  // Returns Unavailable, naming the address and the reason, when it cannot be
  // bound; InvalidArgument when it is not host:port.
  static Result<std::unique_ptr<DiscoveryServer>> Start(const std::string& address, Source source);

  // Stops accepting, closes open connections and joins the thread.
  ~DiscoveryServer();
  DiscoveryServer(const DiscoveryServer&) = delete;
  DiscoveryServer& operator=(const DiscoveryServer&) = delete;

  // "host:port" as bound (the real port when 0 was asked for; a wildcard host
  // reported as 127.0.0.1).
  const std::string& bound() const { return bound_; }

 private:
  class Impl;
  explicit DiscoveryServer(std::unique_ptr<Impl> impl, std::string bound);
  std::unique_ptr<Impl> impl_;
  std::string bound_;
};

}  // namespace gt::services
