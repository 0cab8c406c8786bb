// Shape rules of movement (reshape, transpose, ..., select), cat and the
// indexing ops (index_select, index_add, gather, scatter_add).
#include "ir/shape_rules.h"

#include <optional>

namespace gt::shape_rules {

namespace {

Result<TensorMeta> InferReshape(const Instruction& inst, const TensorMeta& in) {
  Shape target = inst.attrs.shape;
  Shape given;  // the dims other than the -1
  int inferred = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (inferred >= 0) return InvalidArgument("reshape: only one dimension may be -1 in " + ShapeToString(target));
      inferred = static_cast<int>(i);
    } else if (target[i] < 0) {
      return InvalidArgument("reshape: invalid dimension in " + ShapeToString(target));
    } else {
      given.push_back(target[i]);
    }
  }
  int64_t total = NumElements(in.shape);
  // Built only on an error: every reshape of every client passes here.
  auto cannot_view = [&] {
    return InvalidArgument("reshape: cannot view " + ShapeToString(in.shape) + " (" + std::to_string(total) +
                           " elements) as " + ShapeToString(inst.attrs.shape));
  };
  const std::optional<int64_t> product = CheckedProduct(given);
  if (!product) return cannot_view();  // more than any tensor holds
  const int64_t known = *product;
  if (inferred >= 0) {
    if (known == 0 || total % known != 0) return cannot_view();
    target[inferred] = total / known;
  } else if (known != total) {
    return cannot_view();
  }
  return TensorMeta{target, in.dtype};
}

Result<TensorMeta> InferTranspose(const Instruction& inst, const TensorMeta& in) {
  Shape out = in.shape;
  const auto& axes = inst.attrs.axes;
  if (axes.empty()) {
    if (out.size() >= 2) std::swap(out[out.size() - 1], out[out.size() - 2]);
    return TensorMeta{out, in.dtype};
  }
  if (axes.size() != 2) return InvalidArgument("transpose: expects two dims, got " + ShapeToString(axes));
  int64_t rank = static_cast<int64_t>(out.size());
  int64_t bound = std::max<int64_t>(rank, 1);  // a 0-d tensor accepts dims 0 and -1, as in PyTorch
  auto wrap = [bound](int64_t d) { return d < 0 ? d + bound : d; };
  int64_t d0 = wrap(axes[0]), d1 = wrap(axes[1]);
  if (d0 < 0 || d0 >= bound || d1 < 0 || d1 >= bound)
    return InvalidArgument("transpose: dims " + ShapeToString(axes) + " out of range for shape " + ShapeToString(in.shape));
  if (rank > 0) std::swap(out[d0], out[d1]);
  return TensorMeta{out, in.dtype};
}

// Wraps a possibly negative dim into [0, rank); nullopt when out of range.
std::optional<int64_t> WrapDim(int64_t dim, int64_t rank) {
  int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) return std::nullopt;
  return d;
}

Status DimError(const Instruction& inst, int64_t dim, const Shape& shape) {
  return InvalidArgument(Where(inst) + ": dim " + std::to_string(dim) + " is out of range for shape " +
                         ShapeToString(shape));
}

Result<TensorMeta> InferUnsqueeze(const Instruction& inst, const TensorMeta& in) {
  int64_t rank = static_cast<int64_t>(in.shape.size());
  if (inst.attrs.axes.size() != 1) return InvalidArgument("unsqueeze: expects one dim");
  std::optional<int64_t> d = WrapDim(inst.attrs.axes[0], rank + 1);
  if (!d) return DimError(inst, inst.attrs.axes[0], in.shape);
  Shape out = in.shape;
  out.insert(out.begin() + *d, 1);
  return TensorMeta{out, in.dtype};
}

Result<TensorMeta> InferSqueeze(const Instruction& inst, const TensorMeta& in) {
  int64_t rank = static_cast<int64_t>(in.shape.size());
  Shape out;
  if (inst.attrs.axes.empty()) {
    for (int64_t d : in.shape)
      if (d != 1) out.push_back(d);
    return TensorMeta{out, in.dtype};
  }
  std::optional<int64_t> d = WrapDim(inst.attrs.axes[0], std::max<int64_t>(rank, 1));
  if (!d) return DimError(inst, inst.attrs.axes[0], in.shape);
  out = in.shape;
  if (rank > 0 && out[*d] == 1) out.erase(out.begin() + *d);
  return TensorMeta{out, in.dtype};
}

Result<TensorMeta> InferPermute(const Instruction& inst, const TensorMeta& in) {
  int64_t rank = static_cast<int64_t>(in.shape.size());
  const auto& perm = inst.attrs.axes;
  auto not_a_permutation = [&] {
    return InvalidArgument("permute: " + ShapeToString(perm) + " is not a permutation of the dims of " +
                           ShapeToString(in.shape));
  };
  if (static_cast<int64_t>(perm.size()) != rank) return not_a_permutation();
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  Shape out;
  for (int64_t p : perm) {
    std::optional<int64_t> d = WrapDim(p, rank);
    if (!d || seen[*d]) return not_a_permutation();
    seen[*d] = true;
    out.push_back(in.shape[*d]);
  }
  return TensorMeta{out, in.dtype};
}

Result<TensorMeta> InferSlice(const Instruction& inst, const TensorMeta& in) {
  const auto& a = inst.attrs.axes;
  int64_t rank = static_cast<int64_t>(in.shape.size());
  if (a.size() != 4) return InvalidArgument("slice: expects {dim, start, stop, step}");
  std::optional<int64_t> d = WrapDim(a[0], rank);
  if (!d) return DimError(inst, a[0], in.shape);
  int64_t size = in.shape[*d], start = a[1], stop = a[2], step = a[3];
  if (step < 1) return InvalidArgument("slice: step must be positive, got " + std::to_string(step));
  if (start < 0 || start > size || stop < 0 || stop > size)
    return InvalidArgument("slice: bounds [" + std::to_string(start) + ", " + std::to_string(stop) +
                           ") outside dim of size " + std::to_string(size));
  Shape out = in.shape;
  out[*d] = stop > start ? (stop - start - 1) / step + 1 : 0;  // a step near 2^63 must not overflow
  return TensorMeta{out, in.dtype};
}

Result<TensorMeta> InferSelect(const Instruction& inst, const TensorMeta& in) {
  const auto& a = inst.attrs.axes;
  int64_t rank = static_cast<int64_t>(in.shape.size());
  if (a.size() != 2) return InvalidArgument("select: expects {dim, index}");
  std::optional<int64_t> d = WrapDim(a[0], rank);
  if (!d) return DimError(inst, a[0], in.shape);
  std::optional<int64_t> index = WrapDim(a[1], in.shape[*d]);
  if (!index)
    return InvalidArgument("index " + std::to_string(a[1]) + " is out of bounds for dim " + std::to_string(*d) +
                           " with size " + std::to_string(in.shape[*d]));
  Shape out = in.shape;
  out.erase(out.begin() + *d);
  return TensorMeta{out, in.dtype};
}

// index_select, index_add, gather, scatter_add: the dim, the index's type
// and the shapes PyTorch requires of them.
Result<int64_t> IndexDim(const Instruction& inst, const TensorMeta& x, const TensorMeta& index) {
  if (index.dtype != DType::kInt64 && index.dtype != DType::kInt32)
    return InvalidArgument(Where(inst) + ": the index must be int32 or int64, got " + std::string(DTypeName(index.dtype)));
  if (inst.attrs.axes.size() != 1) return InvalidArgument(Where(inst) + ": expects one dim");
  if (x.shape.empty()) return InvalidArgument(Where(inst) + ": needs at least 1 dimension");
  Result<std::vector<int64_t>> dim = NormalizeAxes(inst.attrs.axes, x.shape.size());
  if (!dim.ok()) return InvalidArgument(Where(inst) + ": " + dim.status().message());
  return (*dim)[0];
}

Status SameDType(const Instruction& inst, const TensorMeta& base, const TensorMeta& source) {
  if (base.dtype == source.dtype) return Status::Ok();
  return InvalidArgument(Where(inst) + ": the source must have the tensor's dtype " + std::string(DTypeName(base.dtype)) +
                         ", got " + std::string(DTypeName(source.dtype)));
}

}  // namespace

Result<TensorMeta> InferMovement(const Instruction& inst, const TensorMeta& in) {
  switch (inst.op) {
    case Op::kReshape: return InferReshape(inst, in);
    case Op::kTranspose: return InferTranspose(inst, in);
    case Op::kUnsqueeze: return InferUnsqueeze(inst, in);
    case Op::kSqueeze: return InferSqueeze(inst, in);
    case Op::kPermute: return InferPermute(inst, in);
    case Op::kSlice: return InferSlice(inst, in);
    case Op::kSelect: return InferSelect(inst, in);
    default: return Internal(Where(inst) + " is not a single-operand movement op");
  }
}

Result<TensorMeta> InferCat(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  if (in.empty()) return InvalidArgument("cat: expects at least one tensor");
  if (inst.attrs.axes.size() != 1) return InvalidArgument("cat: expects one dim");
  const Shape& first = in[0]->shape;
  int64_t rank = static_cast<int64_t>(first.size());
  std::optional<int64_t> d = WrapDim(inst.attrs.axes[0], rank);
  if (!d) return DimError(inst, inst.attrs.axes[0], first);
  Shape out = first;
  DType dtype = in[0]->dtype;
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape& s = in[i]->shape;
    bool same = static_cast<int64_t>(s.size()) == rank;
    for (int64_t k = 0; same && k < rank; ++k)
      if (k != *d && s[k] != first[k]) same = false;
    if (!same)
      return InvalidArgument("cat: shapes " + ShapeToString(first) + " and " + ShapeToString(s) +
                             " differ outside dim " + std::to_string(*d));
    if (__builtin_add_overflow(out[*d], s[*d], &out[*d]))
      return InvalidArgument("cat: dim " + std::to_string(*d) + " grows past int64");
    dtype = PromoteTypes(dtype, in[i]->dtype);
  }
  return TensorMeta{out, dtype};
}

Result<TensorMeta> InferIndexing(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  const bool adds = GetOpInfo(inst.op).arity == 3;  // {base, index, source}
  if (in.size() != (adds ? 3u : 2u)) return ArityError(inst, adds ? 3 : 2, in.size());
  const TensorMeta& x = *in[0];
  const TensorMeta& index = *in[1];
  Result<int64_t> dim = IndexDim(inst, x, index);
  if (!dim.ok()) return dim.status();
  const size_t d = static_cast<size_t>(*dim);
  auto shapes = [&] { return ShapeToString(x.shape) + " and index " + ShapeToString(index.shape); };
  if (ShapeRuleOf(inst.op) == ShapeRule::kIndexVector) {
    if (index.shape.size() != 1) return InvalidArgument(Where(inst) + ": the index must be 1-D, got " + ShapeToString(index.shape));
    Shape picked = x.shape;
    picked[d] = index.shape[0];
    if (!adds) return TensorMeta{picked, x.dtype};
    if (in[2]->shape != picked)
      return InvalidArgument(Where(inst) + ": the source must have shape " + ShapeToString(picked) + ", got " +
                             ShapeToString(in[2]->shape));
    if (Status s = SameDType(inst, x, *in[2]); !s.ok()) return s;
    return x;
  }
  if (index.shape.size() != x.shape.size())
    return InvalidArgument(Where(inst) + ": the index must have the tensor's rank: " + shapes());
  for (size_t k = 0; k < x.shape.size(); ++k)
    if (k != d && index.shape[k] > x.shape[k])
      return InvalidArgument(Where(inst) + ": the index is larger than the tensor outside dim " + std::to_string(d) + ": " + shapes());
  if (!adds) return TensorMeta{index.shape, x.dtype};
  const Shape& source = in[2]->shape;
  if (source.size() != x.shape.size())
    return InvalidArgument(Where(inst) + ": the source must have the tensor's rank: " + ShapeToString(source));
  for (size_t k = 0; k < source.size(); ++k)
    if (index.shape[k] > source[k])
      return InvalidArgument(Where(inst) + ": the index " + ShapeToString(index.shape) + " is larger than the source " +
                             ShapeToString(source));
  if (Status s = SameDType(inst, x, *in[2]); !s.ok()) return s;
  return x;
}

}  // namespace gt::shape_rules
