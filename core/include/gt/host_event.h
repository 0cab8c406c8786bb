// Host events: what a host does around the instruction stream that no stage
// sees pass by, so that a stage which keeps a record (the instruction_log
// modifier) can record the whole life of an instruction in one place.
//
//   CONNECT      a client connected / a worker registered (dispatcher); the
//                dispatcher welcomed this worker (worker)
//   DISCONNECT   a client or a worker left or was declared lost (dispatcher)
//   WORKER_SEND  the dispatcher's router put an instruction in a named
//                worker's batch (where an op was placed)
//   SEND         the dispatcher answered a client (fetched data, a sync)
//   WORKER_DONE  a worker's backend finished an instruction, with its time
//
// A stage opts in by returning a sink from Stage::host_event_sink(); the host
// asks once, after creating the stage. A host with no such stage builds no
// events at all (its only cost is one empty-vector test per event site).
//
// Thread-safety: the host calls OnHostEvent() on the stage's own pipeline
// thread (the thread that calls Process()), never concurrently with it.
// Lifetime: everything a HostEvent points to is valid only during the call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gt/instruction.h"

namespace gt {

enum class HostEventKind : uint8_t { kConnect, kDisconnect, kWorkerSend, kSend, kWorkerDone };

// The event's name as a log writes it: "CONNECT", "DISCONNECT",
// "WORKER_SEND", "SEND", "WORKER_DONE" (at most 11 characters).
constexpr std::string_view HostEventName(HostEventKind kind) {
  switch (kind) {
    case HostEventKind::kConnect: return "CONNECT";
    case HostEventKind::kDisconnect: return "DISCONNECT";
    case HostEventKind::kWorkerSend: return "WORKER_SEND";
    case HostEventKind::kSend: return "SEND";
    case HostEventKind::kWorkerDone: return "WORKER_DONE";
  }
  return "?";
}

struct HostEvent {
  HostEventKind kind;
  // Who the event is about, as "<kind> <name>": "client 7",
  // "worker worker-0", "dispatcher".
  std::string_view peer;
  // The instruction it concerns (kWorkerSend, kWorkerDone), else null.
  const Instruction* inst = nullptr;
  // With no instruction: what was sent or what happened ("fetch", "sync",
  // "client", "worker").
  std::string_view command;
  // Bytes of payload the event carried (0 when none).
  size_t bytes = 0;
  // kWorkerDone: seconds the backend took; < 0 when not timed.
  double seconds = -1;
  // Free text appended to the line: the client an instruction belongs to,
  // why a peer left, a failure's message. May be empty.
  std::string_view detail;
};

class HostEventSink {
 public:
  virtual ~HostEventSink() = default;
  // Records `event`. Must not throw (an exception is caught and ignored by
  // the host) and should be cheap: it runs on the host's pipeline thread.
  virtual void OnHostEvent(const HostEvent& event) = 0;
};

}  // namespace gt
