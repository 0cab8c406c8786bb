// The gt instruction: the one intermediate representation shared by the
// client, the dispatcher, the workers and every plugin.
//
// On the wire an instruction is encoded with the schema in core/ir/wire.proto
// (see core/ir/codec.h); tensor bytes never enter that encoding, they travel
// as their own ZeroMQ frames and reach a backend as a Blob without a copy.
//
// Thread-safety: plain values. A Blob is immutable and may be shared freely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gt/dtype.h"
#include "gt/op.h"

namespace gt {

using TensorId = uint64_t;  // unique within one client's namespace

// Ids a dispatcher stage makes for shards, copies and temporaries (the
// sharding modifier): far above any id a client assigns, so they never meet
// in the client's namespace.
inline constexpr TensorId kPhysicalIdBase = TensorId{1} << 62;
using ClientId = uint64_t;  // assigned by the dispatcher, never by a client
using Shape = std::vector<int64_t>;

// Immutable bytes with shared ownership (a received ZeroMQ frame, a tensor's
// storage on its way out, or a plain buffer).
class Blob {
 public:
  virtual ~Blob() = default;
  virtual const std::byte* data() const = 0;
  virtual size_t size() const = 0;
};
using BlobPtr = std::shared_ptr<const Blob>;

// A Blob that owns a copy of `bytes`.
BlobPtr CopyToBlob(const void* bytes, size_t size);

// Where a scalar operand of a binary op sits: `a - 2` is kRight, `2 - a` kLeft.
enum class ScalarSide : uint8_t { kNone = 0, kRight = 1, kLeft = 2 };

struct Attributes {
  Shape shape;                  // creation shape; reshape target
  DType dtype = DType::kFloat32;
  std::vector<int64_t> axes;    // reduction axes (empty = all); transpose dims
  bool keepdims = false;
  double scalar = 0;            // binary ops with scalar_side != kNone; kFill
  ScalarSide scalar_side = ScalarSide::kNone;
  uint64_t seed = 0;            // kRandn; 0 = the backend's generator
  uint64_t sync_id = 0;         // kSync
  std::vector<double> numbers;  // kArange: {start, end, step}
};

struct Instruction {
  Op op = Op::kSync;
  ClientId client = 0;            // namespace, stamped by the dispatcher
  uint64_t seq = 0;               // client's sequence number; names this op in errors
  std::vector<TensorId> results;
  std::vector<TensorId> operands;
  Attributes attrs;
  std::string signal;             // innermost signal scope; empty outside any
  BlobPtr payload;                // kFromBytes: the bytes; kConfigure, collectives: see op.h
  int32_t worker = -1;            // dispatcher stages: the worker index the router must send
                                  // this to; -1 lets the router choose (operands' worker)

  // One line for logs and error messages: "add #12 %5 <- %3, %4 ...".
  std::string Describe() const;
};

// Which instruction an error is about (the instruction itself may be gone).
struct OpRef {
  ClientId client = 0;
  uint64_t seq = 0;
  Op op = Op::kSync;
};
inline OpRef RefOf(const Instruction& inst) { return {inst.client, inst.seq, inst.op}; }

// Human-readable "[2, 3]".
std::string ShapeToString(const Shape& shape);
// Product of dims; 1 for a scalar.
int64_t NumElements(const Shape& shape);

}  // namespace gt
