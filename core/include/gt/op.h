// The closed operation set of gt.
//
// Every instruction names one Op. Adding an op means: a value here, a row in
// kOpTable (op.cc, checked against kCount at compile time), a shape rule in
// shape_inference.cc, a kernel in each backend, and a case in the conformance
// test (tests/conformance_test.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gt {

enum class Op : uint16_t {
  // Creation: no operands, one result.
  kFromBytes = 0,  // payload bytes + shape + dtype
  kRandn,          // shape, dtype, seed (0: backend's generator)
  kZeros,
  kOnes,
  kRand,    // uniform [0, 1); shape, dtype, seed
  kArange,  // attrs.numbers = {start, end, step}; dtype
  // Elementwise binary: (a, b) or (a, scalar) / (scalar, a); broadcasting.
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kGt,  // comparisons yield a floating mask (1.0 / 0.0), as gt's API promises
  kLt,
  kGe,
  kLe,
  kEq,
  // Contraction.
  kMatmul,
  // Elementwise unary.
  kRelu,
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kSqrt,
  kNeg,
  kAbs,
  kClone,
  kSoftmax,     // axes = {dim}
  kLogSoftmax,  // axes = {dim}
  // Reductions: axes (empty = all), keepdims.
  kSum,
  kMean,
  kMax,
  kMin,
  // Movement.
  kReshape,    // shape (may hold one -1)
  kTranspose,  // axes = {dim0, dim1}; empty = swap the last two
  kUnsqueeze,  // axes = {dim}
  kSqueeze,    // axes = {dim}; empty = every dimension of size 1
  kPermute,    // axes = the new order of dimensions
  kSlice,      // axes = {dim, start, stop, step}; start/stop already clamped, step > 0
  kSelect,     // axes = {dim, index}; removes dim
  kCat,        // operands concatenated along axes = {dim}
  // Mutation: no result; operands[0] is changed in place.
  kCopyInto,  // operands = {destination, source}; source broadcast and cast to destination
  kFill,      // operands = {destination}; every element set to attrs.scalar
  // Control: produce no tensor.
  kFetch,       // send operand's bytes back to the client
  kFree,        // forget operands
  kSync,        // barrier; carries attrs.sync_id
  kDropClient,  // free every tensor of the instruction's client
  // Hot paths and compiled units (see gt/unit.h). Control ops: they produce no
  // tensor of their own kind; a backend ignores the markers.
  kHotStart,    // marker: a sequence starts; attrs.seed = signature id (0: a compile scope
                // opened by the client), attrs.axes = {length} (empty when not known)
  kHotEnd,      // marker: the sequence kHotStart opened ends; same attributes
  kDefineUnit,  // payload = EncodeUnit(template); attrs.seed = unit key
  kRunUnit,     // attrs.seed = unit key; operands = the unit's inputs; results = its
                // outputs (UnitInterface order); attrs.axes = indexes of the operands it frees
  kCount
};

enum class OpKind : uint8_t { kCreate, kBinary, kContract, kUnary, kReduce, kMovement, kMutate, kControl };

struct OpInfo {
  Op op;
  std::string_view name;  // stable, lower-case; used in logs, metrics labels, errors
  OpKind kind;
};

// REQUIRES: op < Op::kCount.
const OpInfo& GetOpInfo(Op op);
inline std::string_view OpName(Op op) { return GetOpInfo(op).name; }
inline OpKind KindOf(Op op) { return GetOpInfo(op).kind; }
// Inverse of OpName.
std::optional<Op> ParseOp(std::string_view name);
// True for ops that yield one tensor result (kRunUnit yields several and is a
// control op: see gt/unit.h).
inline bool ProducesTensor(Op op) { return KindOf(op) != OpKind::kControl && KindOf(op) != OpKind::kMutate; }

}  // namespace gt
