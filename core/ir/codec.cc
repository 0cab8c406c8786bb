#include "ir/codec.h"

#include <string>

namespace gt {

void EncodeInstruction(const Instruction& inst, wire::Instruction* out, std::vector<BlobPtr>* payloads) {
  out->set_op(static_cast<uint32_t>(inst.op));
  out->set_client(inst.client);
  out->set_seq(inst.seq);
  out->mutable_results()->Add(inst.results.begin(), inst.results.end());
  out->mutable_operands()->Add(inst.operands.begin(), inst.operands.end());
  const Attributes& a = inst.attrs;
  out->mutable_shape()->Add(a.shape.begin(), a.shape.end());
  out->set_dtype(static_cast<uint32_t>(a.dtype));
  out->mutable_axes()->Add(a.axes.begin(), a.axes.end());
  out->set_keepdims(a.keepdims);
  out->set_scalar(a.scalar);  // also meaningful without a side (kFill)
  out->set_scalar_side(static_cast<uint32_t>(a.scalar_side));
  out->set_seed(a.seed);
  out->set_sync_id(a.sync_id);
  out->mutable_numbers()->Add(a.numbers.begin(), a.numbers.end());
  if (!inst.signal.empty()) out->set_signal(inst.signal);
  if (inst.worker >= 0) out->set_worker(static_cast<uint32_t>(inst.worker) + 1);
  if (inst.payload) {
    payloads->push_back(inst.payload);
    out->set_payload_frame(static_cast<uint32_t>(payloads->size()));
  }
}

Result<Instruction> DecodeInstruction(const wire::Instruction& in, const std::vector<BlobPtr>& payloads) {
  if (in.op() >= static_cast<uint32_t>(Op::kCount))
    return InvalidArgument("unknown op code " + std::to_string(in.op()) + " (seq " + std::to_string(in.seq()) + ")");
  if (in.dtype() >= static_cast<uint32_t>(DType::kCount))
    return InvalidArgument("unknown dtype code " + std::to_string(in.dtype()) + " (seq " + std::to_string(in.seq()) + ")");
  if (in.scalar_side() > static_cast<uint32_t>(ScalarSide::kLeft))
    return InvalidArgument("unknown scalar_side " + std::to_string(in.scalar_side()));
  Instruction inst;
  inst.op = static_cast<Op>(in.op());
  inst.client = in.client();
  inst.seq = in.seq();
  inst.results.assign(in.results().begin(), in.results().end());
  inst.operands.assign(in.operands().begin(), in.operands().end());
  Attributes& a = inst.attrs;
  a.shape.assign(in.shape().begin(), in.shape().end());
  a.dtype = static_cast<DType>(in.dtype());
  a.axes.assign(in.axes().begin(), in.axes().end());
  a.keepdims = in.keepdims();
  a.scalar = in.scalar();
  a.scalar_side = static_cast<ScalarSide>(in.scalar_side());
  a.seed = in.seed();
  a.sync_id = in.sync_id();
  a.numbers.assign(in.numbers().begin(), in.numbers().end());
  inst.signal = in.signal();
  if (in.worker() > static_cast<uint32_t>(INT32_MAX))
    return InvalidArgument("worker " + std::to_string(in.worker()) + " out of range in " + inst.Describe());
  inst.worker = static_cast<int32_t>(in.worker()) - 1;
  if (uint32_t frame = in.payload_frame(); frame != 0) {
    if (frame > payloads.size())
      return InvalidArgument("payload frame " + std::to_string(frame) + " of " + inst.Describe() +
                             " is missing (message has " + std::to_string(payloads.size()) + ")");
    inst.payload = payloads[frame - 1];
  }
  return inst;
}

wire::OpError MakeOpError(const OpRef& ref, const Status& status, const std::string& host) {
  wire::OpError e;
  e.set_client(ref.client);
  e.set_seq(ref.seq);
  e.set_op(static_cast<uint32_t>(ref.op));
  e.set_code(static_cast<uint32_t>(status.code()));
  e.set_message(WireText(status.message()));
  e.set_host(host);
  return e;
}

namespace {

// The length of the valid UTF-8 sequence at text[i], or 0 (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF).
size_t Utf8SequenceAt(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b = byte(i);
  if (b < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b >= 0xC2 && b <= 0xDF) n = 2;
  else if (b >= 0xE0 && b <= 0xEF) n = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
  else if (b >= 0xF0 && b <= 0xF4) n = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
  if (n == 0 || i + n > text.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

}  // namespace

std::string WireText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (const size_t n = Utf8SequenceAt(text, i)) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    static constexpr char kHex[] = "0123456789abcdef";
    const auto b = static_cast<unsigned char>(text[i++]);
    out += {'\\', 'x', kHex[b >> 4], kHex[b & 15]};
  }
  return out;
}

Status OpErrorToStatus(const wire::OpError& error) {
  uint32_t code = error.code();
  if (code == 0 || code >= static_cast<uint32_t>(Code::kCount)) code = static_cast<uint32_t>(Code::kInternal);
  return Status(static_cast<Code>(code), error.message());
}

}  // namespace gt
