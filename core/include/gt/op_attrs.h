// Typed attributes of the ops whose generic Attributes fields mean
// something op-specific.
//
// An Instruction carries one generic `Attributes` record (gt/instruction.h),
// so that the codec, the instruction log and sequence signatures stay
// op-agnostic. For most ops the field names say what they hold (`shape`,
// `axes`, `keepdims`). For control ops, units, signal configs and
// collectives the same fields are reused with other meanings; this header is
// the one place that knows them. Build those instructions with the Make*
// functions and read them with the accessors below; code outside this
// header and its .cc never writes `attrs.seed` for a unit key or `keepdims`
// for "replicated" by hand.
//
// Readers do not validate: an instruction from the network may lack a field,
// in which case the reader returns the documented empty value. Validation of
// a client's input stays with the code that acts on it.
//
// Thread-safety: plain functions on values.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gt/instruction.h"
#include "gt/status.h"

namespace gt {

// ---- plain control ops -----------------------------------------------------

// kFree of `ids` in `client`'s namespace; `seq` names the op on whose behalf
// the free happens (it appears in errors).
Instruction MakeFree(ClientId client, uint64_t seq, std::vector<TensorId> ids);

// kFetch of one tensor.
Instruction MakeFetch(ClientId client, uint64_t seq, TensorId id);

// kSync, the barrier a client waits on; `sync_id` matches the answer.
Instruction MakeSync(ClientId client, uint64_t seq, uint64_t sync_id);
inline uint64_t SyncId(const Instruction& sync) { return sync.attrs.sync_id; }

// kDropClient: every tensor and unit of `client` is forgotten.
Instruction MakeDropClient(ClientId client);

// kMembership: the dispatcher tells its stages which worker indexes are
// alive, and which worker, if any, it has just lost (attrs.axes = {index},
// payload = its name): what lived there is gone.
struct LostWorker {
  int index = -1;
  std::string name;
};
Instruction MakeMembership(const std::vector<int64_t>& live_workers, const std::optional<LostWorker>& lost = {});
// The live worker indexes a kMembership announces, in order.
std::vector<int> MembershipWorkers(const Instruction& membership);
std::optional<LostWorker> MembershipLostWorker(const Instruction& membership);

// A stage's note to the router after a membership that lost a worker: the
// tensors of `client` that had a piece there (a shard or copy, which the
// router knows only by the stage's physical ids), so that the client's loss
// error names them. A kMembership with a client: every stage but the router
// passes it on untouched. Empty `lost`: no note is needed.
Instruction MakeLostTensorsNote(ClientId client, const LostWorker& worker, std::vector<TensorId> lost);
inline bool IsLostTensorsNote(const Instruction& membership) { return membership.client != 0; }

// ---- creation ----------------------------------------------------------------

// kRandn / kRand: the seed of the op's generator; 0 = the backend's generator
// (a seeded creation is reproducible wherever it runs).
inline uint64_t RngSeed(const Instruction& random) { return random.attrs.seed; }
inline void SetRngSeed(Instruction& random, uint64_t seed) { random.attrs.seed = seed; }

// ---- hot paths and units (gt/unit.h) ---------------------------------------

// What a kHotStart / kHotEnd marker says. A sequence id of 0 is a compile
// scope opened by the client (`signal.context(..., compile=True)`); other ids
// are assigned by the hotpath stage to a detected hot sequence.
struct HotMarker {
  uint64_t sequence_id = 0;
  std::optional<int64_t> length;  // instructions in the sequence, when known
  // A compile scope its client asked to have compiled (GT_COMPILE=1): where
  // no compile stage carries it out, the router refuses it naming the
  // missing stage. Without it a scope is a hint, compiled where a compile
  // stage runs and eager elsewhere.
  bool required = false;
};
// REQUIRES: op is kHotStart or kHotEnd.
Instruction MakeHotMarker(Op op, const HotMarker& marker);
HotMarker ReadHotMarker(const Instruction& marker);
// True for a marker that names a hot sequence (not a client's compile scope).
inline bool MarksHotSequence(const Instruction& marker) { return marker.attrs.seed != 0; }

// The key a kDefineUnit stores its template under and a kRunUnit runs.
inline uint64_t UnitKey(const Instruction& define_or_run) { return define_or_run.attrs.seed; }
inline void SetUnitKey(Instruction& define_or_run, uint64_t key) { define_or_run.attrs.seed = key; }

// kDefineUnit: `template_bytes` = EncodeUnit(template) under `key`.
Instruction MakeDefineUnit(ClientId client, uint64_t seq, uint64_t key, BlobPtr template_bytes);
// kRunUnit of unit `key` on `inputs`, giving `outputs` (UnitInterface order);
// `freed` are indexes into `inputs` of the tensors the run consumes.
Instruction MakeRunUnit(ClientId client, uint64_t seq, uint64_t key, std::vector<TensorId> inputs,
                        std::vector<TensorId> outputs, std::vector<int64_t> freed);
// The indexes into operands of what a kRunUnit consumes (unchecked: see
// ConsumedOperands in gt/unit.h for the ids).
inline std::span<const int64_t> FreedOperandIndexes(const Instruction& run) { return run.attrs.axes; }

// ---- signal configs (kConfigure) ---------------------------------------------

// A client's signal config as it travels to the dispatcher's stages.
struct ConfigureSpec {
  std::string signal;
  bool forget = false;                 // drop the signal's config; the fields below are unused
  std::optional<int64_t> shard_axis;   // none: not sharded
  std::vector<int64_t> workers;        // worker indexes; empty: every live worker
  bool replicated = false;
  bool compile = false;                // `compile: true`, a compile boundary
  std::string backward;                // the backward signal's name; empty: none
  // On a 2-D mesh: {rows, columns, kind_0, dim_0, kind_1, dim_1} (kind 1
  // Shard(dim), 2 Replicate()), `workers` the mesh's, row-major; empty: none.
  std::vector<int64_t> mesh;
};
Instruction MakeConfigure(uint64_t seq, const ConfigureSpec& spec);
ConfigureSpec ReadConfigure(const Instruction& configure);

// ---- collectives (kBroadcast, kAllReduce, kAllGather) -----------------------

// How a kAllReduce combines its members' tensors.
enum class ReduceOp : uint8_t { kSum = 0, kMax = 1, kMin = 2 };

// One member's part of a collective. Every member of a group gets one
// instruction (sent to its own worker) with the same group and rendezvous
// and its own rank; members run a group's collectives in the same order.
struct CollectiveSpec {
  std::vector<int64_t> group;  // worker indexes in rank order
  int64_t rank = 0;            // this member's position in `group`
  std::string rendezvous;      // "host:port" of the store the members meet at
  // Prefixes every key the group uses in the store: random per rendezvous and
  // told only to the workers (in their collectives), so a peer that reaches
  // the unauthenticated store cannot guess a group's keys to join or disturb
  // it. Empty in tests that host no store.
  std::string store_key;
  // The worker membership the group belongs to. A group of the same workers
  // in a later generation is a new group: a worker that died and was
  // replaced under its index must not meet the survivors' old connections.
  uint64_t generation = 0;
  // kBroadcast: the member that has the tensor.
  int64_t root = 0;
  // kAllReduce.
  ReduceOp reduce = ReduceOp::kSum;
  // kAllGather: the dim the pieces are joined along and every member's
  // piece size along it (the pieces may differ in that dim only).
  int64_t dim = 0;
  std::vector<int64_t> sizes;
};
// The rendezvous store key that says worker index `worker` was lost; its
// value is the membership generation that ended with the loss, in decimal.
// Members still forming a group of that generation or an earlier one with
// it give up instead of waiting out their timeout (the dispatcher's sharding
// stage sets it; the workers' backends look for it while they wait). A
// replacement under that index belongs to later generations.
std::string LostMemberKey(const std::string& store_key, int64_t worker);
// Sets spec.rendezvous and spec.store_key from a rendezvous's full address,
// "host:port" or "host:port/STORE_KEY" (the sharding stage's Rendezvous).
void SetRendezvous(CollectiveSpec& spec, const std::string& address);
// An instruction of `op` carrying `spec`; the caller adds operands, results,
// shape and dtype. REQUIRES: op is a collective.
Instruction MakeCollective(Op op, const CollectiveSpec& spec);
// InvalidArgument naming what is missing when the instruction lacks a group,
// a rank in it, the rendezvous address or its op's own fields. On the wire
// the payload is "host:port[/store_key]#generation".
Result<CollectiveSpec> ReadCollective(const Instruction& collective);

// ---- inspect (kInspect) -----------------------------------------------------------

// What a kInspect asks the dispatcher's sharding stage (wire numbers).
enum class InspectMode : uint8_t {
  kLayout = 1,          // operands {x}: x's layout (gt/layout.h EncodeAnswer)
  kStartRecording = 2,  // no operand, no answer: the client's collectives recorded from here on
  kStopRecording = 3,   // no operand: the recording (gt/layout.h EncodeRecording), then stop
};
// kInspect asking `mode`; `operands` is {x} for kLayout, else empty.
Instruction MakeInspect(InspectMode mode, std::vector<TensorId> operands = {});
// The mode `inspect` asks, or InvalidArgument naming the unknown request.
Result<InspectMode> ReadInspect(const Instruction& inspect);
// The answer the stage that answers `inspect` sets (int64 values); the
// dispatcher's router sends it to the client as a fetch's DATA of an int64
// vector under the inspect's seq, with no worker involved.
void SetInspectAnswer(Instruction& inspect, const std::vector<int64_t>& values);
// The answer set, or null: no stage answered (the host runs no sharding stage).
inline const BlobPtr& InspectAnswer(const Instruction& inspect) { return inspect.payload; }

// ---- binary ops with a scalar ---------------------------------------------------

// `a <op> scalar` (kRight) or `scalar <op> a` (kLeft) on one operand.
Instruction MakeScalarBinary(Op op, double scalar, ScalarSide side);

// ---- cross_entropy (and its backward) --------------------------------------------

// The ignore_index that `attrs.scalar` holds, or nullopt when it is none: not
// an integer (fractional, NaN, infinite, beyond 2^53 where doubles skip
// integers) or sent as a scalar operand. Shape inference and the kernel both
// read it through here.
std::optional<int64_t> IgnoreIndex(const Instruction& inst);

}  // namespace gt
