// decompose: a gt stream modifier that injects instructions. It lowers
// `sigmoid` and `tanh` into ops every backend has (mul, exp, add, div, sub),
// the way a compiler lowers an op a target lacks:
//
//   sigmoid(x) = 1 / (1 + exp(-x))          tanh(x) = 2 / (1 + exp(-2x)) - 1
//
//   sigmoid #7 %9 <- %4        becomes      mul  #7 s0 <- %4 * -1
//                                           exp  #7 s1 <- s0
//                                           add  #7 s2 <- s1 + 1
//                                           div  #7 %9 <- 1 / s2
//                                           free #7 s0, s1, s2
//
// One instruction in, five out: the host counts four in
// gt_stage_instructions_injected_total. The backend never sees a sigmoid
// (gt_backend_op_seconds{op="sigmoid"} stays empty) and the client sees the
// same values, dtype and shape as before: multiplying by a float scalar
// first promotes bool and integer inputs to float32, as sigmoid/tanh do.
// Large |x| is safe: exp() overflowing to inf gives 1/inf = 0.
//
// What an injecting stage must get right, and how this one does it:
//   - Fresh tensor ids. A client names its tensors; a stage that creates
//     temporaries needs ids no client uses. This stage uses ids from 2^63 up
//     (the gt client counts up from 1) and rejects client instructions that
//     name one. Its temporaries live only between the instructions of one
//     expansion and are freed at its end, so the same few ids are reused.
//   - Ordering. Emitted instructions keep their order and come before
//     anything the next Process() call emits, so the temporaries exist when
//     used and are gone before the client's next instruction runs.
//   - Errors. Injected instructions carry the client instruction's `seq`
//     and `client`: a failure (say the operand does not exist) is reported
//     to that client, naming its op number. The ops after the failing one
//     fail as failed_precondition, naming the same number.
//   - Host. It runs in workers only (descriptor `hosts`): lowering belongs
//     next to the backend, and a worker's backend frees the temporaries the
//     dispatcher never hears of.
#include <array>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>

#include "gt/metrics.h"
#include "gt/plugin.h"

namespace {

// ---- Options ----------------------------------------------------------------

constexpr const char* kOptionOps = "ops";

constexpr gt::OptionSpec kOptions[] = {
    {kOptionOps, gt::OptionType::kString, "sigmoid,tanh", "",
     "comma-separated ops to lower into mul/exp/add/div/sub (supported: sigmoid, tanh); empty = none", 0, 0},
};

// The ops this stage can lower. Index = position in kLowerable.
constexpr std::array<gt::Op, 2> kLowerable = {gt::Op::kSigmoid, gt::Op::kTanh};

// Tensor ids from here up belong to this stage.
constexpr gt::TensorId kScratchBase = gt::TensorId{1} << 63;

// ---- The stage --------------------------------------------------------------

class DecomposeStage final : public gt::Stage {
 public:
  // `lowered[i]` counts rewrites of kLowerable[i]; null when that op is not
  // enabled. Owned by the host's registry.
  explicit DecomposeStage(std::array<prometheus::Counter*, kLowerable.size()> lowered)
      : lowered_(lowered) {}

  gt::Status Process(gt::Instruction&& inst, gt::Emitter& out) override {
    if (gt::Status s = CheckNoScratchIds(inst); !s.ok()) return s;  // rejected: nothing emitted
    for (size_t i = 0; i < kLowerable.size(); ++i) {
      if (inst.op != kLowerable[i] || lowered_[i] == nullptr) continue;
      // A malformed sigmoid/tanh goes on unchanged: the backend names what
      // is wrong with it better than a rewrite would.
      if (inst.operands.size() != 1 || inst.results.size() != 1) break;
      if (inst.op == gt::Op::kSigmoid) LowerSigmoid(inst, out);
      else LowerTanh(inst, out);
      lowered_[i]->Increment();
      return gt::Status::Ok();
    }
    out.Emit(std::move(inst));
    return gt::Status::Ok();
  }

 private:
  static gt::TensorId Scratch(int k) { return kScratchBase + static_cast<gt::TensorId>(k); }

  // An instruction derived from `from`: same client, seq and signal, so that
  // errors and logs name the client's instruction.
  static gt::Instruction Derived(const gt::Instruction& from, gt::Op op, std::vector<gt::TensorId> results,
                                 std::vector<gt::TensorId> operands) {
    gt::Instruction inst;
    inst.op = op;
    inst.client = from.client;
    inst.seq = from.seq;
    inst.signal = from.signal;
    inst.results = std::move(results);
    inst.operands = std::move(operands);
    return inst;
  }

  static gt::Instruction WithScalar(gt::Instruction inst, double scalar, gt::ScalarSide side) {
    inst.attrs.scalar = scalar;
    inst.attrs.scalar_side = side;
    return inst;
  }

  // 1 / (1 + exp(x * -1))
  static void LowerSigmoid(const gt::Instruction& in, gt::Emitter& out) {
    const gt::TensorId x = in.operands[0], result = in.results[0];
    const gt::TensorId s0 = Scratch(0), s1 = Scratch(1), s2 = Scratch(2);
    out.Emit(WithScalar(Derived(in, gt::Op::kMul, {s0}, {x}), -1, gt::ScalarSide::kRight));
    out.Emit(Derived(in, gt::Op::kExp, {s1}, {s0}));
    out.Emit(WithScalar(Derived(in, gt::Op::kAdd, {s2}, {s1}), 1, gt::ScalarSide::kRight));
    out.Emit(WithScalar(Derived(in, gt::Op::kDiv, {result}, {s2}), 1, gt::ScalarSide::kLeft));
    out.Emit(Derived(in, gt::Op::kFree, {}, {s0, s1, s2}));
  }

  // 2 / (1 + exp(x * -2)) - 1
  static void LowerTanh(const gt::Instruction& in, gt::Emitter& out) {
    const gt::TensorId x = in.operands[0], result = in.results[0];
    const gt::TensorId s0 = Scratch(0), s1 = Scratch(1), s2 = Scratch(2), s3 = Scratch(3);
    out.Emit(WithScalar(Derived(in, gt::Op::kMul, {s0}, {x}), -2, gt::ScalarSide::kRight));
    out.Emit(Derived(in, gt::Op::kExp, {s1}, {s0}));
    out.Emit(WithScalar(Derived(in, gt::Op::kAdd, {s2}, {s1}), 1, gt::ScalarSide::kRight));
    out.Emit(WithScalar(Derived(in, gt::Op::kDiv, {s3}, {s2}), 2, gt::ScalarSide::kLeft));
    out.Emit(WithScalar(Derived(in, gt::Op::kSub, {result}, {s3}), 1, gt::ScalarSide::kRight));
    out.Emit(Derived(in, gt::Op::kFree, {}, {s0, s1, s2, s3}));
  }

  // Returns InvalidArgument naming the instruction when a client uses one of
  // this stage's ids: running it could clobber or free a temporary.
  static gt::Status CheckNoScratchIds(const gt::Instruction& inst) {
    for (const std::vector<gt::TensorId>* ids : {&inst.results, &inst.operands})
      for (gt::TensorId id : *ids)
        if (id >= kScratchBase)
          return gt::InvalidArgument(inst.Describe() + ": tensor ids from 2^63 up are reserved for the "
                                     "decompose stage's temporaries");
    return gt::Status::Ok();
  }

  const std::array<prometheus::Counter*, kLowerable.size()> lowered_;
};

// ---- The factory ------------------------------------------------------------

// Splits option `ops` ("sigmoid, tanh") and marks which kLowerable ops are on.
gt::Result<std::array<bool, kLowerable.size()>> ParseOps(std::string_view text) {
  std::array<bool, kLowerable.size()> enabled{};
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) continue;
    bool found = false;
    for (size_t i = 0; i < kLowerable.size(); ++i) {
      if (gt::OpName(kLowerable[i]) == item) enabled[i] = found = true;
    }
    if (!found)
      return gt::InvalidArgument("option 'ops': cannot lower '" + std::string(item) +
                                 "' (supported: sigmoid, tanh)");
  }
  return enabled;
}

gt::Result<std::unique_ptr<gt::Stage>> CreateStage(const gt::StageContext& context) {
  gt::Result<std::array<bool, kLowerable.size()>> enabled = ParseOps(context.options->GetString(kOptionOps));
  if (!enabled.ok()) return enabled.status();
  try {
    auto& family = prometheus::BuildCounter()
                       .Name("gt_decompose_lowered_total")
                       .Help("Instructions a decompose stage replaced by simpler ops, by the op replaced.")
                       .Register(*context.registry);
    // One series per enabled op, created now so that it reads 0 until used.
    std::array<prometheus::Counter*, kLowerable.size()> lowered{};
    for (size_t i = 0; i < kLowerable.size(); ++i) {
      if (!(*enabled)[i]) continue;
      prometheus::Labels labels = gt::StageLabels(context);
      labels.emplace("op", std::string(gt::OpName(kLowerable[i])));
      lowered[i] = &family.Add(labels);
    }
    return std::unique_ptr<gt::Stage>(std::make_unique<DecomposeStage>(lowered));
  } catch (const std::exception& e) {
    return gt::InvalidArgument(std::string("cannot register metrics: ") + e.what());
  }
}

// ---- The descriptor ---------------------------------------------------------

const gt::PluginDescriptor kDescriptor = {
    .kind = gt::PluginKind::kModifier,
    .name = "decompose",
    .version = "0.1.0",
    .description = "Lowers sigmoid and tanh into mul/exp/add/div/sub, injecting the extra instructions",
    .hosts = gt::HostBit(gt::HostKind::kWorker),  // a dispatcher manifest naming it is refused
    .options = kOptions,
    .option_count = std::size(kOptions),
    .create_stage = &CreateStage,
    .create_backend = nullptr,
};

}  // namespace

GT_PLUGIN(kDescriptor)
