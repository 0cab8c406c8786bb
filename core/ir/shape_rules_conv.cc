// Shape and dtype rules of the convolution and the 2-D poolings (and their
// backwards), over [N, C, H, W] or one sample [C, H, W]. The output sizes
// follow PyTorch's (ATen's conv_output_size / pooling_output_shape), so a
// shape the worker would refuse is refused here, naming the op.
#include <string>

#include "gt/dtype.h"
#include "ir/shape_rules.h"

namespace gt::shape_rules {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

Status CheckImage(const Instruction& inst, const TensorMeta& x) {
  if (x.shape.size() != 3 && x.shape.size() != 4)
    return InvalidArgument(Where(inst) + ": expects a 3-D [C, H, W] or 4-D [N, C, H, W] input, got " +
                           ShapeToString(x.shape));
  if (!IsFloatingPoint(x.dtype))
    return InvalidArgument(Where(inst) + ": needs a floating point input, got " + std::string(DTypeName(x.dtype)));
  return Status::Ok();
}

Status CheckAxes(const Instruction& inst, size_t want) {
  if (inst.attrs.axes.size() != want)
    return InvalidArgument(Where(inst) + ": expects " + Str(static_cast<int64_t>(want)) + " attributes, got " +
                           Str(static_cast<int64_t>(inst.attrs.axes.size())));
  return Status::Ok();
}

// One spatial dim of a sliding window: ATen's pooling_output_shape (with
// ceil_mode false it is also the convolution's size).
int64_t WindowOutput(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;  // the last window must start inside the input
  return out;
}

// The sliding window's output [.., H_out, W_out] from x, or an error naming
// what is wrong. `window`: {kh, kw, sh, sw, ph, pw, dh, dw}.
Result<Shape> Windowed(const Instruction& inst, const Shape& x, const int64_t* window, bool ceil_mode, bool pooling) {
  const int64_t kh = window[0], kw = window[1], sh = window[2], sw = window[3], ph = window[4], pw = window[5];
  const int64_t dh = window[6], dw = window[7];
  if (kh <= 0 || kw <= 0) return InvalidArgument(Where(inst) + ": kernel size must be positive, got " + Str(kh) + "x" + Str(kw));
  if (sh <= 0 || sw <= 0) return InvalidArgument(Where(inst) + ": stride must be positive, got " + Str(sh) + "x" + Str(sw));
  if (ph < 0 || pw < 0) return InvalidArgument(Where(inst) + ": padding must be non-negative, got " + Str(ph) + "x" + Str(pw));
  if (dh <= 0 || dw <= 0) return InvalidArgument(Where(inst) + ": dilation must be positive, got " + Str(dh) + "x" + Str(dw));
  if (pooling && (ph > kh / 2 || pw > kw / 2))
    return InvalidArgument(Where(inst) + ": pad should be at most half of the kernel size, got padding " + Str(ph) +
                           "x" + Str(pw) + " for kernel " + Str(kh) + "x" + Str(kw));
  const size_t rank = x.size();
  Shape out = x;
  out[rank - 2] = WindowOutput(x[rank - 2], kh, sh, ph, dh, ceil_mode);
  out[rank - 1] = WindowOutput(x[rank - 1], kw, sw, pw, dw, ceil_mode);
  if (out[rank - 2] <= 0 || out[rank - 1] <= 0)
    return InvalidArgument(Where(inst) + ": the input " + ShapeToString(x) + " is too small for the kernel " + Str(kh) +
                           "x" + Str(kw) + " (output " + Str(out[rank - 2]) + "x" + Str(out[rank - 1]) + ")");
  return out;
}

Result<TensorMeta> InferConvForward(const Instruction& inst, const Operands& in) {
  const TensorMeta& x = *in[0];
  const TensorMeta& w = *in[1];
  const std::vector<int64_t>& a = inst.attrs.axes;
  const int64_t groups = a[6];
  if (groups <= 0) return InvalidArgument(Where(inst) + ": groups must be positive, got " + Str(groups));
  if (w.shape.size() != 4) return InvalidArgument(Where(inst) + ": expects a 4-D weight, got " + ShapeToString(w.shape));
  if (w.dtype != x.dtype)
    return InvalidArgument(Where(inst) + ": input and weight must have one dtype, got " + std::string(DTypeName(x.dtype)) +
                           " and " + std::string(DTypeName(w.dtype)));
  const size_t rank = x.shape.size();
  const int64_t channels = x.shape[rank - 3], out_channels = w.shape[0];
  if (out_channels % groups != 0 || channels != w.shape[1] * groups)
    return InvalidArgument(Where(inst) + ": weight " + ShapeToString(w.shape) + " with groups=" + Str(groups) + " expects " +
                           Str(w.shape[1] * groups) + " input channels, got input " + ShapeToString(x.shape));
  if (in.size() == 3 && (in[2]->shape != Shape{out_channels} || in[2]->dtype != x.dtype))
    return InvalidArgument(Where(inst) + ": bias must be [" + Str(out_channels) + "] of the input's dtype, got " +
                           ShapeToString(in[2]->shape) + " " + std::string(DTypeName(in[2]->dtype)));
  const int64_t window[8] = {w.shape[2], w.shape[3], a[0], a[1], a[2], a[3], a[4], a[5]};
  Result<Shape> out = Windowed(inst, x.shape, window, false, false);
  if (!out.ok()) return out.status();
  (*out)[rank - 3] = out_channels;
  return TensorMeta{*out, x.dtype};
}

}  // namespace

Result<TensorMeta> InferConv(const Instruction& inst, const Operands& in) {
  if (Status s = CheckAxes(inst, 7); !s.ok()) return s;
  if (inst.op == Op::kConv2d) {
    if (in.size() != 2 && in.size() != 3)
      return InvalidArgument(Where(inst) + ": expects {input, weight} or {input, weight, bias}, got " +
                             Str(static_cast<int64_t>(in.size())) + " operands");
    if (Status s = CheckImage(inst, *in[0]); !s.ok()) return s;
    return InferConvForward(inst, in);
  }
  // The backward: {grad, x, weight}; grad must be the forward's output.
  if (in.size() != 3) return ArityError(inst, 3, in.size());
  if (Status s = CheckImage(inst, *in[1]); !s.ok()) return s;
  Result<TensorMeta> forward = InferConvForward(inst, {in[1], in[2]});
  if (!forward.ok()) return forward.status();
  if (in[0]->shape != forward->shape || in[0]->dtype != forward->dtype)
    return InvalidArgument(Where(inst) + ": the gradient must be " + ShapeToString(forward->shape) + " " +
                           std::string(DTypeName(forward->dtype)) + ", got " + ShapeToString(in[0]->shape) + " " +
                           std::string(DTypeName(in[0]->dtype)));
  if (inst.attrs.scalar != 0 && inst.attrs.scalar != 1)
    return InvalidArgument(Where(inst) + ": scalar must be 0 (the input's gradient) or 1 (the weight's)");
  return inst.attrs.scalar == 0 ? *in[1] : *in[2];
}

Result<TensorMeta> InferPool(const Instruction& inst, const Operands& in) {
  const bool backward = inst.op == Op::kMaxPool2dBackward || inst.op == Op::kAvgPool2dBackward ||
                        inst.op == Op::kAdaptiveAvgPool2dBackward;
  if (in.size() != (backward ? 2u : 1u)) return ArityError(inst, backward ? 2 : 1, in.size());
  const TensorMeta& x = *in[backward ? 1 : 0];
  if (Status s = CheckImage(inst, x); !s.ok()) return s;
  const std::vector<int64_t>& a = inst.attrs.axes;
  Shape out;
  if (inst.op == Op::kMaxPool2d || inst.op == Op::kMaxPool2dBackward) {
    if (Status s = CheckAxes(inst, 9); !s.ok()) return s;
    Result<Shape> shape = Windowed(inst, x.shape, a.data(), a[8] != 0, true);
    if (!shape.ok()) return shape.status();
    out = *shape;
  } else if (inst.op == Op::kAvgPool2d || inst.op == Op::kAvgPool2dBackward) {
    if (Status s = CheckAxes(inst, 8); !s.ok()) return s;
    const int64_t window[8] = {a[0], a[1], a[2], a[3], a[4], a[5], 1, 1};
    Result<Shape> shape = Windowed(inst, x.shape, window, a[6] != 0, true);
    if (!shape.ok()) return shape.status();
    out = *shape;
  } else {
    if (Status s = CheckAxes(inst, 2); !s.ok()) return s;
    if (a[0] <= 0 || a[1] <= 0)
      return InvalidArgument(Where(inst) + ": output size must be positive, got " + Str(a[0]) + "x" + Str(a[1]));
    out = x.shape;
    out[out.size() - 2] = a[0];
    out[out.size() - 1] = a[1];
  }
  if (!backward) return TensorMeta{out, x.dtype};
  if (in[0]->shape != out || in[0]->dtype != x.dtype)
    return InvalidArgument(Where(inst) + ": the gradient must be " + ShapeToString(out) + " " +
                           std::string(DTypeName(x.dtype)) + ", got " + ShapeToString(in[0]->shape) + " " +
                           std::string(DTypeName(in[0]->dtype)));
  return x;
}

}  // namespace gt::shape_rules
