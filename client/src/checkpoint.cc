#include "gt/checkpoint.h"

#include "session.h"
#include "tensor_impl.h"

namespace gt::checkpoint {
namespace {

using client_internal::FetchedData;
using client_internal::Session;
using client_internal::TensorFactory;

Instruction PlanInstruction(Op op, const std::string& plan) {
  Instruction inst;
  inst.op = op;
  inst.payload = CopyToBlob(plan.data(), plan.size());
  return inst;
}

void QueueOn(const Tensor& t, Op op, const std::string& plan, const char* what) {
  const client_internal::TensorRecord* r = TensorFactory::Record(t);
  if (!r) throw Error(Code::kInvalidArgument, std::string(what) + ": undefined tensor");
  Session::Get()->Mutate(PlanInstruction(op, plan), {r});
}

// One metadata line for `path`; a newline in it would end the line early.
std::string MetadataLine(const std::string& path) {
  if (path.find('\n') != std::string::npos)
    throw Error(Code::kInvalidArgument, "checkpoint path holds a newline: " + path);
  return "metadata " + path + "\n";
}

}  // namespace

void write_pieces(const Tensor& t, const std::string& plan) { QueueOn(t, Op::kCheckpointWrite, plan, "write_pieces"); }

void read_pieces(const Tensor& t, const std::string& plan) { QueueOn(t, Op::kCheckpointRead, plan, "read_pieces"); }

void write_metadata(const std::string& path, const std::string& text) {
  Session::Get()->Mutate(PlanInstruction(Op::kCheckpointWrite, MetadataLine(path) + text), {});
}

std::string read_metadata(const std::string& path) {
  FetchedData data = Session::Get()->Inspect(PlanInstruction(Op::kCheckpointRead, MetadataLine(path)), nullptr);
  if (!data.bytes) return {};
  return std::string(reinterpret_cast<const char*>(data.bytes->data()), data.bytes->size());
}

}  // namespace gt::checkpoint
