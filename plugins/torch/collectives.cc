#include "collectives.h"

#define USE_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <prometheus/counter.h>

#include <cmath>
#include <string>
#include <vector>

namespace gt::torch_backend {

struct Collectives::Group {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  int rank = 0;
  int size = 0;
  std::string name;  // "[0, 1] at host:port", for errors
};

namespace {

Status Invalid(const Instruction& inst, const std::string& why) { return InvalidArgument(inst.Describe() + ": " + why); }

size_t KindIndex(Op op) { return op == Op::kBroadcast ? 0 : op == Op::kAllReduce ? 1 : 2; }

}  // namespace

Collectives::Collectives(CollectiveOptions options, CollectiveCounters counters)
    : options_(std::move(options)), counters_(counters) {}
Collectives::~Collectives() = default;

Result<Collectives::Group*> Collectives::GroupOf(const Instruction& inst) {
  if (!inst.payload || inst.payload->size() == 0) return Invalid(inst, "no rendezvous address");
  const std::string rendezvous(reinterpret_cast<const char*>(inst.payload->data()), inst.payload->size());
  const size_t colon = rendezvous.rfind(':');
  if (colon == std::string::npos) return Invalid(inst, "rendezvous '" + rendezvous + "' is not host:port");
  if (inst.attrs.numbers.empty() || inst.attrs.axes.empty()) return Invalid(inst, "no group (numbers) or rank (axes[0])");
  std::string members;
  for (double w : inst.attrs.numbers) members += (members.empty() ? "" : ",") + std::to_string(static_cast<int64_t>(w));
  const int size = static_cast<int>(inst.attrs.numbers.size());
  const int rank = static_cast<int>(inst.attrs.axes[0]);
  if (rank < 0 || rank >= size) return Invalid(inst, "rank " + std::to_string(rank) + " outside a group of " + std::to_string(size));
  const std::string key = rendezvous + "/" + members;
  if (auto it = groups_.find(key); it != groups_.end()) {
    if (it->second->rank != rank) return Invalid(inst, "rank changed within group [" + members + "]");
    return it->second.get();
  }
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(std::stoi(rendezvous.substr(colon + 1)));
  store_options.isServer = false;
  store_options.waitWorkers = false;
  store_options.timeout = options_.timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(rendezvous.substr(0, colon), store_options);
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("gt/group/" + members, store);
  auto pg_options = c10d::ProcessGroupGloo::Options::create(options_.timeout);
  pg_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(options_.host));
  auto group = std::make_unique<Group>();
  group->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, size, pg_options);
  group->rank = rank;
  group->size = size;
  group->name = "[" + members + "] at " + rendezvous;
  Group* out = group.get();
  groups_.emplace(key, std::move(group));
  return out;
}

Result<at::Tensor> Collectives::Run(const Instruction& inst, const at::Tensor* operand, at::ScalarType dtype) {
  Result<Group*> group = GroupOf(inst);
  if (!group.ok()) return group.status();
  Result<at::Tensor> out = Internal("not a collective: " + inst.Describe());
  switch (inst.op) {
    case Op::kBroadcast: out = Broadcast(inst, **group, operand, dtype); break;
    case Op::kAllReduce:
      if (!operand) return Invalid(inst, "all_reduce needs an operand");
      out = AllReduce(inst, **group, *operand);
      break;
    case Op::kAllGather:
      if (!operand) return Invalid(inst, "all_gather needs an operand");
      out = AllGather(inst, **group, *operand);
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
  const bool all_gather_shape_ok = inst.op != Op::kAllGather ||
                                   (inst.attrs.axes.size() >= 2 && inst.attrs.axes[1] >= 0 &&
                                    inst.attrs.axes[1] < static_cast<int64_t>(shape.size()));
  if (!all_gather_shape_ok) return failed;  // nothing sensible to stand in with: the others time out
  const at::TensorOptions options = at::TensorOptions().dtype(dtype);
  const at::Tensor stand_in = at::isFloatingType(dtype) ? at::full(shape, NAN, options) : at::zeros(shape, options);
  Result<at::Tensor> ignored = Run(inst, &stand_in, dtype);
  (void)ignored;  // what matters is that the others got their share
  return failed;
}

Result<at::Tensor> Collectives::Broadcast(const Instruction& inst, Group& group, const at::Tensor* operand,
                                            at::ScalarType dtype) {
  if (inst.attrs.axes.size() != 2) return Invalid(inst, "broadcast expects axes {rank, root}");
  const int root = static_cast<int>(inst.attrs.axes[1]);
  if (root < 0 || root >= group.size) return Invalid(inst, "root rank " + std::to_string(root) + " outside the group");
  at::Tensor t;
  if (group.rank == root) {
    if (!operand) return Invalid(inst, "the root of a broadcast needs an operand");
    t = operand->clone().contiguous();
  } else {
    t = at::empty(inst.attrs.shape, at::TensorOptions().dtype(dtype));
  }
  std::vector<at::Tensor> tensors = {t};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  group.pg->broadcast(tensors, options)->wait();
  return t;
}

Result<at::Tensor> Collectives::AllReduce(const Instruction& inst, Group& group, const at::Tensor& operand) {
  at::Tensor t = operand.clone().contiguous();
  std::vector<at::Tensor> tensors = {t};
  c10d::AllreduceOptions options;
  const int op = static_cast<int>(inst.attrs.scalar);
  options.reduceOp = op == 1 ? c10d::ReduceOp::MAX : op == 2 ? c10d::ReduceOp::MIN : c10d::ReduceOp::SUM;
  group.pg->allreduce(tensors, options)->wait();
  return t;
}

Result<at::Tensor> Collectives::AllGather(const Instruction& inst, Group& group, const at::Tensor& operand) {
  const std::vector<int64_t>& axes = inst.attrs.axes;
  if (axes.size() != 2 + static_cast<size_t>(group.size)) return Invalid(inst, "all_gather expects axes {rank, dim, sizes...}");
  const int64_t dim = axes[1];
  if (dim < 0 || dim >= operand.dim()) return Invalid(inst, "dim " + std::to_string(dim) + " out of range");
  int64_t widest = 0;
  for (int r = 0; r < group.size; ++r) widest = std::max(widest, axes[2 + r]);
  if (operand.size(dim) != axes[2 + group.rank]) return Invalid(inst, "local piece size differs from the announced one");
  // Gloo gathers equal pieces: pad every piece to the widest along `dim`.
  std::vector<int64_t> padded_shape(operand.sizes().begin(), operand.sizes().end());
  padded_shape[dim] = widest;
  at::Tensor local = at::zeros(padded_shape, operand.options());
  local.narrow(dim, 0, operand.size(dim)).copy_(operand);
  std::vector<at::Tensor> pieces;
  for (int r = 0; r < group.size; ++r) pieces.push_back(at::empty(padded_shape, operand.options()));
  std::vector<std::vector<at::Tensor>> outputs = {pieces};
  std::vector<at::Tensor> inputs = {local};
  group.pg->allgather(outputs, inputs)->wait();
  std::vector<at::Tensor> trimmed;
  for (int r = 0; r < group.size; ++r) trimmed.push_back(outputs[0][r].narrow(dim, 0, axes[2 + r]));
  return at::cat(trimmed, dim);
}

}  // namespace gt::torch_backend
