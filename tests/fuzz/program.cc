// The dispatcher target's byte code (program.h): reader and writer.
#include "program.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "gt/unit.h"

namespace gt::fuzz {

const double kValues[16] = {0,     1,     -1,     2,    0.5,  -0.0,     3,        10, 1e-300, 1e300,
                            std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN(), 0x1p63, -0x1p63, 4};

namespace {

constexpr uint8_t kPhysicalByte = 0xe0;
constexpr uint8_t kWorkerByte = 0xf0;
constexpr int64_t kBigDims[4] = {int64_t{1} << 20, int64_t{1} << 31, int64_t{1} << 40, int64_t{1} << 62};
constexpr uint8_t kOpCodes = static_cast<uint8_t>(Op::kCount) + 1;
constexpr uint8_t kDTypeCodes = static_cast<uint8_t>(DType::kCount) + 1;

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  uint8_t Byte() { return at_ < size_ ? data_[at_++] : 0; }
  size_t Count(size_t max) { return Byte() % (max + 1); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

[[noreturn]] void Unwritable(const char* what) {
  std::fprintf(stderr, "WriteProgram: the byte code cannot express this %s\n", what);
  std::abort();
}

// ---- one field: its value from a byte, and the byte for a value ----------

TensorId IdOf(uint8_t b) { return b >= kPhysicalByte ? kPhysicalIdBase + (b & 31) : b % 32; }
uint8_t IdByte(TensorId id) {
  if (id < 32) return static_cast<uint8_t>(id);
  if (id >= kPhysicalIdBase && id < kPhysicalIdBase + 32) return static_cast<uint8_t>(kPhysicalByte + (id & 31));
  Unwritable("id");
}

int64_t DimOf(uint8_t b) {
  if (b < 0xf0) return b % 8;
  return b < 0xfc ? -1 : kBigDims[b - 0xfc];
}
uint8_t DimByte(int64_t d) {
  if (d >= 0 && d < 8) return static_cast<uint8_t>(d);
  if (d == -1) return 0xf0;
  for (int i = 0; i < 4; ++i)
    if (d == kBigDims[i]) return static_cast<uint8_t>(0xfc + i);
  Unwritable("dim");
}

double ValueOf(uint8_t b) { return kValues[b % 16]; }
uint8_t ValueByte(double v) {
  for (int i = 0; i < 16; ++i)
    if (std::memcmp(&kValues[i], &v, sizeof v) == 0) return static_cast<uint8_t>(i);
  Unwritable("scalar");
}

std::string SignalOf(uint8_t b) { return b % 4 == 0 ? "" : "s" + std::to_string(b % 4); }
uint8_t SignalByte(const std::string& s) {
  for (uint8_t b = 0; b < 4; ++b)
    if (SignalOf(b) == s) return b;
  Unwritable("signal");
}

int32_t WorkerOf(uint8_t b) { return b < kWorkerByte ? -1 : b & 3; }
uint8_t WorkerByte(int32_t w) {
  if (w == -1) return 0;
  if (w >= 0 && w < 4) return static_cast<uint8_t>(kWorkerByte + w);
  Unwritable("worker");
}

// ---- instructions ----------------------------------------------------------

template <typename T, typename F>
std::vector<T> ReadList(Reader& in, size_t max, F of) {
  std::vector<T> out(in.Count(max));
  for (T& v : out) v = of(in.Byte());
  return out;
}

void ReadAttrs(Reader& in, Attributes& a) {
  a.shape = ReadList<int64_t>(in, 4, DimOf);
  a.dtype = static_cast<DType>(in.Byte() % kDTypeCodes);
  a.axes = ReadList<int64_t>(in, 4, [](uint8_t b) { return int64_t{static_cast<int8_t>(b)}; });
  a.scalar = ValueOf(in.Byte());
  a.seed = in.Byte();
  a.sync_id = in.Byte();
  a.numbers = ReadList<double>(in, 3, ValueOf);
}

ProgramOp ReadOp(Reader& in, bool nested);

void ReadPayload(Reader& in, ProgramOp& op, bool nested) {
  op.payload = static_cast<PayloadKind>(in.Byte() % 4);
  if (op.payload == PayloadKind::kBytes) {
    op.bytes.resize(in.Byte());
    for (char& c : op.bytes) c = static_cast<char>(in.Byte());
  } else if (op.payload == PayloadKind::kSignalName) {
    op.bytes = SignalOf(in.Byte());
  } else if (op.payload == PayloadKind::kUnit && nested) {
    op.payload = PayloadKind::kNone;  // a unit's body holds no payloads
  } else if (op.payload == PayloadKind::kUnit) {
    op.unit_inputs = in.Count(7);
    op.unit.resize(in.Count(7));
    for (ProgramOp& body : op.unit) body = ReadOp(in, true);
  }
}

ProgramOp ReadOp(Reader& in, bool nested) {
  ProgramOp op;
  Instruction& inst = op.inst;
  inst.op = static_cast<Op>(in.Byte() % kOpCodes);
  const uint8_t flags = in.Byte();
  inst.attrs.keepdims = flags & 1;
  inst.attrs.scalar_side = static_cast<ScalarSide>((flags >> 1) & 3);
  op.repeat_seq = flags & 8;
  inst.signal = SignalOf(in.Byte());
  inst.results = ReadList<TensorId>(in, 2, IdOf);
  inst.operands = ReadList<TensorId>(in, 3, IdOf);
  ReadAttrs(in, inst.attrs);
  inst.worker = WorkerOf(in.Byte());
  ReadPayload(in, op, nested);
  return op;
}

template <typename T, typename F>
void WriteList(std::string& out, const std::vector<T>& values, size_t max, F byte_of) {
  if (values.size() > max) Unwritable("list length");
  out += static_cast<char>(values.size());
  for (const T& v : values) out += static_cast<char>(byte_of(v));
}

uint8_t SmallByte(uint64_t v, const char* what) {
  if (v > 255) Unwritable(what);
  return static_cast<uint8_t>(v);
}

void WriteOp(std::string& out, const ProgramOp& op, bool nested) {
  const Instruction& inst = op.inst;
  const Attributes& a = inst.attrs;
  out += static_cast<char>(inst.op);
  out += static_cast<char>((a.keepdims ? 1 : 0) | static_cast<int>(a.scalar_side) << 1 | (op.repeat_seq ? 8 : 0));
  out += static_cast<char>(SignalByte(inst.signal));
  WriteList(out, inst.results, 2, IdByte);
  WriteList(out, inst.operands, 3, IdByte);
  WriteList(out, a.shape, 4, DimByte);
  out += static_cast<char>(a.dtype);
  WriteList(out, a.axes, 4, [](int64_t axis) {
    if (axis < -128 || axis > 127) Unwritable("axis");
    return static_cast<uint8_t>(static_cast<int8_t>(axis));
  });
  out += static_cast<char>(ValueByte(a.scalar));
  out += static_cast<char>(SmallByte(a.seed, "seed"));
  out += static_cast<char>(SmallByte(a.sync_id, "sync_id"));
  WriteList(out, a.numbers, 3, ValueByte);
  out += static_cast<char>(WorkerByte(inst.worker));
  out += static_cast<char>(op.payload);
  if (op.payload == PayloadKind::kBytes) {
    out += static_cast<char>(SmallByte(op.bytes.size(), "payload size"));
    out += op.bytes;
  } else if (op.payload == PayloadKind::kSignalName) {
    out += static_cast<char>(SignalByte(op.bytes));
  } else if (op.payload == PayloadKind::kUnit) {
    if (nested) Unwritable("unit inside a unit");
    if (op.unit_inputs > 7 || op.unit.size() > 7) Unwritable("unit size");
    out += static_cast<char>(op.unit_inputs);
    out += static_cast<char>(op.unit.size());
    for (const ProgramOp& body : op.unit) WriteOp(out, body, true);
  }
}

BlobPtr PayloadOf(const ProgramOp& op) {
  switch (op.payload) {
    case PayloadKind::kNone: return nullptr;
    case PayloadKind::kBytes:
    case PayloadKind::kSignalName: return CopyToBlob(op.bytes.data(), op.bytes.size());
    case PayloadKind::kUnit: {
      UnitTemplate unit;
      unit.inputs = op.unit_inputs;
      for (const ProgramOp& body : op.unit) unit.body.push_back(body.inst);
      return EncodeUnit(unit);
    }
  }
  return nullptr;
}

}  // namespace

std::vector<ProgramOp> ReadProgram(const uint8_t* data, size_t size, size_t max_ops) {
  Reader in(data, size);
  std::vector<ProgramOp> program;
  while (!in.done() && program.size() < max_ops) program.push_back(ReadOp(in, false));
  return program;
}

std::vector<Instruction> ToInstructions(const std::vector<ProgramOp>& program) {
  std::vector<Instruction> out;
  uint64_t seq = 0;
  for (const ProgramOp& op : program) {
    if (!op.repeat_seq || seq == 0) ++seq;
    out.push_back(op.inst);
    out.back().seq = seq;
    out.back().payload = PayloadOf(op);
  }
  return out;
}

std::string WriteProgram(const std::vector<ProgramOp>& program) {
  std::string out;
  for (const ProgramOp& op : program) WriteOp(out, op, false);
  return out;
}

}  // namespace gt::fuzz
