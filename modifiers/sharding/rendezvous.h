// The collective rendezvous: the store the members of a collective group
// meet at (a bounded key/value store hosted by the dispatcher's sharding
// stage, net/rendezvous_protocol.h; the workers reach it through c10d's
// Store interface). The stage only names its address in every collective
// it emits; the workers' backends connect to it.
//
// The store binds only the host it is announced at (the dispatcher's listen
// host unless rendezvous_host says otherwise), answers only requests that
// carry its secret (the store key, which only workers are told), and bounds
// what it keeps. The stage receives a Rendezvous through StartRendezvous, so
// its tests can stand one in.
//
// Thread-safety: a Rendezvous's address is immutable once started; the store
// serves on a thread of its own, and MarkLost may be called from any.
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

// The store server (rendezvous_protocol.h). Defined in rendezvous.cc (the
// plugin only).
Result<std::unique_ptr<Rendezvous>> StartStore(const std::string& host, int64_t port);

}  // namespace gt::sharding
