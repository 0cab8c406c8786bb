#include "collectives.h"

#define USE_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <prometheus/counter.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <optional>
#include <stdexcept>
#include <thread>
#include <string>
#include <vector>

#include "gt/instruction_errors.h"
#include "gt/endpoint.h"
#include "rendezvous_store.h"

namespace gt::torch_backend {

namespace {

size_t KindIndex(Op op) {
  return op == Op::kBroadcast ? 0 : op == Op::kAllReduce ? 1 : op == Op::kAllGather ? 2 : 3;
}

// What the members of one group see of the rendezvous store: the group's own
// keys, waited for in short slices between which it looks for the
// dispatcher's word that a member was lost (LostMemberKey), so that forming
// a group with a dead worker fails at once instead of holding this worker,
// and every client on it, for the whole timeout. This worker itself is one
// of the members looked for: one that was stopped (SIGSTOP) past its
// heartbeat timeout and then resumed finds there that the others gave up.
class GroupStore final : public c10d::Store {
 public:
  struct Member {
    int64_t worker;
    std::string lost_key;
  };
  GroupStore(c10::intrusive_ptr<c10d::Store> base, c10::intrusive_ptr<c10d::Store> group, std::vector<Member> members,
             uint64_t generation, std::chrono::milliseconds timeout)
      : c10d::Store(timeout),
        base_(std::move(base)),
        group_(std::move(group)),
        members_(std::move(members)),
        generation_(generation) {}

  void set(const std::string& key, const std::vector<uint8_t>& value) override { group_->set(key, value); }
  std::vector<uint8_t> get(const std::string& key) override {
    WaitFor({key}, timeout_);
    return group_->get(key);
  }
  int64_t add(const std::string& key, int64_t value) override { return group_->add(key, value); }
  bool deleteKey(const std::string& key) override { return group_->deleteKey(key); }
  bool check(const std::vector<std::string>& keys) override { return group_->check(keys); }
  int64_t getNumKeys() override { return group_->getNumKeys(); }
  void wait(const std::vector<std::string>& keys) override { WaitFor(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    WaitFor(keys, timeout);
  }

  // A member (this worker included) the dispatcher marked lost in this
  // group's generation or a later one, if any: a round trip to the store
  // per member.
  std::optional<int64_t> LostMember() {
    for (const Member& m : members_) {
      if (!base_->check({m.lost_key})) continue;
      const std::vector<uint8_t> value = base_->get(m.lost_key);
      const uint64_t lost_in = std::strtoull(std::string(value.begin(), value.end()).c_str(), nullptr, 10);
      if (lost_in >= generation_) return m.worker;
    }
    return std::nullopt;
  }

 private:
  // The group's keys are looked for every 10 ms, the lost marks every
  // 100 ms: each look is a round trip to the dispatcher's store.
  void WaitFor(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (int slice = 0;; ++slice) {
      if (group_->check(keys)) return;
      if (slice % 10 == 0)
        if (std::optional<int64_t> lost = LostMember())
          throw std::runtime_error("worker index " + std::to_string(*lost) + " was lost while the group formed");
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("the other members did not come within " + std::to_string(timeout.count()) + " ms");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }


  c10::intrusive_ptr<c10d::Store> base_;
  c10::intrusive_ptr<c10d::Store> group_;
  std::vector<Member> members_;
  uint64_t generation_;
};

}  // namespace

struct Collectives::Group {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;  // null once broken
  c10::intrusive_ptr<GroupStore> store;
  int rank = 0;
  int size = 0;
  std::string name;  // "[0, 1] at host:port", for errors
  std::string rendezvous;
  uint64_t generation = 0;
  std::string broken;  // why the group runs no more collectives; empty while it does
};

Collectives::Collectives(CollectiveOptions options, CollectiveCounters counters)
    : options_(std::move(options)), counters_(counters) {}
Collectives::~Collectives() = default;

// REQUIRES: `spec` read from `inst` (ReadCollective checked the group, the
// rank and the rendezvous address).
Result<Collectives::Group*> Collectives::GroupOf(const Instruction& inst, const CollectiveSpec& spec) {
  const std::string& rendezvous = spec.rendezvous;
  std::string members;
  for (int64_t w : spec.group) members += (members.empty() ? "" : ",") + std::to_string(w);
  const int size = static_cast<int>(spec.group.size());
  const int rank = static_cast<int>(spec.rank);
  const std::string generation = std::to_string(spec.generation);
  const std::string key = rendezvous + "/" + spec.store_key + "#" + generation + "/" + members;
  if (auto it = groups_.find(key); it != groups_.end()) {
    if (it->second->rank != rank) return Invalid(inst, "rank changed within group [" + members + "]");
    if (!it->second->broken.empty())
      return Unavailable(inst.Describe() + ": collective group " + it->second->name + " " + it->second->broken);
    return it->second.get();
  }
  ForgetOlderGenerations(rendezvous, spec.generation);
  const HostPort at = SplitHostPort(rendezvous).value_or(HostPort{});  // checked by ReadCollective
  std::string store_host = at.host;
  if (store_host == "0.0.0.0" || store_host == "*") store_host = options_.dispatcher_host;
  // The dispatcher's store answers only requests with its key (issue 39).
  auto store = c10::make_intrusive<RendezvousStore>(
      store_host, static_cast<uint16_t>(ParsePortNumber(at.port).value_or(0)), spec.store_key, options_.timeout);
  auto group = std::make_unique<Group>();
  auto prefixed =
      c10::make_intrusive<c10d::PrefixStore>("gt/" + spec.store_key + "/group/" + generation + "/" + members, store);
  std::vector<GroupStore::Member> watched;  // every member, this worker too
  for (int64_t w : spec.group) watched.push_back({w, LostMemberKey(spec.store_key, w)});
  auto group_store =
      c10::make_intrusive<GroupStore>(store, prefixed, std::move(watched), spec.generation, options_.timeout);
  group->store = group_store;
  auto pg_options = c10d::ProcessGroupGloo::Options::create(options_.timeout);
  pg_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(options_.host));
  try {
    group->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(group_store, rank, size, pg_options);
  } catch (const std::exception& e) {
    return Unavailable(inst.Describe() + ": cannot form collective group [" + members + "] at " + rendezvous + ": " +
                       e.what());
  }
  group->rank = rank;
  group->size = size;
  group->rendezvous = rendezvous;
  group->generation = spec.generation;
  group->name = "[" + members + "] at " + rendezvous;
  Group* out = group.get();
  groups_.emplace(key, std::move(group));
  return out;
}

// A membership changed since those groups formed (a worker was lost, or
// joined): their links may lead to a dead process, and no collective will
// name them again.
void Collectives::ForgetOlderGenerations(const std::string& rendezvous, uint64_t generation) {
  for (auto it = groups_.begin(); it != groups_.end();) {
    const Group& g = *it->second;
    it = g.rendezvous == rendezvous && g.generation < generation ? groups_.erase(it) : std::next(it);
  }
}

Result<at::Tensor> Collectives::Run(const Instruction& inst, const at::Tensor* operand, at::ScalarType dtype) {
  Result<CollectiveSpec> spec = ReadCollective(inst);
  if (!spec.ok()) return spec.status();
  Result<Group*> group = GroupOf(inst, *spec);
  if (!group.ok()) return group.status();
  Result<at::Tensor> out = Internal("not a collective: " + inst.Describe());
  switch (inst.op) {
    case Op::kBroadcast: out = Broadcast(*spec, **group, operand, inst, dtype); break;
    case Op::kAllReduce:
      if (!operand) return Invalid(inst, "all_reduce needs an operand");
      out = AllReduce(*spec, **group, *operand);
      break;
    case Op::kAllGather:
      if (!operand) return Invalid(inst, "all_gather needs an operand");
      out = AllGather(*spec, **group, *operand, inst);
      break;
    case Op::kReduceScatter:
      if (!operand) return Invalid(inst, "reduce_scatter needs an operand");
      out = ReduceScatter(*spec, **group, *operand, inst);
      break;
    default: return out;
  }
  if (out.ok()) {
    const size_t k = KindIndex(inst.op);
    if (counters_.calls[k]) counters_.calls[k]->Increment();
    const double bytes = operand ? static_cast<double>(operand->nbytes()) : 0.0;
    if (counters_.bytes[k]) counters_.bytes[k]->Increment(bytes);
  }
  return out;
}

Status Collectives::StandIn(const Instruction& inst, at::ScalarType dtype, const Status& why) {
  const Status failed(why.code(), why.message() + " (" + std::string(OpName(inst.op)) +
                                      ": this member took part with a stand-in so the others do not wait)");
  const Shape& shape = inst.attrs.shape;
  for (int64_t d : shape)
    if (d < 0) return failed;
  Result<CollectiveSpec> spec = ReadCollective(inst);
  const bool all_gather_shape_ok =
      spec.ok() && ((inst.op != Op::kAllGather && inst.op != Op::kReduceScatter) ||
                    (spec->dim >= 0 && spec->dim < static_cast<int64_t>(shape.size())));
  if (!all_gather_shape_ok) return failed;  // nothing sensible to stand in with: the others time out
  const at::TensorOptions options = at::TensorOptions().dtype(dtype);
  const at::Tensor stand_in = at::isFloatingType(dtype) ? at::full(shape, NAN, options) : at::zeros(shape, options);
  Result<at::Tensor> ignored = Run(inst, &stand_in, dtype);
  (void)ignored;  // what matters is that the others got their share
  return failed;
}

// Waits for `work` in slices, between which it looks for the dispatcher's
// word that a member was lost. A survivor whose peer gave up when a member
// died waits for that peer's share forever (Gloo has no abort): it must hear
// of the loss from the dispatcher instead, and not hold every client on this
// worker for the collective timeout.
Status Collectives::Await(Group& group, const c10::intrusive_ptr<c10d::Work>& work) {
  constexpr std::chrono::milliseconds kLostCheckInterval{100};
  for (;;) {
    try {
      work->wait(kLostCheckInterval);
      return Status::Ok();
    } catch (...) {
      // Completed between the timed wait's timeout and here: the timeout is
      // stale, the collective's own outcome counts. A collective that failed
      // (a closed connection, ...) rethrows its error.
      if (work->isCompleted()) {
        if (std::exception_ptr failure = work->exception()) std::rethrow_exception(failure);
        return Status::Ok();
      }
    }
    std::optional<int64_t> lost = group.store->LostMember();
    if (!lost) continue;
    group.broken = "broke: worker index " + std::to_string(*lost) + " was lost during a collective";
    // The process group's thread stays blocked in Gloo until its own
    // timeout, and destroying the group would join it: let it go instead.
    (void)group.pg.release();
    return Unavailable("collective group " + group.name + " " + group.broken);
  }
}

namespace {

// Gloo has no bool: masks travel as bytes (same size: a view, no copy).
at::ScalarType WireType(at::ScalarType t) { return t == at::kBool ? at::kByte : t; }
at::Tensor ToWire(const at::Tensor& t) { return t.scalar_type() == at::kBool ? t.view(at::kByte) : t; }
at::Tensor FromWire(const at::Tensor& t, at::ScalarType type) { return type == at::kBool ? t.view(at::kBool) : t; }

}  // namespace

Result<at::Tensor> Collectives::Broadcast(const CollectiveSpec& spec, Group& group, const at::Tensor* operand,
                                            const Instruction& inst, at::ScalarType dtype) {
  const int root = static_cast<int>(spec.root);  // within the group: ReadCollective checked it
  at::Tensor t;
  if (group.rank == root) {
    if (!operand) return Invalid(inst, "the root of a broadcast needs an operand");
    t = ToWire(operand->clone().contiguous());
  } else {
    t = at::empty(inst.attrs.shape, at::TensorOptions().dtype(WireType(dtype)));
  }
  if (t.numel() == 0) return FromWire(t, dtype);  // Gloo divides by the element count; every member skips alike
  std::vector<at::Tensor> tensors = {t};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  if (Status s = Await(group, group.pg->broadcast(tensors, options)); !s.ok()) return s;
  return FromWire(t, dtype);
}

Result<at::Tensor> Collectives::AllReduce(const CollectiveSpec& spec, Group& group, const at::Tensor& operand) {
  if (operand.numel() == 0) return operand.clone();  // every member's is empty alike: nothing to sum
  const bool mask = operand.scalar_type() == at::kBool;
  at::Tensor t = ToWire(operand.clone().contiguous());
  std::vector<at::Tensor> tensors = {t};
  c10d::AllreduceOptions options;
  // A bool sum is a logical or (as PyTorch's bool add): the max of the bytes, which cannot overflow.
  options.reduceOp = spec.reduce == ReduceOp::kMax || (mask && spec.reduce == ReduceOp::kSum) ? c10d::ReduceOp::MAX
                     : spec.reduce == ReduceOp::kMin                                            ? c10d::ReduceOp::MIN
                                                                                                : c10d::ReduceOp::SUM;
  if (Status s = Await(group, group.pg->allreduce(tensors, options)); !s.ok()) return s;
  return FromWire(t, operand.scalar_type());
}

Result<at::Tensor> Collectives::AllGather(const CollectiveSpec& spec, Group& group, const at::Tensor& operand,
                                            const Instruction& inst) {
  const std::vector<int64_t>& sizes = spec.sizes;  // one per member: ReadCollective checked it
  const int64_t dim = spec.dim;
  if (dim < 0 || dim >= operand.dim()) return Invalid(inst, "dim " + std::to_string(dim) + " out of range");
  int64_t widest = 0;
  for (int r = 0; r < group.size; ++r) widest = std::max(widest, sizes[r]);
  if (operand.size(dim) != sizes[group.rank]) return Invalid(inst, "local piece size differs from the announced one");
  // Gloo gathers equal pieces: pad every piece to the widest along `dim`.
  std::vector<int64_t> padded_shape(operand.sizes().begin(), operand.sizes().end());
  padded_shape[dim] = widest;
  if (c10::multiply_integers(padded_shape) == 0) {
    // Every piece is empty (Gloo's all-gather of zero elements divides by
    // zero and kills the process): the result is empty too, on every member alike.
    std::vector<int64_t> gathered = padded_shape;
    gathered[dim] = 0;
    for (int r = 0; r < group.size; ++r) gathered[dim] += sizes[r];
    return at::empty(gathered, operand.options());
  }
  const at::TensorOptions wire = operand.options().dtype(WireType(operand.scalar_type()));
  at::Tensor local = at::zeros(padded_shape, wire);
  local.narrow(dim, 0, operand.size(dim)).copy_(ToWire(operand));
  std::vector<at::Tensor> pieces;
  for (int r = 0; r < group.size; ++r) pieces.push_back(at::empty(padded_shape, wire));
  std::vector<std::vector<at::Tensor>> outputs = {pieces};
  std::vector<at::Tensor> inputs = {local};
  if (Status s = Await(group, group.pg->allgather(outputs, inputs)); !s.ok()) return s;
  std::vector<at::Tensor> trimmed;
  for (int r = 0; r < group.size; ++r) trimmed.push_back(outputs[0][r].narrow(dim, 0, sizes[r]));
  return FromWire(at::cat(trimmed, dim), operand.scalar_type());
}

Result<at::Tensor> Collectives::ReduceScatter(const CollectiveSpec& spec, Group& group, const at::Tensor& operand,
                                                const Instruction& inst) {
  const std::vector<int64_t>& sizes = spec.sizes;  // one per member: ReadCollective checked it
  const int64_t dim = spec.dim;
  if (dim < 0 || dim >= operand.dim()) return Invalid(inst, "dim " + std::to_string(dim) + " out of range");
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0) return Invalid(inst, "negative piece size");
    total += size;
  }
  if (operand.size(dim) != total) return Invalid(inst, "the piece sizes do not add up to the operand's dim");
  if (operand.scalar_type() == at::kBool) return Invalid(inst, "reduce_scatter of a bool tensor");
  // Rows along `dim` first, so that the pieces are runs of rows all-to-all can split.
  if (operand.numel() == 0) {  // as for all-gather: the piece kept is empty on every member
    std::vector<int64_t> piece(operand.sizes().begin(), operand.sizes().end());
    piece[dim] = sizes[static_cast<size_t>(group.rank)];
    return at::zeros(piece, operand.options());
  }
  at::Tensor rows = ToWire(operand.movedim(dim, 0).contiguous());
  std::vector<int64_t> received_shape(rows.sizes().begin(), rows.sizes().end());
  received_shape[0] = sizes[static_cast<size_t>(group.rank)] * group.size;
  at::Tensor received = at::empty(received_shape, rows.options());
  std::vector<int64_t> send_splits(sizes.begin(), sizes.end());
  std::vector<int64_t> receive_splits(static_cast<size_t>(group.size), sizes[static_cast<size_t>(group.rank)]);
  c10d::AllToAllOptions options;
  if (Status s = Await(group, group.pg->alltoall_base(received, rows, receive_splits, send_splits, options)); !s.ok())
    return s;
  std::vector<int64_t> stacked = received_shape;
  stacked[0] = sizes[static_cast<size_t>(group.rank)];
  stacked.insert(stacked.begin(), group.size);
  at::Tensor piece = received.reshape(stacked).sum(0, false, rows.scalar_type()).movedim(0, dim).contiguous();
  return FromWire(piece, operand.scalar_type());
}

}  // namespace gt::torch_backend
