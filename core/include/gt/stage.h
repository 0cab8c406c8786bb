// The stage contract: what a stream modifier plugin implements.
//
// A host (dispatcher or worker) runs its manifest's stages as a chain on one
// pipeline thread. Each instruction enters the first stage; whatever a stage
// emits enters the next one; the last emits into the host's terminal (the
// dispatcher's router or the worker's backend).
//
// Ordering: instructions reach Process() in stream order; what a stage emits
// keeps the order it was emitted in.
// Threading: every call on one Stage object comes from the same thread; a
// stage needs no locks for its own state.
// Errors: return a non-OK Status to reject an instruction; the host reports it
// to the client that sent it (at its next sync point) and counts it in
// gt_stage_errors_total. An exception escaping a stage is caught by the host
// and treated the same way (kind "plugin_error").
#pragma once

#include <cstddef>
#include <string>

#include "gt/host_event.h"
#include "gt/instruction.h"
#include "gt/options.h"
#include "gt/status.h"

namespace prometheus {
class Registry;
}

namespace gt {

// kClient: the client library's own pipeline (a `host: client` manifest),
// which sees one client's stream before it is sent (client/src/client_pipeline.h).
enum class HostKind : uint8_t { kDispatcher = 1, kWorker = 2, kClient = 3 };
std::string_view HostKindName(HostKind kind);  // "dispatcher" | "worker" | "client"

// Where a stage sends what it emits.
class Emitter {
 public:
  virtual ~Emitter() = default;
  virtual void Emit(Instruction&& inst) = 0;
};

// Everything a plugin's factory may use. Valid for the lifetime of the host.
struct StageContext {
  HostKind host;
  std::string instance;       // host id, e.g. "worker-0"
  std::string stage;          // the stage's name in the manifest
  const OptionValues* options;
  // For the plugin's own metrics. Give every series the labels
  // {host, instance, stage} (see StageLabels() in gt/metrics.h). The registry outlives every stage.
  prometheus::Registry* registry;
  // For a plugin that opens a listener of its own (plugin ABI 6): the
  // address this host's peers reach it at. A dispatcher's is the host of its
  // tcp `listen` endpoint, possibly a wildcard ("0.0.0.0"); a worker's is
  // the local address it reaches its dispatcher from. Empty when unknown
  // (inproc, ipc): use loopback.
  std::string peer_host;
  // A worker's: the host of its dispatcher's tcp endpoint (a rendezvous a
  // dispatcher announces on a wildcard address is reached there); else empty.
  std::string dispatcher_host;
};

class Stage {
 public:
  virtual ~Stage() = default;

  // Takes one instruction and emits zero or more into `out`: pass it on,
  // rewrite it, drop it (emit nothing) or inject new ones. The instruction
  // is the stage's to move from (an rvalue reference rather than a value: a
  // training step's instructions each visit several stages, and a move plus
  // a destruction of the parameter per visit was a tenth of a dispatcher's
  // work).
  virtual Status Process(Instruction&& inst, Emitter& out) = 0;

  // Called after the last instruction of each incoming batch; a stage that
  // holds instructions back emits them here (or later).
  virtual Status EndBatch(Emitter& out) {
    (void)out;
    return Status::Ok();
  }

  // Instructions currently held back (reported as gt_stage_queue_depth).
  virtual size_t Buffered() const { return 0; }

  // A stage that wants the host's events (gt/host_event.h: connects, where
  // the router sent an op, a worker's completion times) returns a sink that
  // lives as long as the stage; the host asks once, right after creating
  // it. nullptr (the default): no events, and no cost.
  virtual HostEventSink* host_event_sink() { return nullptr; }
};

}  // namespace gt
