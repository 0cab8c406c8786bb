// The torch backend's kernels: each gt op that makes a tensor, and each
// mutation, as the LibTorch (ATen) calls that compute it. The same kernels
// serve eager execution (operands from a client's namespace) and the unit
// interpreter (operands from the unit's environment), so an interpreted unit
// computes exactly what its instructions compute one by one.
//
// Semantics per op (broadcasting, type promotion, scalars, axes) are listed
// in README.md, "Supported ops". Kernels may throw c10::Error (a shape
// mismatch, a bad axis, an unsupported dtype): the backend catches it.
//
// Thread-safety: plain functions; the caller owns the tensors.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <vector>

#include "collectives.h"
#include "gt/instruction.h"
#include "gt/status.h"
#include "tensor_table.h"

namespace gt::torch_backend {

// A unit's tensors by placeholder while it is interpreted (index 0 unused; an
// undefined tensor is absent): placeholders are dense, so no map nodes are
// allocated per run.
using UnitEnv = std::vector<at::Tensor>;

// Where kernels find their operands by id: a client's namespace (eager
// execution) or a unit's environment (interpretation). Two pointers; pass
// by value. Borrows what it points to.
class TensorSource {
 public:
  // `tensors` null: a client that holds no tensors.
  explicit TensorSource(const TensorTable::Namespace* tensors) : tensors_(tensors) {}
  explicit TensorSource(const UnitEnv& env) : env_(&env) {}

  // The tensor `id`, or null when there is none.
  const at::Tensor* Find(TensorId id) const {
    if (env_ != nullptr) {
      if (id >= env_->size() || !(*env_)[id].defined()) return nullptr;
      return &(*env_)[id];
    }
    return tensors_ == nullptr ? nullptr : tensors_->Find(id);
  }

 private:
  const TensorTable::Namespace* tensors_ = nullptr;
  const UnitEnv* env_ = nullptr;
};

// Every operand of `inst` from `source`. InvalidArgument when `inst` does not
// have exactly `count` operands; NotFound naming the first one missing.
Result<std::vector<at::Tensor>> Operands(const Instruction& inst, size_t count, TensorSource source);

// The result of a tensor-producing op (ProducesTensor(inst.op)); collectives
// run through `collectives`. Errors name `inst`; Internal for an op that
// makes no tensor. May throw c10::Error.
// REQUIRES: CheckEnums(inst) is OK.
Result<at::Tensor> Compute(const Instruction& inst, TensorSource source, Collectives& collectives);

// kCopyInto / kMulInto / kAddInto / kFill / kAdamStep: write operands[0] in place (every tensor sharing its
// storage sees the change). May throw c10::Error.
// REQUIRES: KindOf(inst.op) == OpKind::kMutate.
Status Mutate(const Instruction& inst, TensorSource source);

// A scalar as a 0-dim tensor marked "wrapped number": ATen then promotes the
// way PyTorch does for a Python scalar (float32 tensor op 2.5 stays float32),
// and the same tensor-tensor kernel serves `a op s` and `s op a`. An integral
// `value` is taken as a Python int (see ScalarOf in kernels.cc).
at::Tensor WrappedScalar(double value);

// A comparison as gt gives it: a bool mask.
// REQUIRES: op is one of kGt, kLt, kGe, kLe, kEq.
at::Tensor Compare(Op op, const at::Tensor& a, const at::Tensor& b);

}  // namespace gt::torch_backend
