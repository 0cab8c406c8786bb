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
#include <vector>

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

// A stage's tag for one piece of a client tensor it placed on a worker (a
// shard, a copy, a pending sum's addend): the worker keeps it with the piece
// and reports it back to a restarted dispatcher (Stage::Restore). Bounded by
// kMaxPieceTagBytes; an empty `placement` forgets the piece's tag.
struct PieceTag {
  ClientId client = 0;
  int32_t worker = -1;
  TensorId id = 0;         // the piece
  TensorId logical = 0;    // the client tensor it is part of
  uint32_t pieces = 0;     // how many pieces that tensor has
  std::string placement;   // the stage's own encoding
};
inline constexpr size_t kMaxPieceTagBytes = 16 * 1024;

// Where a stage sends what it emits.
class Emitter {
 public:
  virtual ~Emitter() = default;
  virtual void Emit(Instruction&& inst) = 0;
  // Tags a piece (plugin ABI 8). The host sends the tags a stage gave during
  // a batch with that batch's instructions; hosts without workers drop them.
  virtual void Tag(PieceTag&& tag) { (void)tag; }
};

// A client session a restarted dispatcher takes back (Stage::Restore): what
// its workers hold of it, and the tensors the client holds handles to.
struct HeldPiece {
  int32_t worker = -1;
  TensorId id = 0;
  Shape shape;
  DType dtype = DType::kFloat32;
  TensorId logical = 0;   // with a tag (PieceTag)
  uint32_t pieces = 0;    // with a tag
  std::string placement;  // the tag; empty: none
};
struct ClientTensor {
  TensorId id = 0;
  Shape shape;
  DType dtype = DType::kFloat32;
};
struct RestoredSession {
  ClientId client = 0;
  std::vector<HeldPiece> held;       // every tensor of it any worker holds
  std::vector<ClientTensor> live;    // the client's own view
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

  // A restarted dispatcher takes `session` back (plugin ABI 8), before the
  // client's configs and replay reach Process: a stage rebuilds what it
  // kept of the client from the tags it gave (Emitter::Tag). A non-OK
  // status refuses the session (the client gets it; its tensors are freed)
  // and must leave nothing of the client behind. Default: nothing to rebuild.
  virtual Status Restore(const RestoredSession& session, Emitter& out) {
    (void)session;
    (void)out;
    return Status::Ok();
  }
};

}  // namespace gt
