// The gradient formulas of the client-side autograd (autograd.cc holds the
// tape and the engine that runs them): for a recorded op, its inputs'
// gradients from its output's, computed with ordinary gt ops (workers only
// compute). Which ops have one, and which forward values it reads, is the
// op table's GradRule (gt/ops.def).
//
// Thread-safety: as gt::Tensor ops (each thread issues its own).
#pragma once

#include <vector>

#include "tensor_impl.h"

namespace gt::client_internal {

// The gradient of each input of `n` (an undefined tensor where an input
// needs none or has none) given the output's gradient `g`.
// REQUIRES: Differentiable(n.op) (only such ops are recorded on the tape).
std::vector<Tensor> InputGrads(const Node& n, const Tensor& g);

// conv2d's and the poolings' (grad_formulas_conv.cc).
// REQUIRES: ShapeRuleOf(n.op) is kConv or kPool, n.op a forward op.
std::vector<Tensor> ConvOrPoolGrads(const Node& n, const Tensor& g);

// A matmul's input gradients. With `weight_grad` (input 1 is W.t() for a
// 2-D W: TransposedWeight), the second is W's gradient G^T A, not W.t()'s.
std::vector<Tensor> MatmulGrads(const Node& n, const Tensor& g, bool weight_grad = false);

// The transpose record that made a matmul's input 1 when that input is W.t()
// for a 2-D W needing a gradient (x @ W.t(): a linear layer), else null.
const Node* TransposedWeight(const Node& n);

// Which values the gradient formula of `n` reads: the inputs (by position)
// and whether the output (the op's GradRule, or its own rule for kCustom).
// backward() refuses when one was changed in place after the op.
struct ValuesRead {
  std::vector<size_t> inputs;
  bool output = false;
};
ValuesRead ValuesReadBy(const Node& n);

}  // namespace gt::client_internal
