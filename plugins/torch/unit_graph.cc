#include "unit_graph.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/graph_fuser.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <cmath>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace gt::torch_backend {
namespace {

namespace jit = torch::jit;

// The scalar as the interpreter passes it (kernels.cc, ScalarOf): an
// integral value as an int, so that integer tensors stay integer.
c10::IValue ScalarConstant(double value) {
  constexpr double kTwoPow63 = 9223372036854775808.0;
  const bool integral = std::trunc(value) == value && !(value == 0 && std::signbit(value)) &&
                        std::fabs(value) < kTwoPow63;
  if (integral) return c10::IValue(static_cast<int64_t>(value));
  return c10::IValue(value);
}

// A scalar as the 0-dim "wrapped number" tensor the interpreter uses for a
// scalar on the left of a non-commutative op.
at::Tensor WrappedScalar(double value) {
  c10::IValue scalar = ScalarConstant(value);
  at::Tensor tensor = scalar.isInt() ? c10::scalar_to_tensor(at::Scalar(scalar.toInt()))
                                     : c10::scalar_to_tensor(at::Scalar(scalar.toDouble()));
  tensor.unsafeGetTensorImpl()->set_wrapped_number(true);
  return tensor;
}

// The TorchScript operator of `op` when it maps 1:1 (the op table's aten
// column), interned once per op.
std::optional<jit::Symbol> AtenSymbol(Op op) {
  static const auto* symbols = [] {
    auto* table = new std::vector<std::optional<jit::Symbol>>(static_cast<size_t>(Op::kCount));
    for (size_t i = 0; i < table->size(); ++i)
      if (const char* aten = GetOpInfo(static_cast<Op>(i)).aten) (*table)[i] = jit::Symbol::fromQualString(aten);
    return table;
  }();
  return (*symbols)[static_cast<size_t>(op)];
}

class GraphBuilder {
 public:
  explicit GraphBuilder(uint32_t inputs) : graph_(std::make_shared<jit::Graph>()) {
    for (uint32_t i = 1; i <= inputs; ++i) {
      jit::Value* input = graph_->addInput("in" + std::to_string(i));
      input->setType(c10::TensorType::get());
      values_[i] = input;
    }
  }

  // The value of `inst` (null when it has no graph form).
  jit::Value* Add(const Instruction& inst) {
    std::vector<jit::Value*> in;
    for (TensorId id : inst.operands) in.push_back(values_.at(id));
    const std::vector<int64_t>& axes = inst.attrs.axes;
    switch (KindOf(inst.op)) {
      case OpKind::kBinary: return Binary(inst, in);
      case OpKind::kUnary:
        if (AtenSymbol(inst.op) && in.size() == 1) return Insert(*AtenSymbol(inst.op), {in[0]});
        return nullptr;
      case OpKind::kContract:
        // conv2d is a contraction too: interpreted
        return inst.op == Op::kMatmul && in.size() == 2 ? Insert(jit::aten::matmul, {in[0], in[1]}) : nullptr;
      case OpKind::kReduce: {
        if (in.size() != 1 || axes.empty()) return nullptr;  // "all dims" needs the rank
        // argmax / argmin / sum_of_squares / the losses have none: interpreted
        if (!AtenSymbol(inst.op)) return nullptr;
        return Insert(*AtenSymbol(inst.op), {in[0], Const(c10::IValue(axes)), Const(c10::IValue(inst.attrs.keepdims))});
      }
      case OpKind::kMovement: return Movement(inst, in);
      default: return nullptr;
    }
  }

  void Set(TensorId id, jit::Value* value) { values_[id] = value; }

  std::shared_ptr<jit::Graph> Finish(const std::vector<TensorId>& outputs) {
    for (TensorId id : outputs) graph_->registerOutput(values_.at(id));
    return graph_;
  }

 private:
  jit::Value* Const(const c10::IValue& value) { return graph_->insertConstant(value); }
  jit::Value* Insert(jit::Symbol symbol, std::vector<jit::NamedValue> args) {
    return graph_->insert(symbol, std::move(args));
  }

  jit::Value* Binary(const Instruction& inst, const std::vector<jit::Value*>& in) {
    // Comparisons have none: their mask's dtype depends on the operands'.
    if (!AtenSymbol(inst.op)) return nullptr;
    const jit::Symbol symbol = *AtenSymbol(inst.op);
    switch (inst.attrs.scalar_side) {
      case ScalarSide::kNone:
        return in.size() == 2 ? Insert(symbol, {in[0], in[1]}) : nullptr;
      case ScalarSide::kRight:
        return in.size() == 1 ? Insert(symbol, {in[0], Const(ScalarConstant(inst.attrs.scalar))}) : nullptr;
      case ScalarSide::kLeft:
        if (in.size() != 1) return nullptr;
        if (inst.op == Op::kAdd || inst.op == Op::kMul)
          return Insert(symbol, {in[0], Const(ScalarConstant(inst.attrs.scalar))});
        if (inst.op == Op::kSub) return Insert(jit::aten::rsub, {in[0], Const(ScalarConstant(inst.attrs.scalar))});
        return Insert(symbol, {Const(c10::IValue(WrappedScalar(inst.attrs.scalar))), in[0]});
    }
    return nullptr;
  }

  jit::Value* Movement(const Instruction& inst, const std::vector<jit::Value*>& in) {
    if (in.size() != 1) return nullptr;
    const std::vector<int64_t>& axes = inst.attrs.axes;
    jit::Value* a = in[0];
    switch (inst.op) {
      case Op::kReshape: return Insert(jit::aten::reshape, {a, Const(c10::IValue(inst.attrs.shape))});
      case Op::kTranspose:
        if (axes.size() != 2) return nullptr;  // the default depends on the rank
        return Insert(jit::aten::transpose, {a, Const(axes[0]), Const(axes[1])});
      case Op::kPermute: return Insert(jit::aten::permute, {a, Const(c10::IValue(axes))});
      case Op::kUnsqueeze:
        return axes.size() == 1 ? Insert(jit::aten::unsqueeze, {a, Const(axes[0])}) : nullptr;
      case Op::kSlice:
        if (axes.size() != 4) return nullptr;
        return Insert(jit::aten::slice, {a, Const(axes[0]), Const(axes[1]), Const(axes[2]), Const(axes[3])});
      case Op::kSelect:
        return axes.size() == 2 ? Insert(jit::aten::select, {a, Const(axes[0]), Const(axes[1])}) : nullptr;
      default: return nullptr;
    }
  }

  std::shared_ptr<jit::Graph> graph_;
  std::unordered_map<TensorId, jit::Value*> values_;
};

}  // namespace

const char* StrategyName(UnitStrategy strategy) {
  static constexpr const char* kNames[] = {"interpreted", "graph", "fused"};
  static_assert(std::size(kNames) == static_cast<size_t>(UnitStrategy::kCount), "one name per strategy");
  return kNames[static_cast<size_t>(strategy)];
}

void ConfigureTorchScript() {
  static std::once_flag once;
  std::call_once(once, [] {
    jit::getExecutorMode() = false;   // the legacy executor runs the legacy fuser
    jit::getProfilingMode() = false;
    jit::setTensorExprFuserEnabled(false);
    jit::overrideCanFuseOnCPULegacy(true);
  });
}

bool IsElementwiseArithmetic(const UnitTemplate& unit) {
  size_t arithmetic = 0;
  for (const Instruction& inst : unit.body) {
    switch (inst.op) {
      case Op::kDiv:
        // `s / x` needs a wrapped-number tensor constant, which the fuser
        // takes for a real double tensor (a float64 result).
        if (inst.attrs.scalar_side == ScalarSide::kLeft) return false;
        ++arithmetic;
        break;
      case Op::kAdd:
      case Op::kSub:
      case Op::kMul:
      case Op::kNeg:
      case Op::kAbs:
      case Op::kRelu: ++arithmetic; break;
      case Op::kReshape:
      case Op::kTranspose:
      case Op::kPermute:
      case Op::kUnsqueeze:
      case Op::kSlice:
      case Op::kSelect:
      case Op::kFree: break;
      default: return false;
    }
  }
  return arithmetic > 0;
}

struct UnitGraph::Impl {
  std::shared_ptr<jit::Graph> graph;
  std::optional<jit::Code> code;              // kGraph
  std::optional<jit::GraphExecutor> executor;  // kFused
};

UnitGraph::UnitGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UnitGraph::~UnitGraph() = default;

Result<std::unique_ptr<UnitGraph>> UnitGraph::Build(const UnitTemplate& unit, const UnitInterface& interface,
                                                    UnitStrategy strategy) {
  if (strategy != UnitStrategy::kGraph && strategy != UnitStrategy::kFused)
    return InvalidArgument(std::string("no graph for strategy ") + StrategyName(strategy));
  try {
    GraphBuilder builder(unit.inputs);
    for (size_t i = 0; i < unit.body.size(); ++i) {
      const Instruction& inst = unit.body[i];
      if (inst.op == Op::kFree) continue;
      jit::Value* value = builder.Add(inst);
      if (value == nullptr)
        return Unimplemented("unit body instruction " + std::to_string(i) + " (" + inst.Describe() +
                             ") has no graph form");
      builder.Set(inst.results.at(0), value);
    }
    auto impl = std::make_unique<Impl>();
    impl->graph = builder.Finish(interface.outputs);
    if (strategy == UnitStrategy::kGraph) {
      impl->code.emplace(impl->graph, "gt_unit");
    } else {
      ConfigureTorchScript();
      impl->executor.emplace(impl->graph, "gt_unit");
    }
    return std::unique_ptr<UnitGraph>(new UnitGraph(std::move(impl)));
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    return Unimplemented("unit graph: " + what.substr(0, what.find('\n')));
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return Unimplemented("unit graph: " + what.substr(0, what.find('\n')));
  }
}

std::vector<at::Tensor> UnitGraph::Run(std::vector<at::Tensor> inputs) {
  jit::Stack stack;
  stack.reserve(inputs.size());
  for (at::Tensor& t : inputs) stack.emplace_back(std::move(t));
  if (impl_->executor) {
    impl_->executor->run(stack);
  } else {
    jit::InterpreterState state(*impl_->code);
    state.run(stack);
  }
  std::vector<at::Tensor> outputs;
  outputs.reserve(stack.size());
  for (c10::IValue& value : stack) outputs.push_back(std::move(value).toTensor());
  return outputs;
}

}  // namespace gt::torch_backend
