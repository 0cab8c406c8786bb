// The client-side autograd tape: recording ops, and backward() replaying
// them in reverse with ordinary gt ops (workers only compute); the
// formulas each op's gradient follows are in grad_formulas.cc.
#include <algorithm>
#include <cmath>
#include <deque>
#include <mutex>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "grad_formulas.h"
#include "tensor_impl.h"

namespace gt {
namespace {

thread_local bool grad_enabled = true;

constexpr size_t kTapeLimit = 10000;
std::mutex tape_mu;
std::deque<TapeEntry>& Tape() {  // GUARDED_BY(tape_mu)
  static auto* tape = new std::deque<TapeEntry>();
  return *tape;
}
uint64_t next_tape_index = 0;  // GUARDED_BY(tape_mu)

uint64_t AppendToTape(Op op, const std::vector<Tensor>& inputs, const Tensor& out) {
  TapeEntry entry{0, std::string(OpName(op)), out.id(), {}, current_signal(), current_backward_signal()};
  for (const Tensor& t : inputs) entry.inputs.push_back(t.id());
  std::lock_guard<std::mutex> lock(tape_mu);
  entry.index = next_tape_index++;
  Tape().push_back(std::move(entry));
  if (Tape().size() > kTapeLimit) Tape().pop_front();
  return Tape().back().index;
}

}  // namespace

bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool enabled) { grad_enabled = enabled; }

std::vector<TapeEntry> tape() {
  std::lock_guard<std::mutex> lock(tape_mu);
  return {Tape().begin(), Tape().end()};
}

void clear_tape() {
  std::lock_guard<std::mutex> lock(tape_mu);
  Tape().clear();
}

namespace client_internal {
namespace {

// ---- the engine ----------------------------------------------------------------

// PyTorch's rule: a gradient may not use values that an in-place op changed
// after the forward op read (or made) them; the result would be silently wrong.
void CheckUnchanged(const Node& n) {
  const ValuesRead read = ValuesReadBy(n);
  auto fail = [&](const std::string& which, uint64_t then, uint64_t now) {
    throw Error(Code::kFailedPrecondition,
                "backward: " + which + " of " + std::string(OpName(n.op)) + " (tape #" + std::to_string(n.index) +
                    "), which its gradient needs, was changed in place after the op (version " + std::to_string(then) +
                    ", now " + std::to_string(now) + "); change a clone() instead, or call backward() first");
  };
  for (size_t i : read.inputs) {
    const uint64_t now = TensorFactory::Record(n.inputs[i])->Version();
    if (now != n.input_versions[i]) fail("input " + std::to_string(i), n.input_versions[i], now);
  }
  if (read.output) {
    const uint64_t now = TensorFactory::Record(n.output)->Version();
    if (now != n.output_version) fail("the output", n.output_version, now);
  }
}

Tensor Accumulate(const Tensor& existing, const Tensor& more) {
  return existing.defined() ? existing + more : more;
}

// Adds `g` to a leaf's grad. The grad gets the leaf's dtype (as in PyTorch)
// and never shares its remote tensor with another leaf's grad or with the
// caller's gradient argument: `handed_out` holds the data already given away.
void AccumulateIntoLeaf(const Tensor& leaf, Tensor g, std::unordered_set<const TensorRecord*>& handed_out) {
  TensorImpl* impl = TensorFactory::Impl(leaf);
  if (g.dtype() != leaf.dtype()) {
    Tensor cast = zeros(leaf.shape(), leaf.dtype());
    cast.copy_(g);
    g = cast;
  }
  if (impl->grad.defined()) {
    impl->grad = impl->grad + g;
    return;
  }
  if (!handed_out.insert(TensorFactory::Record(g)).second) g = g.clone();
  handed_out.insert(TensorFactory::Record(g));
  impl->grad = g;
}

// Nodes reachable from `root`, each after every node that consumes it. The
// shared pointers keep every node alive while backward releases records.
std::vector<std::shared_ptr<Node>> TopologicalOrder(const std::shared_ptr<Node>& root) {
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> seen;
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack = {{root, 0}};
  seen.insert(root.get());
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      TensorImpl* input = TensorFactory::Impl(node->inputs[next++]);
      std::shared_ptr<Node> parent = input->grad_fn;
      if (parent && seen.insert(parent.get()).second) stack.push_back({std::move(parent), 0});
      continue;
    }
    order.push_back(node);
    stack.pop_back();
  }
  std::reverse(order.begin(), order.end());
  return order;
}

}  // namespace

void RecordForAutograd(Op op, const Attributes& attrs, const std::vector<Tensor>& inputs, Tensor& out) {
  if (!grad_enabled || !Differentiable(op)) return;
  bool any = std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.requires_grad(); });
  if (!any || !IsFloatingPoint(out.dtype())) return;
  auto node = std::make_shared<Node>();
  node->op = op;
  node->attrs = attrs;
  node->inputs = inputs;
  node->output = out.detach();
  for (const Tensor& t : inputs) node->input_versions.push_back(TensorFactory::Record(t)->Version());
  node->output_version = TensorFactory::Record(out)->Version();
  node->index = AppendToTape(op, inputs, out);
  node->signal = current_signal();
  node->backward_signal = current_backward_signal();
  TensorImpl* impl = TensorFactory::Impl(out);
  impl->requires_grad = true;
  impl->grad_fn = std::move(node);
}

namespace {
thread_local int backward_depth = 0;
}  // namespace

bool InBackward() { return backward_depth > 0; }

void RunBackward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  struct Depth {
    Depth() { ++backward_depth; }
    ~Depth() { --backward_depth; }
  } in_backward;
  if (!root.requires_grad())
    throw Error(Code::kFailedPrecondition, "backward: the tensor does not require grad and has no recorded op");
  if (!gradient.defined() && root.numel() != 1)
    throw Error(Code::kInvalidArgument, "backward: gradient can be implicitly created only for a scalar output; "
                                        "this tensor has shape " + ShapeToString(root.shape()) +
                                        ", pass a gradient of that shape");
  if (gradient.defined() && gradient.shape() != root.shape())
    throw Error(Code::kInvalidArgument, "backward: gradient of shape " + ShapeToString(gradient.shape()) +
                                            " for a tensor of shape " + ShapeToString(root.shape()));
  NoGradGuard no_grad;
  Tensor seed = gradient.defined() ? gradient : ones(root.shape(), root.dtype());
  std::unordered_set<const TensorRecord*> handed_out;
  if (gradient.defined()) handed_out.insert(TensorFactory::Record(gradient));  // the caller keeps it
  TensorImpl* root_impl = TensorFactory::Impl(root);
  if (!root_impl->grad_fn) {  // a leaf
    AccumulateIntoLeaf(root, seed, handed_out);
    return;
  }
  std::unordered_map<Node*, Tensor> grads;
  grads[root_impl->grad_fn.get()] = seed;
  const std::vector<std::shared_ptr<Node>> order = TopologicalOrder(root_impl->grad_fn);
  // A backward signal whose config was cleared since the scope opened: said
  // before any gradient is computed.
  for (const std::shared_ptr<Node>& node : order)
    if (!node->backward_signal.empty() && !Session::Get()->GetConfig(node->backward_signal))
      throw Error(Code::kFailedPrecondition, "backward: signal '" + node->signal + "': backward: unknown signal '" +
                                                 node->backward_signal + "' (its config was cleared after " +
                                                 std::string(OpName(node->op)) + " was recorded)");
  for (const std::shared_ptr<Node>& node : order) {
    if (node->released)
      throw Error(Code::kFailedPrecondition, "backward: the record of " + std::string(OpName(node->op)) +
                                                 " was already used by a backward() without retain_graph=true");
    auto it = grads.find(node.get());
    if (it == grads.end()) continue;
    Tensor g = std::move(it->second);
    grads.erase(it);
    // Pipeline parallelism: the gradient ops run where the backward signal's config places them.
    std::optional<SignalScope> scope;
    if (!node->backward_signal.empty()) scope.emplace(node->backward_signal);
    CheckUnchanged(*node);
    const Node* transposed_weight = TransposedWeight(*node);
    std::vector<Tensor> input_grads =
        transposed_weight ? MatmulGrads(*node, g, /*weight_grad=*/true) : InputGrads(*node, g);
    for (size_t i = 0; i < node->inputs.size() && i < input_grads.size(); ++i) {
      const Tensor& input = transposed_weight && i == 1 ? transposed_weight->inputs[0] : node->inputs[i];
      if (!input.requires_grad() || !input_grads[i].defined()) continue;
      TensorImpl* impl = TensorFactory::Impl(input);
      if (impl->grad_fn) {
        grads[impl->grad_fn.get()] = Accumulate(grads[impl->grad_fn.get()], input_grads[i]);
      } else {
        AccumulateIntoLeaf(input, input_grads[i], handed_out);
      }
    }
    if (!retain_graph) {  // free what the record held; a second backward() then says so
      node->inputs.clear();
      node->output = Tensor();
      node->released = true;
    }
  }
}

}  // namespace client_internal
}  // namespace gt

