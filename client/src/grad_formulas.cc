// The gradient formulas of the client-side autograd (grad_formulas.h): each
// op's input gradients from its output's, written with ordinary gt ops.
#include "grad_formulas.h"

#include <algorithm>
#include <cmath>

#include "ir/shape_inference.h"

namespace gt::client_internal {
namespace {

// ---- helpers for gradient formulas ------------------------------------------

std::vector<int64_t> Normalized(const std::vector<int64_t>& axes, size_t rank) {
  Result<std::vector<int64_t>> n = NormalizeAxes(axes, rank);
  std::vector<int64_t> out = n.ok() ? *n : std::vector<int64_t>{};
  std::sort(out.begin(), out.end());
  return out;
}

// Sums `g` down to `shape` (undoing broadcasting).
// `t` as `shape` (same element count): itself when it has that shape
// already, else a reshape (an instruction and a free saved per gradient).
Tensor ShapedAs(const Tensor& t, const Shape& shape) { return t.shape() == shape ? t : t.reshape(shape); }

Tensor SumTo(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const Shape& from = g.shape();
  size_t lead = from.size() - shape.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < from.size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && from[i] != 1)) axes.push_back(static_cast<int64_t>(i));
  if (axes.empty()) return ShapedAs(g, shape);
  // Only leading dims (a bias's gradient): the sum drops them itself, where
  // keeping them would cost a reshape after it.
  if (axes.back() < static_cast<int64_t>(lead)) return g.sum(axes, /*keepdims=*/false);
  return ShapedAs(g.sum(axes, /*keepdims=*/true), shape);
}

// Gives a reduction's output gradient back the reduced dims (size 1).
Tensor Unreduce(const Tensor& g, const Attributes& attrs, size_t input_rank) {
  if (attrs.keepdims) return g;
  Shape shape = g.shape();
  for (int64_t axis : Normalized(attrs.axes, input_rank)) shape.insert(shape.begin() + axis, 1);
  return g.reshape(shape);
}

// Broadcasts `g` to `shape`.
Tensor ExpandTo(const Tensor& g, const Shape& shape) { return g * ones(shape, g.dtype()); }

int64_t ReducedCount(const Attributes& attrs, const Shape& shape) {
  int64_t n = 1;
  for (int64_t axis : Normalized(attrs.axes, shape.size())) n *= shape[axis];
  return n;
}

// `g` with `before` and `after` zero slices around it along `dim`.
Tensor Padded(const Tensor& g, int64_t dim, int64_t before, int64_t after) {
  std::vector<Tensor> pieces;
  auto zeros_of = [&](int64_t size) {
    Shape shape = g.shape();
    shape[dim] = size;
    return zeros(shape, g.dtype());
  };
  if (before > 0) pieces.push_back(zeros_of(before));
  pieces.push_back(g);
  if (after > 0) pieces.push_back(zeros_of(after));
  return pieces.size() == 1 ? g : cat(pieces, dim);
}

// Masks are bool, which subtraction refuses (as in PyTorch): scaled to ints first.
Tensor Sign(const Tensor& x) { return x.gt(0.0) * 1.0 + x.lt(0.0) * -1.0; }

// ---- gradient formulas: one function per kind ---------------------------------

// `make()` when input `i` of `n` needs a gradient, else an undefined tensor.
template <typename Make>
Tensor IfNeeded(const Node& n, size_t i, Make make) {
  return n.inputs[i].requires_grad() ? make() : Tensor();
}

// Where a gradient formula below meets an op of its kind it has no case
// for: the op table gives every op a GradRule, so this is a gt bug, not user input;
// loud rather than a silently missing gradient.
[[noreturn]] std::vector<Tensor> NoFormula(const Node& n) {
  throw Error(Code::kInternal, "autograd: no gradient formula for " + std::string(OpName(n.op)));
}

// where(cond, a, b): each operand's gradient goes where it was picked; the
// condition has none.
std::vector<Tensor> WhereGrads(const Node& n, const Tensor& g) {
  const Tensor& cond = n.inputs[0];
  auto picked = [&](size_t i, bool when_true) {
    return IfNeeded(n, i, [&] {
      return SumTo(when_true ? where(cond, g, 0.0) : where(cond, 0.0, g), n.inputs[i].shape());
    });
  };
  switch (n.attrs.scalar_side) {
    case ScalarSide::kNone: return {Tensor(), picked(1, true), picked(2, false)};
    case ScalarSide::kLeft: return {Tensor(), picked(1, false)};  // where(cond, s, b)
    case ScalarSide::kRight: return {Tensor(), picked(1, true)};  // where(cond, a, s)
  }
  return NoFormula(n);
}

// maximum / minimum of two tensors, as PyTorch's: the gradient goes to the
// larger (smaller) operand, half to each where they are equal; a NaN in
// either gives both the whole gradient there (no comparison holds).
std::vector<Tensor> ExtremumGrads(const Node& n, const Tensor& g) {
  if (n.inputs.size() != 2) return NoFormula(n);
  const Tensor& a = n.inputs[0];
  const Tensor& b = n.inputs[1];
  const bool maximum = n.op == Op::kMaximum;
  Tensor shared;
  auto shared_grad = [&] {
    if (!shared.defined()) shared = where(a.eq(b), g * 0.5, g);
    return shared;
  };
  Tensor ga = IfNeeded(n, 0, [&] { return SumTo(where(maximum ? a.lt(b) : a.gt(b), 0.0, shared_grad()), a.shape()); });
  Tensor gb = IfNeeded(n, 1, [&] { return SumTo(where(maximum ? a.gt(b) : a.lt(b), 0.0, shared_grad()), b.shape()); });
  return {ga, gb};
}

std::vector<Tensor> BinaryGrads(const Node& n, const Tensor& g) {
  if (n.op == Op::kWhere) return WhereGrads(n, g);
  if (n.op == Op::kMaximum || n.op == Op::kMinimum) return ExtremumGrads(n, g);
  const Tensor& a = n.inputs[0];
  const double s = n.attrs.scalar;
  switch (n.attrs.scalar_side) {
    case ScalarSide::kRight:
      switch (n.op) {
        case Op::kAdd: case Op::kSub: return {g};
        case Op::kMul: return {g * s};
        case Op::kDiv: return {g / s};
        case Op::kPow: return {s == 0 ? g * 0.0 : g * s * a.pow(s - 1)};  // x^0 is constant, also at 0
        default: return NoFormula(n);
      }
    case ScalarSide::kLeft:
      switch (n.op) {
        case Op::kAdd: return {g};
        case Op::kSub: return {-g};
        case Op::kMul: return {g * s};
        case Op::kDiv: return {-(g * s) / (a * a)};
        case Op::kPow: return {g * n.output * std::log(s)};
        default: return NoFormula(n);
      }
    case ScalarSide::kNone:
      break;
  }
  const Tensor& b = n.inputs[1];
  switch (n.op) {
    // Only the gradients some input needs are computed (each is remote work).
    case Op::kAdd: return {IfNeeded(n, 0, [&] { return SumTo(g, a.shape()); }), IfNeeded(n, 1, [&] { return SumTo(g, b.shape()); })};
    case Op::kSub: return {IfNeeded(n, 0, [&] { return SumTo(g, a.shape()); }), IfNeeded(n, 1, [&] { return SumTo(-g, b.shape()); })};
    case Op::kMul: return {IfNeeded(n, 0, [&] { return SumTo(g * b, a.shape()); }), IfNeeded(n, 1, [&] { return SumTo(g * a, b.shape()); })};
    case Op::kDiv:
      return {IfNeeded(n, 0, [&] { return SumTo(g / b, a.shape()); }),
              IfNeeded(n, 1, [&] { return SumTo(-(g * a) / (b * b), b.shape()); })};
    case Op::kPow: {
      // As PyTorch: where b == 0 the base gets no gradient, and where a == 0
      // the exponent gets none (instead of 0 * inf = nan).
      Tensor ga = g * b * a.pow(b - 1.0 + b.eq(0.0));
      Tensor gb = g * n.output * (a + a.eq(0.0)).log();
      return {SumTo(ga, a.shape()), SumTo(gb, b.shape())};
    }
    default: return NoFormula(n);
  }
}

// `g` in `x`'s dtype: a fused backward (and matmul) takes a gradient of its
// floating input's (and output's) dtype, and one reaching it may be wider
// (float32 x times a float64 tensor downstream), as PyTorch's autograd lets
// it be.
Tensor InDTypeOf(const Tensor& g, const Tensor& x) {
  if (g.dtype() == x.dtype()) return g;
  Tensor cast = zeros(g.shape(), x.dtype());
  cast.copy_(g);
  return cast;
}

// The gradient of a matrix W in x @ W with x batched ([..., m, k], a linear
// layer on [B, T, k]), transposed (G^T A, [n, k]): one product over every
// row of every batch, as LibTorch folds it, where a batched product per
// leading index summed afterwards does the same arithmetic in small pieces
// and then reads a [..., k, n] result once more to reduce it (a third of the
// GPT step's sum time).
Tensor FoldedWeightGradT(const Tensor& A, const Tensor& G) {
  // The row count spelled out: -1 beside a 0-sized dim names no size.
  int64_t n = 1;
  for (size_t d = 0; d + 1 < A.shape().size(); ++d) n *= A.shape()[d];
  Tensor rows = A.reshape({n, A.shape().back()});
  Tensor grads = G.reshape({n, G.shape().back()});
  return grads.transpose(-1, -2).matmul(rows);
}

// d/dx erf(x) = 2/sqrt(pi) * exp(-x^2).
constexpr double kTwoOverSqrtPi = 1.1283791670955126;

std::vector<Tensor> UnaryGrads(const Node& n, const Tensor& g) {
  const Tensor& x = n.inputs[0];
  const Tensor& y = n.output;
  switch (n.op) {
    // One kernel, as LibTorch's threshold_backward, for the mask and the product.
    case Op::kRelu: return {client_internal::IssueFused(Op::kReluBackward, {InDTypeOf(g, x), x})};
    case Op::kSigmoid: return {g * y * (1.0 - y)};
    case Op::kTanh: return {g * (1.0 - y * y)};
    case Op::kExp: return {g * y};
    case Op::kLog: return {g / x};
    case Op::kSqrt: return {g / (y * 2.0)};
    case Op::kNeg: return {-g};
    case Op::kAbs: return {g * Sign(x)};
    case Op::kClone: return {g};
    case Op::kRedistribute: return {g};  // the same values: the gradient keeps the layout it comes in
    case Op::kErf: return {g * (x * x * -1.0).exp() * kTwoOverSqrtPi};
    case Op::kTril: return {g.tril(n.attrs.axes.at(0))};
    case Op::kTriu: return {g.triu(n.attrs.axes.at(0))};
    case Op::kSoftmax: return {y * (g - (g * y).sum(n.attrs.axes, true))};
    case Op::kLogSoftmax: return {g - y.exp() * g.sum(n.attrs.axes, true)};
    case Op::kGelu: return {client_internal::IssueFused(Op::kGeluBackward, {InDTypeOf(g, x), x})};
    case Op::kLayerNorm:
      return {client_internal::IssueFused(Op::kLayerNormBackward, {InDTypeOf(g, x), x}, n.attrs.axes, n.attrs.scalar)};
    default: return NoFormula(n);
  }
}

std::vector<Tensor> ReduceGrads(const Node& n, const Tensor& g) {
  const Tensor& x = n.inputs[0];
  if (n.op == Op::kCrossEntropy)  // the targets (input 1) are class indices: no gradient
    return {client_internal::IssueFused(Op::kCrossEntropyBackward, {InDTypeOf(g, x), x, n.inputs[1]}, {}, n.attrs.scalar),
            Tensor()};
  if (n.op == Op::kMseLoss) {  // d/d target = -(d/d input)
    Tensor input_grad;
    auto once = [&] {
      if (!input_grad.defined())
        input_grad = client_internal::IssueFused(Op::kMseLossBackward, {InDTypeOf(g, x), x, n.inputs[1]});
      return input_grad;
    };
    Tensor input_side = IfNeeded(n, 0, once);
    Tensor target_side = IfNeeded(n, 1, [&] { return -once(); });
    return {input_side, target_side};
  }
  Tensor spread = Unreduce(g, n.attrs, x.shape().size());
  switch (n.op) {
    case Op::kSum: return {ExpandTo(spread, x.shape())};
    case Op::kMean: return {ExpandTo(spread, x.shape()) / static_cast<double>(ReducedCount(n.attrs, x.shape()))};
    case Op::kVar: {  // 2 (x - mean) / (N - correction), as PyTorch's var_backward
      const double dof = static_cast<double>(ReducedCount(n.attrs, x.shape())) - n.attrs.scalar;
      return {spread * (x - x.mean(n.attrs.axes, true)) * (2.0 / dof)};
    }
    case Op::kMax:
    case Op::kMin: {
      // Ties share the gradient evenly.
      Tensor mask = x.eq(Unreduce(n.output, n.attrs, x.shape().size()));
      std::vector<int64_t> axes = n.attrs.axes;
      return {mask * spread / mask.sum(axes, true)};
    }
    default: return NoFormula(n);
  }
}

// The index (input 1) has no gradient; a selection's gradient is added
// back where it was picked (repeats accumulate), an addition's passes
// through to the base and is picked for the source.
std::vector<Tensor> IndexingGrads(const Node& n, const Tensor& g) {
  const Tensor& x = n.inputs[0];
  const Tensor& index = n.inputs[1];
  const int64_t dim = n.attrs.axes.at(0);
  switch (n.op) {
    case Op::kIndexSelect: return {IfNeeded(n, 0, [&] { return zeros(x.shape(), x.dtype()).index_add(dim, index, g); }), Tensor()};
    case Op::kGather: return {IfNeeded(n, 0, [&] { return zeros(x.shape(), x.dtype()).scatter_add(dim, index, g); }), Tensor()};
    case Op::kIndexAdd: return {IfNeeded(n, 0, [&] { return g; }), Tensor(), IfNeeded(n, 2, [&] { return g.index_select(dim, index); })};
    case Op::kScatterAdd: return {IfNeeded(n, 0, [&] { return g; }), Tensor(), IfNeeded(n, 2, [&] { return g.gather(dim, index); })};
    default: return NoFormula(n);
  }
}

std::vector<Tensor> MovementGrads(const Node& n, const Tensor& g) {
  const Tensor& x = n.inputs[0];
  const auto& axes = n.attrs.axes;
  if (GradRuleOf(n.op) == GradRule::kIndex) return IndexingGrads(n, g);
  switch (n.op) {
    case Op::kReshape: case Op::kUnsqueeze: case Op::kSqueeze: return {g.reshape(x.shape())};
    case Op::kTranspose: return {axes.empty() ? g.t() : g.transpose(axes[0], axes[1])};
    case Op::kPermute: {
      std::vector<int64_t> inverse(axes.size());
      for (size_t i = 0; i < axes.size(); ++i) {
        int64_t d = axes[i] < 0 ? axes[i] + static_cast<int64_t>(axes.size()) : axes[i];
        inverse[d] = static_cast<int64_t>(i);
      }
      return {g.permute(inverse)};
    }
    case Op::kSlice: {
      // Step 1: zeros around g, joined with cat (no write through a view, so
      // it holds where the sharding stage places z in pieces).
      const int64_t rank = static_cast<int64_t>(x.shape().size());
      const int64_t dim = axes[0] < 0 ? axes[0] + rank : axes[0];
      if (axes[3] == 1 && dim >= 0 && dim < rank) {
        const int64_t n = x.shape()[dim];
        int64_t start = axes[1] < 0 ? axes[1] + n : axes[1];
        start = std::clamp<int64_t>(start, 0, n);
        return {Padded(g, dim, start, n - start - g.shape()[dim])};
      }
      Tensor z = zeros(x.shape(), g.dtype());
      z.slice(axes[0], axes[1], axes[2], axes[3]).copy_(g);  // the slice is a view of z on the worker
      return {z};
    }
    case Op::kSelect: {
      const int64_t rank = static_cast<int64_t>(x.shape().size());
      const int64_t dim = axes[0] < 0 ? axes[0] + rank : axes[0];
      if (dim >= 0 && dim < rank) {
        const int64_t n = x.shape()[dim];
        const int64_t index = axes[1] < 0 ? axes[1] + n : axes[1];
        return {Padded(g.unsqueeze(dim), dim, index, n - index - 1)};
      }
      Tensor z = zeros(x.shape(), g.dtype());
      z.select(axes[0], axes[1]).copy_(g);
      return {z};
    }
    case Op::kCat: {
      std::vector<Tensor> grads;
      int64_t rank = static_cast<int64_t>(x.shape().size());
      int64_t dim = axes[0] < 0 ? axes[0] + rank : axes[0];
      int64_t offset = 0;
      for (const Tensor& in : n.inputs) {
        int64_t size = in.shape()[dim];
        grads.push_back(g.slice(dim, offset, offset + size));
        offset += size;
      }
      return grads;
    }
    default: return NoFormula(n);
  }
}

// GradRule::kCustom: what the formula reads depends on the scalar side and
// on which inputs need a gradient.
ValuesRead CustomValuesRead(const Node& n) {
  auto grad = [&](size_t i) { return i < n.inputs.size() && n.inputs[i].requires_grad(); };
  ValuesRead r;
  switch (n.op) {
    case Op::kMul: case Op::kMatmul:  // each operand's gradient reads the other one
      if (n.inputs.size() == 2) {
        if (grad(1)) r.inputs.push_back(0);
        if (grad(0)) r.inputs.push_back(1);
      }
      break;
    case Op::kDiv:
      if (n.inputs.size() == 2) {
        if (grad(1)) r.inputs.push_back(0);
        r.inputs.push_back(1);
      } else if (n.attrs.scalar_side == ScalarSide::kLeft) {
        r.inputs.push_back(0);  // s / a
      }
      break;
    case Op::kPow:
      if (n.inputs.size() == 2) {
        r.inputs = {0, 1};
        r.output = true;
      } else if (n.attrs.scalar_side == ScalarSide::kLeft) {
        r.output = true;  // s ^ a
      } else {
        r.inputs.push_back(0);  // a ^ s
      }
      break;
    default: break;
  }
  return r;
}

}  // namespace

// With `weight_grad` (b is W.t() for a 2-D W: TransposedWeight), the
// gradient of input 1 comes as W's, G^T A, not as that of W.t().
std::vector<Tensor> MatmulGrads(const Node& n, const Tensor& g, bool weight_grad) {
  const Tensor& a = n.inputs[0];
  const Tensor& b = n.inputs[1];
  // Work on the 2-D-or-more forms matmul used, then map back.
  bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  Tensor A = a_vec ? a.unsqueeze(0) : a;
  Tensor B = b_vec ? b.unsqueeze(-1) : b;
  // A wider gradient (a float32 product times a float64 tensor downstream)
  // comes back to the product's dtype, which both operands share.
  Tensor G = InDTypeOf(g, n.output);
  if (a_vec) G = G.unsqueeze(b_vec ? 0 : -2);
  if (b_vec) G = G.unsqueeze(-1);
  Tensor ga = IfNeeded(n, 0, [&] { return ShapedAs(SumTo(G.matmul(B.transpose(-1, -2)), A.shape()), a.shape()); });
  // For a 2-D B: G^T A, a batched A folded into rows.
  auto transposed_gb = [&] { return A.dim() > 2 ? FoldedWeightGradT(A, G) : G.transpose(-1, -2).matmul(A); };
  if (weight_grad) return {ga, IfNeeded(n, 1, transposed_gb)};
  // (G^T A)^T rather than A^T G: the same values, but when b is a transposed
  // weight (x @ W.t()) W's gradient then arrives contiguous, as in LibTorch.
  Tensor gb = IfNeeded(n, 1, [&] {
    if (B.dim() == 2) return ShapedAs(transposed_gb().transpose(-1, -2), b.shape());
    return ShapedAs(SumTo(G.transpose(-1, -2).matmul(A).transpose(-1, -2), B.shape()), b.shape());
  });
  return {ga, gb};
}

// The transpose record that made a matmul's input 1 when that input is W.t()
// for a 2-D W needing a gradient (x @ W.t(): a linear layer), else null.
// Its backward would only transpose back what MatmulGrads made by
// transposing: W gets G^T A directly instead, two instructions fewer per
// layer. The transpose's backward is linear, so handing W this share
// directly gives the same sum whatever else reads W.t().
const Node* TransposedWeight(const Node& n) {
  if (n.op != Op::kMatmul || n.inputs.size() != 2 || n.inputs[1].dim() != 2 || !n.inputs[1].requires_grad())
    return nullptr;
  const Node* t = TensorFactory::Impl(n.inputs[1])->grad_fn.get();
  if (!t || t->op != Op::kTranspose || t->released || t->inputs.size() != 1 || t->inputs[0].dim() != 2 ||
      !t->inputs[0].requires_grad() || t->backward_signal != n.backward_signal)
    return nullptr;
  const std::vector<int64_t>& axes = t->attrs.axes;  // t(): none; transpose(d0, d1): both
  if (!axes.empty() && (axes.size() != 2 || (axes[0] + 2) % 2 == (axes[1] + 2) % 2)) return nullptr;
  return t;
}

// REQUIRES: Differentiable(n.op) (only such ops are recorded on the tape).
std::vector<Tensor> InputGrads(const Node& n, const Tensor& g) {
  if (ShapeRuleOf(n.op) == ShapeRule::kConv || ShapeRuleOf(n.op) == ShapeRule::kPool) return ConvOrPoolGrads(n, g);
  switch (KindOf(n.op)) {
    case OpKind::kBinary: return BinaryGrads(n, g);
    case OpKind::kContract: return MatmulGrads(n, g);
    case OpKind::kUnary: return UnaryGrads(n, g);
    case OpKind::kReduce: return ReduceGrads(n, g);
    case OpKind::kMovement: return MovementGrads(n, g);
    case OpKind::kCreate: case OpKind::kMutate: case OpKind::kControl: case OpKind::kCollective: return {};
  }
  return {};
}

// The table's GradRule says what each formula reads. (The fused losses'
// backwards read both operands again: cross_entropy recomputes the
// log-softmax from the logits, so a change to them refuses here where
// PyTorch, which keeps the log-softmax, would not.)
ValuesRead ValuesReadBy(const Node& n) {
  ValuesRead r;
  switch (GradRuleOf(n.op)) {
    case GradRule::kNone: case GradRule::kShapes: break;
    case GradRule::kInput: r.inputs = {0}; break;
    case GradRule::kOutput: r.output = true; break;
    case GradRule::kInputAndOutput: r.inputs = {0}; r.output = true; break;
    case GradRule::kIndex: r.inputs = {1}; break;  // the index says where the gradient goes
    case GradRule::kOperands: r.inputs = {0, 1}; break;
    case GradRule::kCustom: return CustomValuesRead(n);
  }
  return r;
}

}  // namespace gt::client_internal
