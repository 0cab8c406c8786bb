// The strategy table: which strategy (strategies.h) expands an op whose
// operands are placed, by the op's ShardRule (gt/ops.def). Its rows follow
// the table in sharding.h; every rule is listed, so a rule added to
// gt/op.h and forgotten here fails to compile (-Wswitch) instead of
// silently running whole.
//
// Thread-safety: stateless.
#pragma once

#include <vector>

#include "gt/op.h"
#include "strategies.h"

namespace gt::sharding {

// A strategy as the table holds it: the op's operands in order.
using Strategy = Result<Placement> (*)(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);

// The row for `op`. Ops the stage handles before any strategy (creation,
// fetch, free and the other control ops, collectives) get Whole, the
// table's last row ("anything else").
Strategy StrategyFor(Op op);

// Expands s.inst: Whole when it has no operand or every operand is whole,
// else the strategy StrategyFor(op) names. REQUIRES: as every strategy.
Result<Placement> RunStrategy(Step& s, const std::vector<const Tensor*>& in, const TensorMeta& meta);

}  // namespace gt::sharding
