// The host side of gt/host_event.h: the sinks a host's stages returned from
// Stage::host_event_sink(), and one call that hands an event to each.
//
// When no stage asked for events, enabled() is false and an event site does
// nothing more than test it: build a HostEvent only after that test.
//
// Thread-safety: none; used on the host's pipeline thread only.
#pragma once

#include <vector>

#include "gt/host_event.h"

namespace gt {

class HostEvents {
 public:
  // REQUIRES: `sink` outlives this object (it is a stage's, and the stages
  // live as long as the pipeline that owns this).
  void Add(HostEventSink* sink) { sinks_.push_back(sink); }
  bool enabled() const { return !sinks_.empty(); }
  // Hands `event` to every sink; an exception from a sink is swallowed (a
  // record of an event must never break the host).
  void Emit(const HostEvent& event) const {
    for (HostEventSink* sink : sinks_) {
      try {
        sink->OnHostEvent(event);
      } catch (...) {
      }
    }
  }

 private:
  std::vector<HostEventSink*> sinks_;
};

}  // namespace gt
