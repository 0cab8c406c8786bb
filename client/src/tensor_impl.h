// What a gt::Tensor handle points at: the remote data (shared with detached
// copies) plus autograd state (shared by copies of the same handle).
#pragma once

#include <memory>
#include <vector>

#include "gt/gt.h"
#include "session.h"

namespace gt::client_internal {

// One recorded op: enough to compute its inputs' gradients from its
// output's. Holds its inputs (with their own records, upstream) and its
// output's data only, so the graph has no cycles.
struct Node {
  Op op;
  Attributes attrs;            // the forward instruction's attributes
  std::vector<Tensor> inputs;  // tensor inputs, in operand order
  Tensor output;               // the output's data, detached
  uint64_t index = 0;          // tape position
  std::string signal;          // the scope it was recorded in
  std::string backward_signal; // the scope its gradients are computed in; "" for backward()'s caller's
  bool released = false;       // a backward() without retain_graph used it up
  // Data versions (TensorRecord::Version) of the inputs and the output when
  // the op ran: backward() checks those its formula reads are unchanged.
  std::vector<uint64_t> input_versions;
  uint64_t output_version = 0;
};

struct TensorImpl {
  std::shared_ptr<TensorRecord> data;
  bool requires_grad = false;
  Tensor grad;                     // leaves only
  std::shared_ptr<Node> grad_fn;   // null for leaves
};

// Access to Tensor internals for the client's own files.
struct TensorFactory {
  static Tensor Make(std::shared_ptr<TensorRecord> record) {
    auto impl = std::make_shared<TensorImpl>();
    impl->data = std::move(record);
    return Tensor(std::move(impl));
  }
  static TensorImpl* Impl(const Tensor& t) { return t.impl_.get(); }
  static const TensorRecord* Record(const Tensor& t) { return t.impl_ ? t.impl_->data.get() : nullptr; }
};

// Records `out` as produced by `op` from `inputs` when grad mode is on, the
// op is differentiable and some input requires grad.
void RecordForAutograd(Op op, const Attributes& attrs, const std::vector<Tensor>& inputs, Tensor& out);

// Issues `op` on `inputs` with attrs.axes = `axes` and attrs.scalar =
// `scalar`, recorded for autograd like any op: the fused composites of
// gt/op.h (gelu, layer_norm and their backwards), which gt::nn and the
// autograd issue and gt::Tensor has no method for.
Tensor IssueFused(Op op, const std::vector<Tensor>& inputs, std::vector<int64_t> axes = {}, double scalar = 0);

// The pending sums among `tensors` summed together (Session::SettleTogether):
// the optimizers and clip_grad_norm_ call it with the gradients they read.
void SettleTogether(const std::vector<Tensor>& tensors);

// True once `t`'s session may place tensors (split, copied, on a mesh):
// until then every tensor is whole on one worker, and an op over all of a
// tensor's rows (sum_of_squares, cross_entropy) can be one instruction.
bool SessionPlaces(const Tensor& t);

// The sum of the squares of every element of `tensors` (defined, not empty),
// a 0-d tensor: one kSumOfSquares when they are whole on one worker (the
// session places nothing) and share one floating dtype, else a square and a
// sum per tensor added up (the sharding stage's strategies for those ops
// keep split gradients where they are).
Tensor SumOfSquares(const std::vector<Tensor>& tensors);

// Runs backward from `root` (see Tensor::backward).
void RunBackward(const Tensor& root, const Tensor& gradient, bool retain_graph);

}  // namespace gt::client_internal
