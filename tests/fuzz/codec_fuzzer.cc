// Fuzz target: one message as the dispatcher receives it (routing id,
// envelope, data frames; layout in frames.h) through its wire decoding,
// DecodeFrames and DecodeInstruction, then DecodeUnit on every data frame.
//
// Beyond "no crash" it checks round trips: what decodes re-encodes
// (EncodeInstruction / EncodeUnit) into bytes that decode to the same thing,
// and every decoded instruction's op-specific readers (op_attrs.h) and shape
// rule accept whatever the wire holds.
#include <zmq.hpp>

#include "ir/codec.h"
#include "frames.h"
#include "fuzz_check.h"
#include "gt/op_attrs.h"
#include "gt/unit.h"
#include "ir/shape_inference.h"
#include "net/transport.h"

namespace gt::fuzz {
namespace {

std::vector<zmq::message_t> ToFrames(const std::string& envelope, const std::vector<BlobPtr>& data) {
  std::vector<zmq::message_t> frames;
  frames.emplace_back(std::string_view("fuzz-client"));
  frames.emplace_back(envelope.data(), envelope.size());
  for (const BlobPtr& blob : data) frames.emplace_back(blob->data(), blob->size());
  return frames;
}

std::vector<BlobPtr> ToBlobs(const std::vector<std::string>& data) {
  std::vector<BlobPtr> blobs;
  for (const std::string& frame : data) blobs.push_back(CopyToBlob(frame.data(), frame.size()));
  return blobs;
}

// Operand metadata for a shape rule: operand i has the instruction's shape
// without its first i dims, so that binary ops and matmul see shapes that
// differ.
std::vector<TensorMeta> OperandMetas(const Instruction& inst) {
  std::vector<TensorMeta> metas;
  const Shape& shape = inst.attrs.shape;
  for (size_t i = 0; i < inst.operands.size(); ++i)
    metas.push_back({Shape(shape.begin() + static_cast<std::ptrdiff_t>(std::min(i, shape.size())), shape.end()),
                     inst.attrs.dtype});
  return metas;
}

// Every reader a host applies to an instruction of this op, on what the
// wire gave: none may crash, whatever the fields hold.
void ReadAttributes(const Instruction& inst) {
  (void)inst.Describe();
  switch (inst.op) {
    case Op::kHotStart:
    case Op::kHotEnd: (void)ReadHotMarker(inst); break;
    case Op::kRunUnit: (void)ConsumedOperands(inst); break;
    case Op::kConfigure: (void)ReadConfigure(inst); break;
    case Op::kMembership:
      (void)MembershipWorkers(inst);
      (void)MembershipLostWorker(inst);
      break;
    case Op::kBroadcast:
    case Op::kAllReduce:
    case Op::kAllGather:
    case Op::kReduceScatter: (void)ReadCollective(inst); break;
    default: break;
  }
  if (!ProducesTensor(inst.op)) return;
  std::vector<TensorMeta> metas = OperandMetas(inst);
  std::vector<const TensorMeta*> operands;
  for (const TensorMeta& m : metas) operands.push_back(&m);
  (void)InferResult(inst, operands);
}

// decode(encode(decoded)) == decoded, through a serialized envelope and
// DecodeFrames as a peer would send it.
void CheckRoundTrip(wire::Envelope::Kind kind, const std::vector<Instruction>& decoded) {
  wire::Envelope env;
  env.set_kind(kind);
  std::vector<BlobPtr> payloads;
  for (const Instruction& inst : decoded) EncodeInstruction(inst, env.add_instructions(), &payloads);
  Result<WireMessage> again = DecodeFrames(ToFrames(env.SerializeAsString(), payloads), true);
  Check(again.ok(), "re-encoded envelope does not decode: " + again.status().ToString());
  Check(static_cast<size_t>(again->envelope.instructions_size()) == decoded.size(), "instruction count changed");
  for (size_t i = 0; i < decoded.size(); ++i) {
    Result<Instruction> inst = DecodeInstruction(again->envelope.instructions(static_cast<int>(i)), again->frames);
    Check(inst.ok(), "re-encoded " + decoded[i].Describe() + " does not decode: " + inst.status().ToString());
    const std::string diff = Difference(decoded[i], *inst);
    Check(diff.empty(), "round trip of " + decoded[i].Describe() + " changed its " + diff);
  }
}

void CheckEnvelope(const WireMessage& msg) {
  std::vector<Instruction> decoded;
  for (const wire::Instruction& w : msg.envelope.instructions()) {
    Result<Instruction> inst = DecodeInstruction(w, msg.frames);
    if (!inst.ok()) {
      Check(inst.status().code() == Code::kInvalidArgument, "decode error of the wrong kind");
      continue;
    }
    ReadAttributes(*inst);
    decoded.push_back(std::move(*inst));
  }
  for (const wire::OpError& e : msg.envelope.errors()) (void)OpErrorToStatus(e).ToString();
  CheckRoundTrip(msg.envelope.kind(), decoded);
}

// A data frame read as a unit template (a kDefineUnit's payload).
void CheckUnit(const Blob& bytes) {
  Result<UnitTemplate> unit = DecodeUnit(bytes);
  if (!unit.ok()) return;
  for (const Instruction& inst : unit->body) ReadAttributes(inst);
  Result<UnitInterface> shape = AnalyzeUnit(*unit);
  Result<UnitTemplate> again = DecodeUnit(*EncodeUnit(*unit));
  Check(again.ok(), "re-encoded unit does not decode: " + again.status().ToString());
  Check(again->inputs == unit->inputs && again->body.size() == unit->body.size(), "unit round trip changed its size");
  for (size_t i = 0; i < unit->body.size(); ++i) {
    const std::string diff = Difference(unit->body[i], again->body[i]);
    Check(diff.empty(), "unit round trip changed body[" + std::to_string(i) + "]'s " + diff);
  }
  Check(AnalyzeUnit(*again).ok() == shape.ok(), "unit analysis changed after a round trip");
}

}  // namespace
}  // namespace gt::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gt::fuzz::QuietProtobuf();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gt;
  using namespace gt::fuzz;
  const FuzzMessage m = SplitMessage(data, size);
  const std::vector<BlobPtr> blobs = ToBlobs(m.data);
  Result<WireMessage> msg = DecodeFrames(ToFrames(m.envelope, blobs), true);
  if (!msg.ok()) return 0;
  CheckEnvelope(*msg);
  for (const BlobPtr& frame : msg->frames) CheckUnit(*frame);
  return 0;
}
