// Where each op-specific attribute lives in the generic Attributes record
// (the layout documented in gt/op.h). Nothing else writes these fields.
#include "gt/op_attrs.h"

#include <cassert>
#include <cmath>
#include <cstdint>

#include "gt/endpoint.h"
#include "gt/instruction_errors.h"

namespace gt {
namespace {

Instruction Control(Op op, ClientId client, uint64_t seq) {
  Instruction inst;
  inst.op = op;
  inst.client = client;
  inst.seq = seq;
  return inst;
}

std::string BlobText(const BlobPtr& blob) {
  if (!blob) return {};
  return std::string(reinterpret_cast<const char*>(blob->data()), blob->size());
}

BlobPtr TextBlob(const std::string& text) { return CopyToBlob(text.data(), text.size()); }

}  // namespace

Instruction MakeFree(ClientId client, uint64_t seq, std::vector<TensorId> ids) {
  Instruction inst = Control(Op::kFree, client, seq);
  inst.operands = std::move(ids);
  return inst;
}

Instruction MakeFetch(ClientId client, uint64_t seq, TensorId id) {
  Instruction inst = Control(Op::kFetch, client, seq);
  inst.operands = {id};
  return inst;
}

Instruction MakeSync(ClientId client, uint64_t seq, uint64_t sync_id) {
  Instruction inst = Control(Op::kSync, client, seq);
  inst.attrs.sync_id = sync_id;
  return inst;
}

Instruction MakeDropClient(ClientId client) { return Control(Op::kDropClient, client, 0); }

Instruction MakeMembership(const std::vector<int64_t>& live_workers, const std::optional<LostWorker>& lost) {
  Instruction inst = Control(Op::kMembership, 0, 0);
  inst.attrs.shape = live_workers;
  if (lost) {
    inst.attrs.axes = {lost->index};
    inst.payload = TextBlob(lost->name);
  }
  return inst;
}

std::optional<LostWorker> MembershipLostWorker(const Instruction& membership) {
  if (membership.attrs.axes.empty()) return std::nullopt;
  return LostWorker{static_cast<int>(membership.attrs.axes[0]), BlobText(membership.payload)};
}

Instruction MakeLostTensorsNote(ClientId client, const LostWorker& worker, std::vector<TensorId> lost) {
  Instruction inst = MakeMembership({}, worker);
  inst.client = client;
  inst.operands = std::move(lost);
  return inst;
}

std::vector<int> MembershipWorkers(const Instruction& membership) {
  return std::vector<int>(membership.attrs.shape.begin(), membership.attrs.shape.end());
}

std::string LostMemberKey(const std::string& store_key, int64_t worker) {
  return "gt/" + store_key + "/lost/" + std::to_string(worker);
}

void SetRendezvous(CollectiveSpec& spec, const std::string& address) {
  const size_t slash = address.find('/');
  spec.rendezvous = address.substr(0, slash);
  spec.store_key = slash == std::string::npos ? std::string() : address.substr(slash + 1);
}

Instruction MakeHotMarker(Op op, const HotMarker& marker) {
  assert(op == Op::kHotStart || op == Op::kHotEnd);
  Instruction inst = Control(op, 0, 0);
  inst.attrs.seed = marker.sequence_id;
  if (marker.length) inst.attrs.axes = {*marker.length};
  inst.attrs.keepdims = marker.required;
  return inst;
}

HotMarker ReadHotMarker(const Instruction& marker) {
  HotMarker out;
  out.sequence_id = marker.attrs.seed;
  if (!marker.attrs.axes.empty()) out.length = marker.attrs.axes[0];
  out.required = marker.attrs.keepdims;
  return out;
}

Instruction MakeDefineUnit(ClientId client, uint64_t seq, uint64_t key, BlobPtr template_bytes) {
  Instruction inst = Control(Op::kDefineUnit, client, seq);
  SetUnitKey(inst, key);
  inst.payload = std::move(template_bytes);
  return inst;
}

Instruction MakeRunUnit(ClientId client, uint64_t seq, uint64_t key, std::vector<TensorId> inputs,
                        std::vector<TensorId> outputs, std::vector<int64_t> freed) {
  Instruction inst = Control(Op::kRunUnit, client, seq);
  SetUnitKey(inst, key);
  inst.operands = std::move(inputs);
  inst.results = std::move(outputs);
  inst.attrs.axes = std::move(freed);
  return inst;
}

// kConfigure: signal = the name; axes = {shard axis}; shape = workers;
// keepdims = replicated; seed = compile; payload = backward; scalar 1 = forget.
Instruction MakeConfigure(uint64_t seq, const ConfigureSpec& spec) {
  Instruction inst = Control(Op::kConfigure, 0, seq);
  inst.signal = spec.signal;
  if (spec.forget) {
    inst.attrs.scalar = 1;
    return inst;
  }
  if (spec.shard_axis) inst.attrs.axes = {*spec.shard_axis};
  inst.attrs.shape = spec.workers;
  inst.attrs.keepdims = spec.replicated;
  inst.attrs.seed = spec.compile ? 1 : 0;
  if (!spec.backward.empty()) inst.payload = TextBlob(spec.backward);
  inst.attrs.numbers.assign(spec.mesh.begin(), spec.mesh.end());
  return inst;
}

ConfigureSpec ReadConfigure(const Instruction& configure) {
  ConfigureSpec spec;
  spec.signal = configure.signal;
  spec.forget = configure.attrs.scalar == 1;
  if (spec.forget) return spec;
  if (!configure.attrs.axes.empty()) spec.shard_axis = configure.attrs.axes[0];
  spec.workers = configure.attrs.shape;
  spec.replicated = configure.attrs.keepdims;
  spec.compile = configure.attrs.seed != 0;
  spec.backward = BlobText(configure.payload);
  for (double v : configure.attrs.numbers)  // out of range: a value the stage refuses
    spec.mesh.push_back(std::isfinite(v) && std::abs(v) < 1e15 ? static_cast<int64_t>(v) : -1);
  return spec;
}

// Collectives: numbers = group; axes = {rank, ...op's own}; payload =
// rendezvous; kAllReduce: scalar = ReduceOp.
Instruction MakeCollective(Op op, const CollectiveSpec& spec) {
  assert(KindOf(op) == OpKind::kCollective);
  Instruction inst;
  inst.op = op;
  inst.attrs.numbers.assign(spec.group.begin(), spec.group.end());
  inst.attrs.axes = {spec.rank};
  const std::string key = spec.store_key.empty() ? std::string() : "/" + spec.store_key;
  inst.payload = TextBlob(spec.rendezvous + key + "#" + std::to_string(spec.generation));
  switch (op) {
    case Op::kBroadcast: inst.attrs.axes.push_back(spec.root); break;
    case Op::kAllReduce: inst.attrs.scalar = static_cast<double>(spec.reduce); break;
    case Op::kAllGather:
    case Op::kReduceScatter:
      inst.attrs.axes.push_back(spec.dim);
      inst.attrs.axes.insert(inst.attrs.axes.end(), spec.sizes.begin(), spec.sizes.end());
      break;
    default: break;  // not a collective: asserted above
  }
  return inst;
}

Result<CollectiveSpec> ReadCollective(const Instruction& inst) {
  CollectiveSpec spec;
  std::string payload = BlobText(inst.payload);
  const size_t hash = payload.rfind('#');
  if (hash == std::string::npos) return Invalid(inst, "rendezvous '" + payload + "' has no #generation");
  const std::string generation = payload.substr(hash + 1);
  payload.resize(hash);
  SetRendezvous(spec, payload);
  if (generation.empty() || generation.size() > 19 ||
      generation.find_first_not_of("0123456789") != std::string::npos)
    return Invalid(inst, "rendezvous generation '" + generation + "' is not a number");
  spec.generation = std::stoull(generation);
  if (spec.rendezvous.empty()) return Invalid(inst, "no rendezvous address");
  if (std::optional<HostPort> at = SplitHostPort(spec.rendezvous); !at || at->host.empty() || !ParsePortNumber(at->port))
    return Invalid(inst, "rendezvous '" + spec.rendezvous + "' is not host:port");
  const std::vector<int64_t>& axes = inst.attrs.axes;
  if (inst.attrs.numbers.empty() || axes.empty()) return Invalid(inst, "no group (numbers) or rank (axes[0])");
  for (double w : inst.attrs.numbers) {
    // Checked before the cast: a double outside int64 (or NaN) has no value there.
    if (!(w >= 0 && w <= INT32_MAX) || w != static_cast<double>(static_cast<int64_t>(w)))
      return Invalid(inst, "group member " + std::to_string(w) + " is not a worker index");
    spec.group.push_back(static_cast<int64_t>(w));
  }
  const int64_t size = static_cast<int64_t>(spec.group.size());
  spec.rank = axes[0];
  if (spec.rank < 0 || spec.rank >= size)
    return Invalid(inst, "rank " + std::to_string(spec.rank) + " outside a group of " + std::to_string(size));
  switch (inst.op) {
    case Op::kBroadcast:
      if (axes.size() != 2) return Invalid(inst, "broadcast expects axes {rank, root}");
      spec.root = axes[1];
      if (spec.root < 0 || spec.root >= size)
        return Invalid(inst, "root rank " + std::to_string(spec.root) + " outside the group");
      return spec;
    case Op::kAllReduce: {
      const double op = inst.attrs.scalar;  // compared, not cast: NaN or 1e300 reads as a sum
      spec.reduce = op == 1 ? ReduceOp::kMax : op == 2 ? ReduceOp::kMin : ReduceOp::kSum;
      return spec;
    }
    case Op::kAllGather:
    case Op::kReduceScatter:
      if (axes.size() != 2 + spec.group.size())
        return Invalid(inst, std::string(OpName(inst.op)) + " expects axes {rank, dim, sizes...}");
      spec.dim = axes[1];
      spec.sizes.assign(axes.begin() + 2, axes.end());
      return spec;
    default: return Invalid(inst, "not a collective");
  }
}

// ---- inspect ---------------------------------------------------------------------
// attrs.axes = {mode}; payload = the answer's int64 values, once a stage set it.

Instruction MakeInspect(InspectMode mode, std::vector<TensorId> operands) {
  Instruction inst = Control(Op::kInspect, 0, 0);
  inst.attrs.axes = {static_cast<int64_t>(mode)};
  inst.operands = std::move(operands);
  return inst;
}

Result<InspectMode> ReadInspect(const Instruction& inspect) {
  const int64_t mode = inspect.attrs.axes.size() == 1 ? inspect.attrs.axes[0] : 0;
  if (mode < static_cast<int64_t>(InspectMode::kLayout) || mode > static_cast<int64_t>(InspectMode::kStopRecording))
    return Invalid(inspect, "unknown inspect request " + std::to_string(mode) +
                                " (1: layout, 2: start recording, 3: the recording)");
  return static_cast<InspectMode>(mode);
}

void SetInspectAnswer(Instruction& inspect, const std::vector<int64_t>& values) {
  inspect.payload = CopyToBlob(values.data(), values.size() * sizeof(int64_t));
}

Instruction MakeScalarBinary(Op op, double scalar, ScalarSide side) {
  Instruction inst;
  inst.op = op;
  inst.attrs.scalar = scalar;
  inst.attrs.scalar_side = side;
  return inst;
}

std::optional<int64_t> IgnoreIndex(const Instruction& inst) {
  constexpr double kExactIntegers = 9007199254740992.0;  // 2^53
  const double index = inst.attrs.scalar;
  if (inst.attrs.scalar_side != ScalarSide::kNone || !std::isfinite(index) || index != std::trunc(index) ||
      std::abs(index) > kExactIntegers)
    return std::nullopt;
  return static_cast<int64_t>(index);
}

}  // namespace gt
