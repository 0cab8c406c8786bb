#include "sequence.h"

#include <cstring>

namespace gt::sequence {
namespace {

template <typename T>
void Put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void PutInts(std::string& out, const std::vector<int64_t>& values) {
  Put<uint32_t>(out, static_cast<uint32_t>(values.size()));
  for (int64_t v : values) Put(out, v);
}

// Writes `bytes` at `*at` and moves it past them.
void Write(char** at, const void* data, size_t bytes) {
  if (bytes == 0) return;  // an empty vector's data() may be null
  std::memcpy(*at, data, bytes);
  *at += bytes;
}

// The fixed-size part of an instruction's entry: op and attributes, and the
// lengths of the arrays that follow it.
#pragma pack(push, 1)
struct FixedEntry {
  uint16_t op;
  uint8_t dtype, keepdims, scalar_side;
  double scalar;
  uint64_t seed;
  uint32_t shape, axes, numbers, operands;
};
#pragma pack(pop)

// An operand's entry: 'i' and an input index, or 'p' and a production index.
constexpr size_t kOperandEntry = 1 + sizeof(uint64_t);

// Bytes of `inst`'s entry, the shapes of new inputs not included.
size_t EntrySize(const Instruction& inst) {
  const Attributes& a = inst.attrs;
  return sizeof(FixedEntry) + sizeof(int64_t) * (a.shape.size() + a.axes.size() + a.numbers.size()) +
         kOperandEntry * inst.operands.size();
}

// Writes the op, attributes and array lengths of `inst`.
void WriteOpAndAttributes(char** at, const Instruction& inst) {
  const Attributes& a = inst.attrs;
  const FixedEntry fixed{static_cast<uint16_t>(inst.op), static_cast<uint8_t>(a.dtype),
                         static_cast<uint8_t>(a.keepdims ? 1 : 0), static_cast<uint8_t>(a.scalar_side), a.scalar,
                         a.seed, static_cast<uint32_t>(a.shape.size()), static_cast<uint32_t>(a.axes.size()),
                         static_cast<uint32_t>(a.numbers.size()), static_cast<uint32_t>(inst.operands.size())};
  Write(at, &fixed, sizeof fixed);
  Write(at, a.shape.data(), a.shape.size() * sizeof(int64_t));
  Write(at, a.axes.data(), a.axes.size() * sizeof(int64_t));
  Write(at, a.numbers.data(), a.numbers.size() * sizeof(double));
}

void WriteOperand(char** at, char kind, uint64_t index) {
  **at = kind;
  ++*at;
  Write(at, &index, sizeof index);
}

}  // namespace

const TensorMeta* MetaTracker::Find(ClientId client, TensorId id) const {
  auto c = clients_.find(client);
  if (c == clients_.end()) return nullptr;
  auto it = c->second.find(id);
  return it == c->second.end() ? nullptr : &it->second;
}

bool MetaTracker::KnowsOperands(const Instruction& inst) const {
  auto c = clients_.find(inst.client);
  if (c == clients_.end()) return inst.operands.empty();
  for (TensorId id : inst.operands)
    if (!c->second.count(id)) return false;
  return true;
}

void MetaTracker::Observe(const Instruction& inst) {
  if (inst.op == Op::kDropClient) {
    clients_.erase(inst.client);
    return;
  }
  auto& tensors = clients_[inst.client];
  if (inst.op == Op::kFree) {
    for (TensorId id : inst.operands) tensors.erase(id);
    return;
  }
  if (inst.op == Op::kRunUnit)
    for (int64_t index : inst.attrs.axes)
      if (index >= 0 && static_cast<size_t>(index) < inst.operands.size()) tensors.erase(inst.operands[index]);
  if (!ProducesTensor(inst.op) || inst.results.size() != 1) {
    for (TensorId r : inst.results) tensors.erase(r);
    return;
  }
  std::vector<const TensorMeta*>& metas = scratch_;
  metas.clear();
  for (TensorId id : inst.operands) {
    auto it = tensors.find(id);
    if (it == tensors.end()) {
      tensors.erase(inst.results[0]);
      return;
    }
    metas.push_back(&it->second);
  }
  Result<TensorMeta> meta = InferResult(inst, metas);
  if (meta.ok()) {
    tensors[inst.results[0]] = std::move(*meta);
  } else {
    tensors.erase(inst.results[0]);
  }
}

void MetaTracker::Forget(ClientId client, TensorId id) {
  auto c = clients_.find(client);
  if (c != clients_.end()) c->second.erase(id);
}

size_t MetaTracker::size() const {
  size_t n = 0;
  for (const auto& [client, tensors] : clients_) n += tensors.size();
  return n;
}

bool Sequenceable(const Instruction& inst) {
  // A collective pairs with its peers' on other workers; it stays a single
  // instruction so that every member meets it in stream order.
  if (KindOf(inst.op) == OpKind::kCollective) return false;
  // A redistribute is the sharding stage's to carry out, never part of a unit.
  if (ProducesTensor(inst.op))
    return inst.op != Op::kFromBytes && inst.op != Op::kRedistribute && inst.results.size() == 1 && !inst.payload;
  // An optimizer step writes three tensors; units track one written operand.
  return (KindOf(inst.op) == OpKind::kMutate && inst.op != Op::kAdamStep) || inst.op == Op::kFree;
}

namespace {
constexpr TensorId kInputTag = TensorId{1} << 63;
}  // namespace

TensorId Builder::WireOperand(const Instruction& inst, TensorId id, bool* new_input) {
  // A new input: placeholders of inputs are renumbered in Finish(), once
  // their count is known; until then they are tagged with the top bit.
  auto [placeholder, added] = placeholder_.TryEmplace(id, kInputTag | inputs_.size());
  const TensorId p = *placeholder;
  if (added) inputs_.push_back(id);
  operands_.push_back(p);
  if (inst.op == Op::kFree) freed_.push_back(p);
  *new_input = added;
  return p;
}

void Builder::WireResult(const Instruction& inst) {
  if (ProducesTensor(inst.op)) {
    *placeholder_.TryEmplace(inst.results[0], 0).first = produced_ids_.size();
    produced_ids_.push_back(inst.results[0]);
  }
  ++length_;
}

// An instruction's entry in the signature: op, attributes, then each operand
// as 'i' + input index or 'p' + production index (relative to the sequence,
// never an id), then the shape and dtype of each input it uses first. Written
// straight into the signature's buffer: a signature is built for every
// candidate, and appending field by field cost more than the wiring.
bool Builder::TryAdd(const Instruction& inst, const MetaTracker& tracker) {
  const size_t signature_size = signature_.size(), inputs = inputs_.size(), operands = operands_.size(),
               freed = freed_.size();
  const MetaTracker::Tensors* known = tracker.TensorsOf(inst.client);
  signature_.resize(signature_size + EntrySize(inst));
  char* at = signature_.data() + signature_size;
  WriteOpAndAttributes(&at, inst);
  for (TensorId id : inst.operands) {
    bool new_input = false;
    const TensorId placeholder = WireOperand(inst, id, &new_input);
    if (!(placeholder & kInputTag)) {
      WriteOperand(&at, 'p', placeholder);
    } else {
      WriteOperand(&at, 'i', placeholder & ~kInputTag);
    }
  }
  signature_.resize(at - signature_.data());
  for (size_t j = inputs; j < inputs_.size(); ++j) {
    auto meta = known ? known->find(inputs_[j]) : MetaTracker::Tensors::const_iterator();
    if (!known || meta == known->end()) {  // unknown: undo this instruction
      for (size_t k = inputs; k < inputs_.size(); ++k) placeholder_.Erase(inputs_[k]);
      inputs_.resize(inputs);
      operands_.resize(operands);
      freed_.resize(freed);
      signature_.resize(signature_size);
      return false;
    }
    PutInts(signature_, meta->second.shape);
    Put<uint8_t>(signature_, static_cast<uint8_t>(meta->second.dtype));
  }
  WireResult(inst);
  return true;
}

void Builder::AddWiring(const Instruction& inst) {
  bool new_input = false;
  for (TensorId id : inst.operands) (void)WireOperand(inst, id, &new_input);
  WireResult(inst);
}

Sequence Builder::Finish() {
  Sequence s;
  s.length = length_;
  s.inputs = inputs_;
  const TensorId inputs = s.inputs.size();
  Put<uint64_t>(signature_, inputs);
  auto final_id = [inputs](TensorId p) { return (p & kInputTag) ? (p & ~kInputTag) + 1 : inputs + 1 + p; };
  s.operands.reserve(operands_.size());
  for (TensorId p : operands_) s.operands.push_back(final_id(p));
  std::vector<bool> freed(inputs + 1 + produced_ids_.size(), false);
  for (TensorId p : freed_) freed[final_id(p)] = true;
  for (size_t k = 0; k < produced_ids_.size(); ++k)
    if (!freed[inputs + 1 + k]) s.outputs.push_back(produced_ids_[k]);
  for (TensorId j = 0; j < inputs; ++j)
    if (freed[j + 1]) s.consumed.push_back(static_cast<int64_t>(j));
  s.signature = signature_;
  s.id = HashSignature(s.signature);
  signature_.clear();
  placeholder_.Clear();
  inputs_.clear();
  operands_.clear();
  freed_.clear();
  produced_ids_.clear();
  length_ = 0;
  return s;
}

UnitTemplate MakeUnit(const Sequence& s, const std::vector<Instruction>& instructions) {
  UnitTemplate unit;
  unit.inputs = static_cast<uint32_t>(s.inputs.size());
  unit.body.reserve(instructions.size());
  size_t next_operand = 0;
  TensorId next_result = s.inputs.size() + 1;
  for (const Instruction& inst : instructions) {
    Instruction body;
    body.op = inst.op;
    body.attrs = inst.attrs;
    body.attrs.sync_id = 0;
    body.operands.assign(s.operands.begin() + next_operand, s.operands.begin() + next_operand + inst.operands.size());
    next_operand += inst.operands.size();
    if (ProducesTensor(inst.op)) body.results = {next_result++};
    unit.body.push_back(std::move(body));
  }
  return unit;
}

uint64_t HashSignature(const std::string& signature) {
  // Eight bytes per step in four independent lanes (a training step's
  // signature is several KiB and is hashed once per occurrence; one lane's
  // chain of multiplies took 2 us); collisions are caught by comparing the
  // full signature wherever sequences are keyed.
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  auto mix = [](uint64_t h, uint64_t word) {
    h = (h ^ word) * kMul;
    return h ^ (h >> 32);
  };
  auto word_at = [&signature](size_t i) {
    uint64_t word;
    std::memcpy(&word, signature.data() + i, 8);
    return word;
  };
  uint64_t lane[4] = {0xcbf29ce484222325ull ^ signature.size(), 0x84222325cbf29ce4ull, 0x2325cbf29ce48422ull,
                      0x9ce484222325cbf2ull};
  size_t i = 0;
  for (; i + 32 <= signature.size(); i += 32)
    for (size_t k = 0; k < 4; ++k) lane[k] = mix(lane[k], word_at(i + 8 * k));
  uint64_t h = mix(mix(mix(lane[0], lane[1]), lane[2]), lane[3]);
  for (; i + 8 <= signature.size(); i += 8) h = mix(h, word_at(i));
  for (; i < signature.size(); ++i) h = (h ^ static_cast<unsigned char>(signature[i])) * kMul;
  h ^= h >> 29;
  return h ? h : 1;
}

}  // namespace gt::sequence
