// The torch backend's convolution and pooling kernels (kernels_families.h):
// ATen's convolution, max / average / adaptive average pooling and their
// backwards. The attributes were checked by the op's shape rule
// (ir/shape_rules_conv.cc), which runs here first: an instruction that did
// not come from gt's client gets gt's error, not an index out of range.
#include <array>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "dtype_map.h"
#include "instruction_checks.h"
#include "ir/shape_inference.h"
#include "kernels_families.h"

namespace gt::torch_backend::kernels {
namespace {

// The shape rule's verdict on `operands` (their shapes and dtypes).
Status CheckShapes(const Instruction& inst, const std::vector<at::Tensor>& operands) {
  std::vector<TensorMeta> metas;
  for (const at::Tensor& t : operands) {
    std::optional<DType> dtype = FromScalarType(t.scalar_type());
    if (!dtype) return Invalid(inst, "unsupported dtype " + std::string(c10::toString(t.scalar_type())));
    metas.push_back(TensorMeta{Shape(t.sizes().begin(), t.sizes().end()), *dtype});
  }
  std::vector<const TensorMeta*> in;
  for (const TensorMeta& m : metas) in.push_back(&m);
  Result<TensorMeta> result = InferResult(inst, in);
  return result.ok() ? Status::Ok() : Invalid(inst, result.status().message());
}

// ATen's convolution wants a batch: one sample [C, H, W] becomes [1, C, H, W].
at::Tensor Batched(const at::Tensor& x) { return x.dim() == 3 ? x.unsqueeze(0) : x; }
at::Tensor LikeInput(const at::Tensor& result, const at::Tensor& x) { return x.dim() == 3 ? result.squeeze(0) : result; }

struct ConvParams {
  std::array<int64_t, 2> stride, padding, dilation;
  int64_t groups;
};
ConvParams ConvParamsOf(const Instruction& inst) {
  const std::vector<int64_t>& a = inst.attrs.axes;
  return {{a[0], a[1]}, {a[2], a[3]}, {a[4], a[5]}, a[6]};
}

Result<at::Tensor> ConvForward(const Instruction& inst, const std::vector<at::Tensor>& t) {
  const ConvParams p = ConvParamsOf(inst);
  const c10::optional<at::Tensor> bias = t.size() == 3 ? c10::optional<at::Tensor>(t[2]) : c10::nullopt;
  const std::array<int64_t, 2> no_output_padding = {0, 0};
  at::Tensor out = at::convolution(Batched(t[0]), t[1], bias, p.stride, p.padding, p.dilation, /*transposed=*/false,
                                   no_output_padding, p.groups);
  return LikeInput(out, t[0]);
}

// {grad, x, weight}: x's gradient (scalar 0) or the weight's (scalar 1),
// only that one computed.
Result<at::Tensor> ConvBackward(const Instruction& inst, const std::vector<at::Tensor>& t) {
  const ConvParams p = ConvParamsOf(inst);
  const bool weight_grad = inst.attrs.scalar == 1;
  const std::array<int64_t, 2> no_output_padding = {0, 0};
  auto grads = at::convolution_backward(Batched(t[0]), Batched(t[1]), t[2], c10::nullopt, p.stride, p.padding,
                                        p.dilation, /*transposed=*/false, no_output_padding, p.groups,
                                        {!weight_grad, weight_grad, false});
  return weight_grad ? std::get<1>(grads) : LikeInput(std::get<0>(grads), t[1]);
}

// The window positions of the max poolings the autograd recorded (their
// instruction's scalar is 1), kept for the backward, which gets only {grad,
// x}: finding them again costs as much as the forward (a tenth of a CNN
// step). An entry is x's identity (its TensorImpl, while alive, and its
// version: an in-place change makes it stale) and the pooling's attributes;
// the backward takes it. At most kKeep entries, the oldest dropped (a forward
// whose backward never runs); a miss recomputes. Leaked on purpose: no
// LibTorch destructor runs after the process's finalization.
class PoolPositions {
 public:
  static PoolPositions& Get() {
    static PoolPositions* positions = new PoolPositions;
    return *positions;
  }

  // Kept only while x lives and within kKeepBytes in all (the positions are
  // no client's tensor, so no quota counts them): past it the backward finds
  // them again from x.
  void Put(const at::Tensor& x, const std::vector<int64_t>& attrs, at::Tensor positions) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(entries_, [this](const Entry& e) { return e.x.expired() && Forget(e); });
    const int64_t bytes = static_cast<int64_t>(positions.nbytes());
    if (bytes > kKeepBytes) return;
    while (!entries_.empty() && (entries_.size() == kKeep || bytes_ + bytes > kKeepBytes)) {
      Forget(entries_.front());
      entries_.pop_front();
    }
    bytes_ += bytes;
    entries_.push_back({Weak(x.getIntrusivePtr()), x._version(), attrs, std::move(positions)});
  }

  std::optional<at::Tensor> Take(const at::Tensor& x, const std::vector<int64_t>& attrs) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->x.lock().get() != x.unsafeGetTensorImpl() || it->version != x._version() || it->attrs != attrs) continue;
      at::Tensor positions = std::move(it->positions);
      bytes_ -= static_cast<int64_t>(positions.nbytes());
      entries_.erase(it);
      return positions;
    }
    return std::nullopt;
  }

 private:
  using Weak = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  struct Entry {
    Weak x;
    int64_t version;
    std::vector<int64_t> attrs;
    at::Tensor positions;
  };
  bool Forget(const Entry& e) {  // REQUIRES(mu_)
    bytes_ -= static_cast<int64_t>(e.positions.nbytes());
    return true;
  }

  static constexpr size_t kKeep = 16;
  static constexpr int64_t kKeepBytes = int64_t{64} << 20;
  std::mutex mu_;
  std::deque<Entry> entries_;  // GUARDED_BY(mu_)
  int64_t bytes_ = 0;          // GUARDED_BY(mu_): the positions' bytes
};

Result<at::Tensor> PoolForward(const Instruction& inst, const at::Tensor& x) {
  const std::vector<int64_t>& a = inst.attrs.axes;
  switch (inst.op) {
    case Op::kMaxPool2d: {
      const std::array<int64_t, 2> kernel = {a[0], a[1]}, stride = {a[2], a[3]}, pad = {a[4], a[5]}, dil = {a[6], a[7]};
      if (inst.attrs.scalar != 1) return at::max_pool2d(x, kernel, stride, pad, dil, a[8] != 0);
      auto [values, positions] = at::max_pool2d_with_indices(x, kernel, stride, pad, dil, a[8] != 0);
      PoolPositions::Get().Put(x, a, std::move(positions));
      return values;
    }
    case Op::kAvgPool2d:
      return at::avg_pool2d(x, {a[0], a[1]}, {a[2], a[3]}, {a[4], a[5]}, a[6] != 0, a[7] != 0);
    case Op::kAdaptiveAvgPool2d: return at::adaptive_avg_pool2d(x, {a[0], a[1]});
    default: break;
  }
  return Internal("not a pooling: " + inst.Describe());
}

// {grad, x}: the max pooling's positions are those its recorded forward
// kept (PoolPositions), else found again from x.
Result<at::Tensor> PoolBackward(const Instruction& inst, const at::Tensor& g, const at::Tensor& x) {
  const std::vector<int64_t>& a = inst.attrs.axes;
  switch (inst.op) {
    case Op::kMaxPool2dBackward: {
      const std::array<int64_t, 2> kernel = {a[0], a[1]}, stride = {a[2], a[3]}, pad = {a[4], a[5]}, dil = {a[6], a[7]};
      std::optional<at::Tensor> positions = PoolPositions::Get().Take(x, a);
      if (!positions) positions = std::get<1>(at::max_pool2d_with_indices(x, kernel, stride, pad, dil, a[8] != 0));
      return at::max_pool2d_with_indices_backward(g, x, kernel, stride, pad, dil, a[8] != 0, *positions);
    }
    case Op::kAvgPool2dBackward:
      return at::avg_pool2d_backward(g, x, {a[0], a[1]}, {a[2], a[3]}, {a[4], a[5]}, a[6] != 0, a[7] != 0, c10::nullopt);
    case Op::kAdaptiveAvgPool2dBackward: return at::_adaptive_avg_pool2d_backward(g, x);
    default: break;
  }
  return Internal("not a pooling backward: " + inst.Describe());
}

}  // namespace

Result<at::Tensor> Conv(const Instruction& inst, TensorSource source) {
  const size_t count = inst.op == Op::kConv2d ? inst.operands.size() : 3;
  if (inst.op == Op::kConv2d && count != 2 && count != 3)
    return Invalid(inst, "expects 2 or 3 operands, got " + std::to_string(count));
  Result<std::vector<at::Tensor>> operands = Operands(inst, count, source);
  if (!operands.ok()) return operands.status();
  if (Status s = CheckShapes(inst, *operands); !s.ok()) return s;
  return inst.op == Op::kConv2d ? ConvForward(inst, *operands) : ConvBackward(inst, *operands);
}

Result<at::Tensor> Pool(const Instruction& inst, TensorSource source) {
  const bool backward = KindOf(inst.op) == OpKind::kBinary;
  Result<std::vector<at::Tensor>> operands = Operands(inst, backward ? 2 : 1, source);
  if (!operands.ok()) return operands.status();
  if (Status s = CheckShapes(inst, *operands); !s.ok()) return s;
  const std::vector<at::Tensor>& t = *operands;
  return backward ? PoolBackward(inst, t[0], t[1]) : PoolForward(inst, t[0]);
}

}  // namespace gt::torch_backend::kernels
