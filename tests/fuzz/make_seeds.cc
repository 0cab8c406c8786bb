// Writes the seed corpora of the codec and dispatcher targets with gt's own
// encoders, so that each seed is a message or program a client or host
// really sends:
//
//   build-fuzz/fuzz/gt_fuzz_make_seeds tests/fuzz/corpus
//
// writes corpus/codec/*.bin (frames.h layout) and corpus/dispatcher/*.bin
// (program.h byte code). The manifest and signal_config seeds are YAML
// written by hand. Run it after a change to either format.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ir/codec.h"
#include "frames.h"
#include "gt/op_attrs.h"
#include "gt/unit.h"
#include "program.h"

namespace gt::fuzz {
namespace {

namespace fs = std::filesystem;

void WriteSeed(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / (name + ".bin"), std::ios::binary) << bytes;
}

Instruction Op1(Op op, std::vector<TensorId> operands, TensorId result, Shape shape = {}) {
  Instruction inst;
  inst.op = op;
  inst.operands = std::move(operands);
  if (result) inst.results = {result};
  inst.attrs.shape = std::move(shape);
  return inst;
}

// ---- codec: whole messages -------------------------------------------------

std::string Message(wire::Envelope env, const std::vector<Instruction>& batch) {
  std::vector<BlobPtr> payloads;
  for (const Instruction& inst : batch) EncodeInstruction(inst, env.add_instructions(), &payloads);
  FuzzMessage m{env.SerializeAsString(), {}};
  for (const BlobPtr& p : payloads) m.data.emplace_back(reinterpret_cast<const char*>(p->data()), p->size());
  return JoinMessage(m);
}

wire::Envelope Kind(wire::Envelope::Kind kind) {
  wire::Envelope env;
  env.set_kind(kind);
  return env;
}

UnitTemplate AddRelu() {
  UnitTemplate unit;
  unit.inputs = 2;
  unit.body = {Op1(Op::kAdd, {1, 2}, 3), Op1(Op::kRelu, {3}, 4), MakeFree(0, 0, {3})};
  return unit;
}

void WriteCodecSeeds(const fs::path& dir) {
  Instruction scaled = MakeScalarBinary(Op::kMul, 2.5, ScalarSide::kLeft);
  scaled.operands = {1};
  scaled.results = {2};
  Instruction sum = Op1(Op::kSum, {2}, 3);
  sum.attrs.axes = {-1};
  sum.attrs.keepdims = true;
  WriteSeed(dir, "batch", Message(Kind(wire::Envelope::BATCH),
                                  {Op1(Op::kRandn, {}, 1, {2, 3}), scaled, sum, MakeFetch(0, 4, 3), MakeSync(0, 5, 7)}));
  const float bytes[2] = {1, 2};
  Instruction from = Op1(Op::kFromBytes, {}, 1, {2});
  from.payload = CopyToBlob(bytes, sizeof bytes);
  WriteSeed(dir, "from_bytes", Message(Kind(wire::Envelope::BATCH), {from}));
  WriteSeed(dir, "unit", Message(Kind(wire::Envelope::BATCH),
                                 {MakeDefineUnit(0, 1, 9, EncodeUnit(AddRelu())), MakeRunUnit(0, 2, 9, {1, 2}, {4}, {})}));
  ConfigureSpec config{.signal = "s1", .shard_axis = 0, .workers = {0, 1}, .backward = "s2"};
  Instruction marker = MakeHotMarker(Op::kHotStart, {.sequence_id = 0, .length = 3});
  WriteSeed(dir, "control", Message(Kind(wire::Envelope::BATCH),
                                    {MakeConfigure(1, config), marker, MakeMembership({0, 1}, LostWorker{2, "w2"})}));
  CollectiveSpec group{.group = {0, 1}, .rank = 1, .rendezvous = "127.0.0.1:9", .store_key = "k", .generation = 3};
  Instruction gather = MakeCollective(Op::kAllGather, {.group = {0, 1}, .rank = 0, .rendezvous = "h:1", .sizes = {2, 2}});
  WriteSeed(dir, "collectives", Message(Kind(wire::Envelope::BATCH), {MakeCollective(Op::kBroadcast, group), gather}));
  wire::Envelope done = Kind(wire::Envelope::SYNC_DONE);
  done.set_sync_id(7);
  *done.add_errors() = MakeOpError({1, 3, Op::kAdd}, InvalidArgument("shapes [2] and [3]"), "worker-0");
  WriteSeed(dir, "sync_done", Message(done, {}));
  wire::Envelope hello = Kind(wire::Envelope::HELLO);
  hello.set_token(42);
  WriteSeed(dir, "hello", Message(hello, {}));
}

// ---- dispatcher: programs --------------------------------------------------

ProgramOp P(Instruction inst, std::string signal = "") {
  ProgramOp op;
  op.inst = std::move(inst);
  op.inst.signal = std::move(signal);
  return op;
}

ProgramOp Configure(const ConfigureSpec& spec) {
  ProgramOp op = P(MakeConfigure(0, spec), spec.signal);
  op.inst.payload = nullptr;
  if (!spec.backward.empty()) {
    op.payload = PayloadKind::kSignalName;
    op.bytes = spec.backward;
  }
  return op;
}

void WriteDispatcherSeeds(const fs::path& dir) {
  WriteSeed(dir, "eager", WriteProgram({P(Op1(Op::kRandn, {}, 1, {2, 3})), P(Op1(Op::kOnes, {}, 2, {2, 3})),
                                        P(Op1(Op::kAdd, {1, 2}, 3)), P(MakeFetch(0, 0, 3)), P(MakeFree(0, 0, {1, 2}))}));
  Instruction sum = Op1(Op::kSum, {3}, 4);
  sum.attrs.axes = {0};
  WriteSeed(dir, "sharded",
            WriteProgram({Configure({.signal = "s1", .shard_axis = 0, .workers = {0, 1}}),
                          Configure({.signal = "s2", .replicated = true}), P(Op1(Op::kRandn, {}, 1, {4, 2}), "s1"),
                          P(Op1(Op::kOnes, {}, 2, {2, 2}), "s2"), P(Op1(Op::kMatmul, {1, 2}, 3), "s1"),
                          P(sum, "s1"), P(MakeFetch(0, 0, 4))}));
  Instruction start = MakeHotMarker(Op::kHotStart, {});
  Instruction end = MakeHotMarker(Op::kHotEnd, {});
  WriteSeed(dir, "compile_scope",
            WriteProgram({Configure({.signal = "s3", .compile = true}), P(Op1(Op::kZeros, {}, 1, {3})),
                          P(start, "s3"), P(Op1(Op::kExp, {1}, 2), "s3"), P(Op1(Op::kNeg, {2}, 3), "s3"),
                          P(end, "s3"), P(MakeFetch(0, 0, 3))}));
  ProgramOp define = P(MakeDefineUnit(0, 0, 9, nullptr));
  define.payload = PayloadKind::kUnit;
  define.unit_inputs = 2;
  for (const Instruction& body : AddRelu().body) define.unit.push_back(P(body));
  WriteSeed(dir, "unit", WriteProgram({P(Op1(Op::kRand, {}, 1, {2})), P(Op1(Op::kRand, {}, 2, {2})), define,
                                       P(MakeRunUnit(0, 0, 9, {1, 2}, {4}, {}))}));
  ProgramOp from = P(Op1(Op::kFromBytes, {}, 1, {2}));
  from.payload = PayloadKind::kBytes;
  from.bytes = std::string(8, '\0');
  Instruction arange = Op1(Op::kArange, {}, 2);
  arange.attrs.numbers = {0, 10, 2};
  Instruction reshape = Op1(Op::kReshape, {2}, 3, {5, 1});
  Instruction cat = Op1(Op::kCat, {3, 3}, 4);
  cat.attrs.axes = {0};
  WriteSeed(dir, "movement", WriteProgram({from, P(arange), P(reshape), P(cat), P(MakeFetch(0, 0, 4))}));
}

}  // namespace
}  // namespace gt::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  gt::fuzz::WriteCodecSeeds(std::filesystem::path(argv[1]) / "codec");
  gt::fuzz::WriteDispatcherSeeds(std::filesystem::path(argv[1]) / "dispatcher");
  return 0;
}
