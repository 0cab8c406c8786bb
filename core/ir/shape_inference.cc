#include "ir/shape_inference.h"

#include <algorithm>
#include <optional>

#include "ir/shape_rules.h"

namespace gt {
namespace shape_rules {

std::string Where(const Instruction& inst) { return std::string(OpName(inst.op)); }

// Product of `dims`, or nullopt when it overflows int64: a client may name
// such a shape (2^40 x 2^40), no tensor has one, and the plain product
// would be undefined.
std::optional<int64_t> CheckedProduct(const Shape& dims) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : dims) {
    if (d == 0) return 0;
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  if (overflow) return std::nullopt;
  return n;
}

Status ArityError(const Instruction& inst, size_t want, size_t got) {
  return InvalidArgument(Where(inst) + ": expects " + std::to_string(want) + " tensor operand(s), got " +
                         std::to_string(got));
}

}  // namespace shape_rules

Result<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return InvalidArgument("shapes " + ShapeToString(a) + " and " + ShapeToString(b) + " cannot be broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Result<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, size_t rank) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (size_t d = 0; d < rank; ++d) out.push_back(static_cast<int64_t>(d));
    return out;
  }
  int64_t r = static_cast<int64_t>(rank);
  for (int64_t axis : axes) {
    int64_t a = axis < 0 ? axis + std::max<int64_t>(r, 1) : axis;  // a 0-d tensor takes 0 and -1, as in PyTorch
    if (a < 0 || a >= std::max<int64_t>(r, 1))
      return InvalidArgument("axis " + std::to_string(axis) + " is out of range for " + std::to_string(rank) + " dimensions");
    if (std::find(out.begin(), out.end(), a) != out.end())
      return InvalidArgument("axis " + std::to_string(axis) + " appears twice");
    out.push_back(a);
  }
  if (r == 0) out.clear();  // a 0-d tensor reduces over nothing
  return out;
}

namespace shape_rules {
namespace {

// Every rule is listed (no default): a new rule does not compile until it
// is inferred here.
Result<TensorMeta> InferByRule(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  switch (ShapeRuleOf(inst.op)) {
    case ShapeRule::kCreate: return InferCreate(inst);
    case ShapeRule::kBinary: return InferBinary(inst, in);
    case ShapeRule::kWhere: return InferWhere(inst, in);
    case ShapeRule::kMatmul: return InferMatmul(inst, in);
    case ShapeRule::kUnary: return InferUnary(inst, in);
    case ShapeRule::kTriangle: return InferTriangle(inst, in);
    case ShapeRule::kGradPair: return InferGradPair(inst, in);
    case ShapeRule::kRedistribute: return InferRedistribute(inst, in);
    case ShapeRule::kReduce: return InferReduce(inst, in);
    case ShapeRule::kArgReduce:
      if (in.size() != 1) return ArityError(inst, 1, in.size());
      return InferArgReduce(inst, *in[0]);
    case ShapeRule::kSumOfSquares: return InferSumOfSquares(inst, in);
    case ShapeRule::kCrossEntropy: return InferCrossEntropy(inst, in);
    case ShapeRule::kMseLoss: return InferMseLoss(inst, in);
    case ShapeRule::kMovement:
      if (in.size() != 1) return ArityError(inst, 1, in.size());
      return InferMovement(inst, *in[0]);
    case ShapeRule::kCat: return InferCat(inst, in);
    case ShapeRule::kIndexVector:
    case ShapeRule::kIndexTensor: return InferIndexing(inst, in);
    case ShapeRule::kConv: return InferConv(inst, in);
    case ShapeRule::kPool: return InferPool(inst, in);
    // Mutations change their operands and make nothing; collectives are made
    // only by dispatcher stages, which know their shapes.
    case ShapeRule::kNone: break;
  }
  return Internal(Where(inst) + " produces no tensor");
}

}  // namespace
}  // namespace shape_rules

Result<TensorMeta> InferResult(const Instruction& inst, const std::vector<const TensorMeta*>& in) {
  Result<TensorMeta> meta = shape_rules::InferByRule(inst, in);
  // Broadcasting, matmul and creation can name more elements than int64
  // counts; every later NumElements of that shape would be meaningless.
  if (meta.ok() && !shape_rules::CheckedProduct(meta->shape))
    return InvalidArgument(shape_rules::Where(inst) + ": result shape " + ShapeToString(meta->shape) +
                           " has more elements than an int64 counts");
  return meta;
}

}  // namespace gt
