#include "unit_plan.h"

#include "gt/op_attrs.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace gt::torch_backend {
namespace {

bool IsMutation(Op op) { return KindOf(op) == OpKind::kMutate; }

// Ops whose result depends only on their operands and attributes, computed
// into a tensor the unit owns or a view of an operand.
bool IsPure(Op op) {
  switch (KindOf(op)) {
    case OpKind::kBinary:
    case OpKind::kContract:
    case OpKind::kUnary:
    case OpKind::kReduce:
    case OpKind::kMovement: return op != Op::kClone;  // a clone is asked for as a separate copy
    case OpKind::kCreate: return op == Op::kZeros || op == Op::kOnes || op == Op::kArange;
    default: return false;
  }
}

// The pair of dimensions a transpose swaps, as a sorted pair, or nullopt when
// it cannot be compared without knowing the rank (mixed signs).
std::optional<std::pair<int64_t, int64_t>> SwappedPair(const Instruction& t) {
  if (t.attrs.axes.empty()) return std::make_pair<int64_t, int64_t>(-2, -1);
  if (t.attrs.axes.size() != 2) return std::nullopt;
  int64_t a = t.attrs.axes[0], b = t.attrs.axes[1];
  if ((a < 0) != (b < 0)) return std::nullopt;
  return std::make_pair(std::min(a, b), std::max(a, b));
}

// Everything but the results and the bookkeeping fields: equal keys compute
// equal tensors (for pure ops at the same point between mutations).
using ExprKey = std::tuple<uint16_t, std::vector<TensorId>, Shape, uint8_t, std::vector<int64_t>, bool, double, uint8_t,
                           uint64_t, std::vector<double>, uint64_t>;

ExprKey KeyOf(const Instruction& inst, uint64_t epoch) {
  const Attributes& a = inst.attrs;
  return {static_cast<uint16_t>(inst.op), inst.operands, a.shape, static_cast<uint8_t>(a.dtype), a.axes, a.keepdims,
          a.scalar, static_cast<uint8_t>(a.scalar_side), a.seed, a.numbers, epoch};
}

class Planner {
 public:
  Planner(const UnitTemplate& unit, const UnitInterface& interface)
      : unit_(unit), outputs_(interface.outputs.begin(), interface.outputs.end()) {}

  // False when the unit is outside what the rewrites assume (see unit_plan.h).
  bool Rewrite() {
    for (const Instruction& original : unit_.body) {
      if (original.op == Op::kFree) continue;  // frees are placed again at the end
      Instruction inst = original;
      for (TensorId& id : inst.operands) id = Resolve(id);
      if (IsMutation(inst.op)) {
        if (inst.operands.empty() || inst.operands[0] > unit_.inputs) return false;
        ++epoch_;
        kept_.push_back(std::move(inst));
        continue;
      }
      if (!ProducesTensor(inst.op) || inst.results.size() != 1) return false;
      if (Reuse(inst)) continue;
      Record(inst);
      kept_.push_back(std::move(inst));
    }
    for (TensorId out : outputs_)
      if (constants_.count(out)) return false;
    return true;
  }

  UnitPlan Finish() {
    UnitPlan plan;
    RemoveDeadCode();
    std::vector<Fusion> fusions = FuseKernels();
    std::vector<Fusion> body_fusions;
    for (size_t i = 0; i < kept_.size(); ++i) {
      Instruction& inst = kept_[i];
      if (constants_.count(inst.results.empty() ? 0 : inst.results[0])) {
        plan.constants.push_back(inst.results[0]);
        plan.prologue.push_back(std::move(inst));
      } else {
        plan.body.push_back(std::move(inst));
        body_fusions.push_back(fusions[i]);
      }
    }
    std::tie(plan.body, plan.fusions) = WithFrees(std::move(plan.body), std::move(body_fusions), plan.constants);
    size_t before = 0, after = 0;
    for (const Instruction& inst : unit_.body) before += inst.op == Op::kFree ? 0 : 1;
    for (const Instruction& inst : plan.body) after += inst.op == Op::kFree ? 0 : 1;
    plan.kernels_saved = before - after;
    return plan;
  }

 private:
  TensorId Resolve(TensorId id) const {
    auto it = alias_.find(id);
    return it == alias_.end() ? id : it->second;
  }

  // True when `inst` computes what an earlier placeholder already holds; its
  // result then stands for that placeholder and it needs no instruction.
  bool Reuse(const Instruction& inst) {
    const TensorId result = inst.results[0];
    if (!IsPure(inst.op) || outputs_.count(result)) return false;  // outputs stay distinct tensors
    if (inst.op == Op::kTranspose) {
      auto inner = producer_.find(inst.operands[0]);
      if (inner != producer_.end()) {
        const Instruction& first = kept_[inner->second];
        auto a = SwappedPair(inst), b = SwappedPair(first);
        if (first.op == Op::kTranspose && a && b && *a == *b) {
          alias_[result] = first.operands[0];
          return true;
        }
      }
    }
    auto seen = expressions_.find(KeyOf(inst, epoch_));
    if (seen == expressions_.end()) return false;
    alias_[result] = seen->second;
    return true;
  }

  // Notes what a kept instruction makes, for later reuse and constants.
  void Record(const Instruction& inst) {
    const TensorId result = inst.results[0];
    producer_[result] = kept_.size();
    if (!IsPure(inst.op)) return;
    expressions_.emplace(KeyOf(inst, epoch_), result);
    if (std::all_of(inst.operands.begin(), inst.operands.end(), [&](TensorId id) { return constants_.count(id) > 0; }))
      constants_.insert(result);
  }

  // Keeps mutations, and whatever reaches an output or a mutation.
  void RemoveDeadCode() {
    std::unordered_set<TensorId> live(outputs_.begin(), outputs_.end());
    std::vector<bool> keep(kept_.size(), false);
    for (size_t i = kept_.size(); i-- > 0;) {
      const Instruction& inst = kept_[i];
      keep[i] = IsMutation(inst.op) || (!inst.results.empty() && live.count(inst.results[0]));
      if (keep[i]) live.insert(inst.operands.begin(), inst.operands.end());
    }
    std::vector<Instruction> alive;
    for (size_t i = 0; i < kept_.size(); ++i)
      if (keep[i]) alive.push_back(std::move(kept_[i]));
    kept_ = std::move(alive);
  }

  // Who makes and who reads each placeholder among kept_, and where the
  // mutations are: what the fusions need to know that a pattern's
  // intermediates have no other use and its operands do not change inside it.
  class UseIndex {
   public:
    UseIndex(const std::vector<Instruction>& kept, const std::unordered_set<TensorId>& outputs)
        : kept_(kept), mutations_before_(kept.size() + 1, 0) {
      for (size_t i = 0; i < kept.size(); ++i) {
        for (TensorId id : kept[i].operands) ++uses_[id];
        if (!kept[i].results.empty()) producer_[kept[i].results[0]] = i;
        mutations_before_[i + 1] = mutations_before_[i] + (IsMutation(kept[i].op) ? 1 : 0);
      }
      for (TensorId out : outputs) ++uses_[out];  // an output is a use
    }

    // The index of the instruction with op `op` that makes `id`, if `id` has
    // no use but the one at `user` and nothing is mutated in between.
    std::optional<size_t> SoleProducer(TensorId id, Op op, size_t user) const {
      auto it = producer_.find(id);
      auto used = uses_.find(id);
      if (it == producer_.end() || used == uses_.end() || used->second != 1 || kept_[it->second].op != op)
        return std::nullopt;
      if (mutations_before_[user] != mutations_before_[it->second + 1]) return std::nullopt;
      return it->second;
    }

   private:
    const std::vector<Instruction>& kept_;
    std::unordered_map<TensorId, int> uses_;
    std::unordered_map<TensorId, size_t> producer_;
    std::vector<size_t> mutations_before_;  // [i]: mutations among kept[0, i)
  };

  // copy_into(p, u), u = sub(p, t), t = mul(g, s) at kept_[k]: becomes
  // copy_into {p, g} with scalar s, and the sub and mul are dropped.
  bool FuseScaledSubtract(size_t k, const UseIndex& index, std::vector<bool>& dropped) {
    Instruction& inst = kept_[k];
    if (inst.op != Op::kCopyInto || inst.operands.size() != 2) return false;
    const TensorId p = inst.operands[0];
    std::optional<size_t> sub = index.SoleProducer(inst.operands[1], Op::kSub, k);
    // Operand counts are checked here because templates come from clients:
    // a malformed one must fail when it runs, as sent, not be fused.
    if (!sub || kept_[*sub].attrs.scalar_side != ScalarSide::kNone || kept_[*sub].operands.size() != 2 ||
        kept_[*sub].operands[0] != p)
      return false;
    std::optional<size_t> mul = index.SoleProducer(kept_[*sub].operands[1], Op::kMul, k);
    if (!mul || kept_[*mul].attrs.scalar_side == ScalarSide::kNone || kept_[*mul].operands.size() != 1) return false;
    inst.operands = {p, kept_[*mul].operands[0]};
    inst.attrs.scalar = kept_[*mul].attrs.scalar;
    dropped[*sub] = dropped[*mul] = true;
    return true;
  }

  // mul(g, m) or mul(m, g), m = gt(x, 0) at kept_[k]: becomes mul {g, x}, and
  // the gt is dropped. A constant product stays as it is (the prologue runs
  // plain instructions).
  bool FuseReluGradient(size_t k, const UseIndex& index, std::vector<bool>& dropped) {
    Instruction& inst = kept_[k];
    if (inst.op != Op::kMul || inst.attrs.scalar_side != ScalarSide::kNone || inst.operands.size() != 2 ||
        inst.operands[0] == inst.operands[1] || constants_.count(inst.results[0]))
      return false;
    for (size_t side = 0; side < 2; ++side) {
      std::optional<size_t> gt = index.SoleProducer(inst.operands[side], Op::kGt, k);
      if (!gt || kept_[*gt].attrs.scalar_side != ScalarSide::kRight || kept_[*gt].attrs.scalar != 0 ||
          kept_[*gt].operands.size() != 1)
        continue;
      inst.operands = {inst.operands[1 - side], kept_[*gt].operands[0]};
      dropped[*gt] = true;
      return true;
    }
    return false;
  }

  // Rewrites the patterns of Fusion in kept_ (dead code already gone, so use
  // counts are final) and returns each kept instruction's fusion.
  std::vector<Fusion> FuseKernels() {
    const UseIndex index(kept_, outputs_);
    std::vector<Fusion> fusions(kept_.size(), Fusion::kNone);
    std::vector<bool> dropped(kept_.size(), false);
    for (size_t k = 0; k < kept_.size(); ++k) {
      if (FuseScaledSubtract(k, index, dropped)) {
        fusions[k] = Fusion::kScaledSubtractInto;
      } else if (FuseReluGradient(k, index, dropped)) {
        fusions[k] = Fusion::kReluGradient;
      }
    }
    std::vector<Instruction> kept;
    std::vector<Fusion> kept_fusions;
    for (size_t i = 0; i < kept_.size(); ++i) {
      if (dropped[i]) continue;
      kept.push_back(std::move(kept_[i]));
      kept_fusions.push_back(fusions[i]);
    }
    kept_ = std::move(kept);
    return kept_fusions;
  }

  // Frees every input and temporary right after its last use in `body`
  // (outputs and constants are never freed here); `fusions` follows.
  std::pair<std::vector<Instruction>, std::vector<Fusion>> WithFrees(std::vector<Instruction> body,
                                                                      std::vector<Fusion> fusions,
                                                                      const std::vector<TensorId>& constants) const {
    std::unordered_set<TensorId> keep(outputs_.begin(), outputs_.end());
    keep.insert(constants.begin(), constants.end());
    std::unordered_map<TensorId, size_t> last_use;
    for (size_t i = 0; i < body.size(); ++i) {
      for (TensorId id : body[i].operands) last_use[id] = i;
      for (TensorId id : body[i].results) last_use.emplace(id, i);
    }
    std::vector<std::vector<TensorId>> frees(body.size());
    for (const auto& [id, index] : last_use)
      if (!keep.count(id)) frees[index].push_back(id);
    std::vector<Instruction> out;
    std::vector<Fusion> out_fusions;
    out.reserve(body.size() * 2);
    out_fusions.reserve(body.size() * 2);
    for (size_t i = 0; i < body.size(); ++i) {
      out.push_back(std::move(body[i]));
      out_fusions.push_back(fusions[i]);
      if (frees[i].empty()) continue;
      std::sort(frees[i].begin(), frees[i].end());
      out.push_back(MakeFree(0, 0, std::move(frees[i])));
      out_fusions.push_back(Fusion::kNone);
    }
    return {std::move(out), std::move(out_fusions)};
  }

  const UnitTemplate& unit_;
  std::unordered_set<TensorId> outputs_;
  std::unordered_map<TensorId, TensorId> alias_;  // result -> the placeholder that stands for it
  std::unordered_set<TensorId> constants_;
  std::map<ExprKey, TensorId> expressions_;
  std::unordered_map<TensorId, size_t> producer_;  // result -> index in kept_
  std::vector<Instruction> kept_;
  uint64_t epoch_ = 0;  // mutations so far: equal expressions across one are not equal values
};

}  // namespace

UnitPlan PlanUnit(const UnitTemplate& unit, const UnitInterface& interface) {
  Planner planner(unit, interface);
  if (planner.Rewrite()) return planner.Finish();
  UnitPlan plan;  // as defined
  plan.body = unit.body;
  return plan;
}

}  // namespace gt::torch_backend
