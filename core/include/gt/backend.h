// The backend contract: the terminal stage of a worker.
//
// A backend owns tensors, one namespace per client (Instruction::client), and
// executes instructions on them. It is called from the worker's pipeline
// thread only. It must not throw: library exceptions (e.g. c10::Error) are
// caught inside the plugin and returned as a Status naming the op.
#pragma once

#include <cstdint>
#include <vector>

#include "gt/instruction.h"
#include "gt/status.h"

namespace gt {

// How a backend answers data requests (kFetch).
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  // Sends `bytes` (contiguous, row-major, `dtype`, `shape`) to the client of
  // `request`. The sink keeps `bytes` alive until it has been sent.
  virtual void SendData(const Instruction& request, DType dtype, const Shape& shape,
                        BlobPtr bytes) = 0;
};

// One tensor a backend holds, as a worker reports it to a restarted
// dispatcher (its inventory, wire.proto SessionInventory).
struct HeldTensor {
  ClientId client = 0;
  TensorId id = 0;
  DType dtype = DType::kFloat32;
  Shape shape;
};

struct BackendStats {
  uint64_t live_tensors = 0;
  uint64_t resident_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Executes `inst` (any op, control ops included). On failure returns the
  // reason; the failed op's results then do not exist and the host reports
  // the error to the client.
  virtual Status Execute(const Instruction& inst, ReplySink& replies) = 0;

  // Whether Execute() implements `op`. A worker asks for every op a worker's
  // terminal can receive (OpReachesBackend in gt/op.h) when it starts, and
  // refuses to start with a backend that lacks one, naming them.
  virtual bool Supports(Op op) const = 0;

  virtual BackendStats Stats() const = 0;

  // Every tensor it holds, every client's: what a worker that outlived its
  // dispatcher reports when it registers again. Called on the pipeline
  // thread, between instructions. A backend that keeps none reports none
  // (its clients' sessions then cannot be resumed with their tensors).
  virtual std::vector<HeldTensor> Held() const { return {}; }

  // Bytes of memory held here on behalf of `client`: its tensors' storage
  // and whatever else the backend charges to it (kept freed storage,
  // compiled units). 0 for a client it holds nothing for, and from a
  // backend that does not keep count. Called from the pipeline thread
  // (after each of the client's turns: gt_worker_client_bytes_held).
  virtual uint64_t ClientBytes(ClientId client) const {
    (void)client;
    return 0;
  }
};

}  // namespace gt
