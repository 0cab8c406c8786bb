// The shape and dtype rules behind InferResult (ir/shape_inference.h), one
// entry point per ShapeRule of gt/ops.def, in three files by family:
// shape_rules_elementwise.cc, shape_rules_reduce.cc, shape_rules_movement.cc,
// shape_rules_conv.cc.
// Internal to the IR: callers use InferResult, which picks the rule.
//
// Each rule checks its operand count and attributes and fails with
// InvalidArgument naming the op; none executes anything.
// Thread-safety: plain functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/shape_inference.h"

namespace gt::shape_rules {

// The op's name, as errors start.
std::string Where(const Instruction& inst);
// Product of `dims`, or nullopt when it overflows int64.
std::optional<int64_t> CheckedProduct(const Shape& dims);
// "expects `want` tensor operand(s), got `got`".
Status ArityError(const Instruction& inst, size_t want, size_t got);

using Operands = std::vector<const TensorMeta*>;

// shape_rules_elementwise.cc
Result<TensorMeta> InferCreate(const Instruction& inst);
Result<TensorMeta> InferBinary(const Instruction& inst, const Operands& in);
Result<TensorMeta> InferWhere(const Instruction& inst, const Operands& in);
Result<TensorMeta> InferMatmul(const Instruction& inst, const Operands& in);
Result<TensorMeta> InferUnary(const Instruction& inst, const Operands& in);
Result<TensorMeta> InferTriangle(const Instruction& inst, const Operands& in);
Result<TensorMeta> InferGradPair(const Instruction& inst, const Operands& in);
Result<TensorMeta> InferRedistribute(const Instruction& inst, const Operands& in);

// shape_rules_reduce.cc
Result<TensorMeta> InferReduce(const Instruction& inst, const Operands& in);
Result<TensorMeta> InferArgReduce(const Instruction& inst, const TensorMeta& in);
Result<TensorMeta> InferSumOfSquares(const Instruction& inst, const Operands& in);
Result<TensorMeta> InferCrossEntropy(const Instruction& inst, const Operands& in);
Result<TensorMeta> InferMseLoss(const Instruction& inst, const Operands& in);

// shape_rules_movement.cc
Result<TensorMeta> InferMovement(const Instruction& inst, const TensorMeta& in);  // one operand
Result<TensorMeta> InferCat(const Instruction& inst, const Operands& in);
Result<TensorMeta> InferIndexing(const Instruction& inst, const Operands& in);

// shape_rules_conv.cc
Result<TensorMeta> InferConv(const Instruction& inst, const Operands& in);  // conv2d and its backward
Result<TensorMeta> InferPool(const Instruction& inst, const Operands& in);  // the poolings and their backwards

}  // namespace gt::shape_rules
