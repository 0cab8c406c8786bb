// The collective rendezvous: the store the members of a collective group
// meet at (LibTorch's c10d::TCPStore, hosted by the dispatcher's sharding
// stage). The stage only names its address in every collective it emits;
// the workers' backends connect to it.
//
// Only rendezvous.cc includes LibTorch: the stage receives a Rendezvous
// through StartRendezvous, so the runtime library (gt_sharding_runtime) and
// its tests build without LibTorch, and the plugin (gt_sharding) links it.
//
// Thread-safety: a Rendezvous is immutable once started; the store serves
// its clients on its own threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gt/status.h"

namespace gt::sharding {

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  // "host:port/STORE_KEY": where the members connect to, and the random key
  // that prefixes their keys there (CollectiveSpec::store_key); the same for
  // the object's life.
  virtual const std::string& address() const = 0;
  // Worker index `worker` was lost as membership generation `generation`
  // ended: members still forming a group with it in that generation or an
  // earlier one stop waiting for it (gt/op_attrs.h, LostMemberKey).
  virtual void MarkLost(uint64_t generation, int worker) = 0;
};

// Starts a rendezvous listening on `host`:`port` (0: a free port); its
// address names the port it got. Fails (Unavailable) with a message naming
// host and port when it cannot listen.
using StartRendezvous = Result<std::unique_ptr<Rendezvous>> (*)(const std::string& host, int64_t port);

// The c10d::TCPStore server. Defined in rendezvous.cc (the plugin only).
Result<std::unique_ptr<Rendezvous>> StartTcpStore(const std::string& host, int64_t port);

}  // namespace gt::sharding
