// The client's own stream stages: the stages of a `host: client` manifest
// run on this client's instructions before they are encoded and sent, by the
// one Pipeline implementation the dispatcher and workers run. With the
// hotpath and compile stages here, a replayed hot sequence leaves the client
// as one run_unit: neither side encodes, decodes or stages its instructions
// one by one any more (the dispatcher's router still checks the unit and
// every id it names).
//
// Which manifest: GT_CLIENT_MANIFEST names a file; otherwise GT_COMPILE=1,
// or GT_COMPILE unset and GT_WORKER_BATCH_SIZE set to anything but 1, means
// hotpath + compile (configs/client-compile.yaml; their GT_HOTPATH_* and
// GT_WORKER_BATCH_SIZE overrides apply); otherwise there is none. So
// `GT_WORKER_BATCH_SIZE=10 python train.py` batches against any dispatcher,
// embedded or not; GT_COMPILE=0 keeps it eager whatever the batch size.
//
// Thread-safety: none; the session calls it under its mutex.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <prometheus/registry.h>

#include "gt/op_attrs.h"
#include "host/host_metrics.h"
#include "host/manifest.h"
#include "host/pipeline.h"
#include "wire.pb.h"

namespace gt::client_internal {

// The manifest the environment asks for, or nullopt for none. A file that
// cannot be read or is not a valid client manifest is an error naming it.
Result<std::optional<HostManifest>> ClientManifestFromEnv();

class ClientPipeline final : public Terminal {
 public:
  // Receives, in stream order, what the last stage emits.
  using Sink = std::function<void(Instruction&&)>;

  static Result<std::unique_ptr<ClientPipeline>> Create(const HostManifest& manifest, Sink sink);

  void Push(Instruction&& inst) { pipeline_->Push(std::move(inst)); }
  // Ends the stages' batch: each passes on what it holds back. (Not named
  // EndBatch: that is the Terminal's hook, which the pipeline calls.)
  void Drain() { pipeline_->EndBatch(); }

  // Errors the stages reported since the last call, for the next sync point.
  std::vector<wire::OpError> TakeErrors();
  // This pipeline's metrics, as a host of its own in a stats reply.
  wire::HostSnapshot Snapshot() const;

  Status Accept(Instruction inst) override {
    // Markers with a hot sequence's id are for a compile stage after the
    // hotpath one; with none, they mean nothing to the hosts (which refuse
    // a client's).
    if ((inst.op == Op::kHotStart || inst.op == Op::kHotEnd) && MarksHotSequence(inst)) return Status::Ok();
    sink_(std::move(inst));
    return Status::Ok();
  }

 private:
  ClientPipeline(HostManifest manifest, Sink sink);

  HostManifest manifest_;
  Sink sink_;
  prometheus::Registry registry_;
  HostMetrics metrics_;
  std::unique_ptr<Pipeline> pipeline_;
  std::vector<wire::OpError> errors_;
};

}  // namespace gt::client_internal
