// What the hotpath and compile stages share: per-client tensor metadata
// tracked from creation attributes onward, and the id-free description of an
// instruction sequence (its signature and its unit template).
//
// A sequence's signature covers every instruction's op and attributes, the
// shape and dtype of every operand, and the dataflow between instructions:
// an operand is either "produced by body instruction k" or "input j" (the
// sequence's j-th distinct external tensor, in order of first use). Raw
// tensor ids never enter it, so the same training step issued again with
// fresh ids has the same signature, and a step on other shapes a different one.
//
// Thread-safety: none; each stage owns its own objects.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "gt/instruction.h"
#include "gt/unit.h"
#include "id_map.h"
#include "ir/shape_inference.h"

namespace gt::sequence {

// Tensor metadata of every client tensor a stage has seen made, by client.
class MetaTracker {
 public:
  // The metadata of `id`, or null when this stage never saw it made (or it
  // failed shape inference, or was freed).
  const TensorMeta* Find(ClientId client, TensorId id) const;
  // True when every operand of `inst` is known.
  bool KnowsOperands(const Instruction& inst) const;
  // Applies `inst` after it passed: records its result's metadata (when its
  // operands are known and shape inference accepts it), forgets freed
  // tensors and, on kDropClient, the whole client. Other results (a
  // kRunUnit's) become unknown.
  void Observe(const Instruction& inst);
  // The tensors of `client` (null when it has none), for many lookups in a row.
  using Tensors = std::unordered_map<TensorId, TensorMeta>;
  const Tensors* TensorsOf(ClientId client) const {
    auto c = clients_.find(client);
    return c == clients_.end() ? nullptr : &c->second;
  }
  // Tensors tracked over all clients (bounded by what clients keep alive).
  size_t size() const;
  // For a stage that knows what a replayed unit made without inferring it.
  void Set(ClientId client, TensorId id, const TensorMeta& meta) { clients_[client][id] = meta; }
  void Forget(ClientId client, TensorId id);

 private:
  std::unordered_map<ClientId, std::unordered_map<TensorId, TensorMeta>> clients_;
  std::vector<const TensorMeta*> scratch_;  // Observe()'s operand metadata, kept to avoid an allocation per call
};

// Whether `inst` may be part of a sequence: tensor ops other than kFromBytes
// (its payload changes every time) and collectives, mutations and kFree.
bool Sequenceable(const Instruction& inst);

// A finished sequence of one client's instructions.
struct Sequence {
  std::string signature;             // canonical bytes; equal signatures mean the same unit
  uint64_t id = 0;                   // 64-bit hash of `signature` (never 0)
  std::vector<TensorId> inputs;      // external tensors, in order of first use
  std::vector<TensorId> outputs;     // produced, not freed inside, in production order
  std::vector<int64_t> consumed;     // indexes into `inputs` freed inside, ascending
  std::vector<TensorId> operands;    // every instruction's operand placeholders, in order (see gt/unit.h)
  size_t length = 0;                 // instructions
};

// The unit template of `s`: the body on placeholders (see gt/unit.h).
// `instructions` are the ones the sequence was built from, in order. Kept
// apart from Builder::Finish because a replayed sequence whose unit is
// already defined never needs its body.
UnitTemplate MakeUnit(const Sequence& s, const std::vector<Instruction>& instructions);

// Builds a Sequence one instruction at a time.
class Builder {
 public:
  // Appends `inst` when each of its operands is made by an instruction added
  // before or known to `tracker` (which has not observed `inst` yet);
  // otherwise adds nothing and returns false. REQUIRES: Sequenceable(inst).
  bool TryAdd(const Instruction& inst, const MetaTracker& tracker);
  // Appends `inst` to the wiring only (inputs, outputs, operands): Finish()
  // then has no signature. For a region whose signature is known by other
  // means (a hot sequence's id) and whose wiring is all that must be checked.
  // REQUIRES: Sequenceable(inst); not mixed with TryAdd() in one sequence.
  void AddWiring(const Instruction& inst);
  size_t size() const { return length_; }
  // The sequence so far; the builder is left empty (its buffers are kept:
  // the same step is built again and again).
  Sequence Finish();

 private:
  // Records one operand of `inst`; its placeholder (inputs tagged, see TryAdd).
  TensorId WireOperand(const Instruction& inst, TensorId id, bool* new_input);
  // Records what `inst` makes and counts it.
  void WireResult(const Instruction& inst);

  std::string signature_;
  IdMap placeholder_;  // client id -> placeholder
  std::vector<TensorId> inputs_;
  std::vector<TensorId> operands_;      // placeholders (inputs tagged, see Add), in order
  std::vector<TensorId> freed_;         // placeholders freed by kFree (inputs tagged)
  std::vector<TensorId> produced_ids_;  // client ids of produced tensors, in order
  size_t length_ = 0;
};

// The key a unit is cached under: Sequence::id, computed again from bytes.
uint64_t HashSignature(const std::string& signature);

}  // namespace gt::sequence
