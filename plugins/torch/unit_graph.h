// TorchScript forms of a compiled unit (gt/unit.h): the unit's template as a
// torch::jit::Graph, run either by the TorchScript interpreter (kGraph) or by
// a legacy-executor GraphExecutor whose fusion pass hands runs of elementwise
// ops to LibTorch's legacy CPU fuser (kFused; the fuser writes C++ and builds
// it with the system compiler the first time a shape is seen). The heavy JIT
// headers stay in unit_graph.cc.
//
// Only ops with a graph form that computes exactly what the interpreter's
// ATen call computes are accepted (see unit_graph.cc); anything else (creation
// ops, mutations, comparisons, rank-dependent defaults) makes Build() fail
// and the unit stays interpreted.
//
// Thread-safety: a UnitGraph is used by one thread at a time (the worker's
// pipeline thread). ConfigureTorchScript() changes process-wide LibTorch
// settings.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "gt/status.h"
#include "gt/unit.h"

namespace gt::torch_backend {

// How a unit's body is executed; the backend keeps the fastest per unit.
enum class UnitStrategy : uint8_t {
  kInterpreted,  // op by op on ATen, as eager execution
  kGraph,        // the unit's TorchScript graph on the TorchScript interpreter
  kFused,        // the graph through the legacy fuser
  kCount
};
// "interpreted", "graph", "fused". REQUIRES: strategy < kCount.
const char* StrategyName(UnitStrategy strategy);

// Selects the legacy (non-profiling) graph executor, enables the legacy CPU
// fuser and disables the NNC (TensorExpr) fuser, which needs LLVM on CPU.
// Process-wide and idempotent; called by the backend before any kFused graph
// is built.
void ConfigureTorchScript();

// True when `unit` has elementwise arithmetic (add, sub, mul, div other than
// `scalar / tensor`, neg, abs, relu) and otherwise only views (reshape,
// transpose, permute, unsqueeze, slice, select) and frees: the units worth
// handing to the fuser, which fuses the arithmetic and leaves the views.
bool IsElementwiseArithmetic(const UnitTemplate& unit);

class UnitGraph {
 public:
  // Builds `unit`'s graph for `strategy` (kGraph or kFused). Unimplemented
  // naming the first body instruction without a graph form. Never throws.
  static Result<std::unique_ptr<UnitGraph>> Build(const UnitTemplate& unit, const UnitInterface& interface,
                                                  UnitStrategy strategy);
  ~UnitGraph();
  UnitGraph(const UnitGraph&) = delete;
  UnitGraph& operator=(const UnitGraph&) = delete;

  // Runs the graph on `inputs` (the unit's inputs, in order) and returns its
  // outputs in the interface's order. May throw c10::Error or
  // std::exception (a shape mismatch, a fuser that cannot compile); the
  // caller catches.
  std::vector<at::Tensor> Run(std::vector<at::Tensor> inputs);

 private:
  struct Impl;
  explicit UnitGraph(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gt::torch_backend
