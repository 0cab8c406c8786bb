// The dispatcher's host events (gt/host_event.h): connects, disconnects and
// what each client got back, handed to the stages that asked for them
// (HostEvents). With no such stage, enabled() is false and an event site
// costs one test: build an event only after it.
//
// Thread-safety: the dispatcher's thread, like the ClientTable it reads.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "dispatcher/client_table.h"
#include "gt/host_event.h"
#include "host/host_events.h"
#include "wire.pb.h"

namespace gt {

class DispatcherEvents {
 public:
  // REQUIRES: `clients` outlives this object.
  explicit DispatcherEvents(ClientTable& clients) : clients_(clients) {}

  // The pipeline's sinks, once it is built (none before: enabled() false).
  // REQUIRES: `sinks` outlives this object.
  void set_sinks(const HostEvents* sinks) { sinks_ = sinks; }
  bool enabled() const { return sinks_ != nullptr && sinks_->enabled(); }

  // A connect or disconnect of `peer` ("client 3", "worker w0").
  // REQUIRES: enabled().
  void Record(HostEventKind kind, const std::string& peer, std::string_view command, std::string_view detail) const;
  // SEND: what a client got back (fetched data, a sync's answer, an
  // error), `bytes` long on the wire. Anything else, or a message to a
  // worker, records nothing. REQUIRES: enabled().
  void RecordReply(const std::string& route, const wire::Envelope& env, size_t bytes) const;

 private:
  ClientTable& clients_;
  const HostEvents* sinks_ = nullptr;
};

}  // namespace gt
