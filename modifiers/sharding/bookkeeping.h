// The sharding stage's records: per client its signal configs, the
// placement of every tensor it made after its first config, the tensors
// that were never made because their op failed, its default worker and the
// next physical id; and the live workers the dispatcher announced.
//
// Thread-safety: none; owned by one ShardingStage (one pipeline thread).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "gt/failed_tensors.h"
#include "gt/instruction.h"
#include "gt/status.h"
#include "placement.h"

namespace gt::sharding {

// A signal config as the dispatcher received it (kConfigure; see gt/op.h).
struct Config {
  bool sharded = false;
  int64_t axis = 0;
  std::vector<int> workers;  // empty: every live worker
  bool replicated = false;
  std::string backward;
  bool compile = false;
  // A 2-D mesh layout (mesh.h): {rows, columns} and a placement per mesh
  // axis (a Shard dim may count from the end); `workers` the mesh's,
  // row-major. Empty: none.
  std::vector<int64_t> mesh_shape;
  std::vector<MeshAxis> mesh_axes;
};

// Everything the stage keeps for one client.
struct Client {
  // False until the client registers its first config (always true with
  // auto-sharding): until then no tensor of it has a record here.
  bool placing = false;
  std::map<std::string, Config> configs;
  std::unordered_map<TensorId, Tensor> tensors;
  FailedTensors failed;  // ids never made because their op failed (gt/failed_tensors.h)
  int default_worker = -1;  // where its whole tensors are made (and every unrecorded one lives)
  TensorId next_physical = kPhysicalIdBase;
  // Between InspectMode kStartRecording and kStopRecording (gt/op_attrs.h):
  // its ops' collectives back to back (gt/layout.h AppendRecorded), for the
  // client's report.
  bool recording = false;
  std::vector<int64_t> collective_log;
  uint64_t collectives_dropped = 0;  // past kMaxCollectiveLog: not noted, only counted
  // What its pieces' workers were last told of each record (PieceTag,
  // piece_tags.h), compared at the end of a batch in which it placed
  // anything (`retag`): a record that changed is told again.
  bool retag = false;
  std::unordered_map<TensorId, Tensor> tagged;
};

// A recording client's log holds at most this many values (32 MiB): a
// client may not grow the dispatcher's memory without bound.
inline constexpr size_t kMaxCollectiveLog = size_t{1} << 22;
// A fresh id for a shard, copy or temporary of `c`.
inline TensorId NewId(Client& c) { return c.next_physical++; }

// The live workers (kMembership) and the choice of each client's worker.
class Workers {
 public:
  // A change of the live set starts a new generation: groups formed before
  // it are not reused (a replaced worker has none of the old connections).
  void Assign(std::vector<int> live) {
    if (live != live_) ++generation_;
    live_ = std::move(live);
  }
  const std::vector<int>& live() const { return live_; }
  uint64_t generation() const { return generation_; }
  void NewGeneration() { ++generation_; }
  bool empty() const { return live_.empty(); }
  bool IsLive(int worker) const { return Contains(live_, worker); }
  // The workers `config` names; every live one when it names none.
  std::vector<int> Of(const Config& config) const;
  // `c`'s worker for its whole tensors: the one it has while that is live,
  // else the next live one in turn. REQUIRES: !empty().
  // The dispatcher names the worker with the least load in `hint` (a new
  // client's creations, WorkerRegistry::NextPlacement); a live hint becomes
  // the client's default worker when it has none, else round robin.
  int DefaultFor(Client& c, int hint = -1);

 private:
  std::vector<int> live_;  // live worker indexes, from kMembership
  uint64_t generation_ = 0;
  size_t next_default_ = 0;
};

// values[from..] as worker indexes (a redistribute's target workers): each
// live, none named twice; else InvalidArgument prefixed by `where`.
Result<std::vector<int>> LiveWorkerList(const std::vector<int64_t>& values, size_t from, const Workers& workers,
                                        const std::string& where);

// OK when every worker `config` (registered under `signal`) names is live
// and, given the `shape` of a tensor it places (may be null), its shard axis
// is in range (a mesh layout's Shard dims too); else InvalidArgument
// naming the signal and the field.
Status CheckConfig(const std::string& signal, const Config& config, const Workers& workers, const Shape* shape);


}  // namespace gt::sharding
