// The sharding modifier: a dispatcher stage that turns a client's logical
// instruction stream into per-worker instructions and worker-to-worker
// collectives, following the client's signal configs (gt/config.h).
//
// Every tensor of a client has a placement (placement.h): whole on one
// worker, sharded on an axis over a worker list (torch.chunk sizes),
// replicated over a worker list, a pending sum over a worker list (the
// partial products of a contraction along a split dim, kept until their
// value is needed, as DTensor's Partial), or on a 2-D mesh with a placement
// per mesh axis (mesh.h, whose table comes before this one's for such a
// tensor). Creation inside a scope with a config
// makes the shards on their workers directly (Creation); every other op
// takes its output placement and the collective it needs from its inputs'.
// The strategy table (strategy_table.cc) maps each op to the strategy
// (strategies.h) that implements its rows here:
//
//   Elementwise (binary, unary, copy_into, fill)
//   elementwise, matching shards          shard-local
//   elementwise with a smaller operand    the operand broadcast to the shards' workers
//
//   Matmul ((..., M, K) @ (..., K, N), batch dims broadcasting)
//   A or B cut on a batch dim             the other cut alike (copied where it broadcasts),
//                                         shard-local: attention heads, a batch
//   A row-sharded @ B                     B replicated, shard-local (no communication)
//   A row-sharded @ B sharded             all-gather B, then shard-local
//   A inner-sharded @ B row-sharded       partial products: a pending sum (partial)
//   A @ B column-sharded                  A replicated, shard-local
//
//   Reduce (sum, mean, max, min, argmax, argmin)
//   sum / mean over the sharded axis      local sums (a mean's divided by the whole count):
//                                         a pending sum (partial)
//   max / min over the sharded axis       local, all-reduce (max / min); argmax / argmin: whole
//   reduction over other axes             shard-local
//
//   Movement (reshape, transpose, unsqueeze, squeeze, permute)
//   transpose of a sharded tensor         shard-local, the sharded axis follows the swap
//   unsqueeze, permute, squeeze of        shard-local, the sharded axis renumbered
//     another dim
//   reshape keeping the dims before the  shard-local when each shard's range stays whole
//     sharded one (merging or splitting    rows of the new dim there (sizes rescaled):
//     the sharded dim and those after it)  [B*T, D] cut on rows <-> [B, T, D] cut on B,
//                                          [B, T, H*d] <-> [B, T, H, d] cut on heads
//   reshape keeping the sharded dim and   shard-local
//     every dim after it
//   movement of a replicated tensor       on every replica
//
//   Softmax (softmax, log_softmax) and SliceOrSelect (slice, select)
//   softmax / log_softmax, slice, select  shard-local (select drops a dim: the sharded
//     along an unsharded axis               axis shifts when the dropped one was before it)
//   select along the sharded axis         on the one shard holding the index: whole there
//   slice along the sharded axis          each shard slices its part of the range; sharded
//                                         over the shards holding any (whole if one)
//   softmax / log_softmax along the       local max, all-reduce (max), exp, local sum,
//     sharded axis                        all-reduce (sum), divide: stays sharded
//
//   Cat
//   cat along an unsharded axis           shard-local, the other operands cut like the
//                                         first sharded one (replicas alike: on each)
//
//   Indexing (index_select, index_add, gather, scatter_add) and Triangle (tril, triu)
//   index_select by a cut index           x copied, the result cut like the index
//   index_select of x cut on another dim  shard-local
//   index_add with a cut index            member 0 adds into the base, the others into
//                                         zeros: a pending sum (partial)
//   index_add into a base cut on another  shard-local (the source cut alike)
//     dim
//   gather / scatter_add cut alike on a   shard-local
//     dim other than the indexed one
//   tril / triu of a tensor cut on rows   shard-local, the diagonal moved by the shard's
//     or columns                          first row (+) or column (-)
//   any of these on replicas only         on every replica
//
//   Batch (conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d, their backwards)
//   a 4-D input (or gradient) cut on     shard-local, the weight copied to each worker;
//     dim 0                              the conv's weight gradient a pending sum
//   anything else                        whole
//
//   Elementwise also runs where (condition, a, b), and adam_step when its
//   parameter and optimizer state are laid out alike (else an error).
//
//   Pending sums (partial: each member holds an addend)
//   an op linear in it (copy, negation,   on each addend: a pending sum again
//     sum or mean, a view, product or
//     quotient by a number, the sum or
//     difference of two alike)
//   any other op, a fetch                 all-reduced first, once: the record says replicated
//   redistribute to split over its        reduce-scatter
//     workers / to copies on them         all-reduce
//
//   Redistribute (gt.distributed: the layout is the instruction's, whatever x's)
//   x to whole on a worker               gathered (all-gather if split), copied there
//   x to a copy on each of workers        broadcast to those without one (all-gather first
//                                         if split)
//   x to split along a dim over workers   copies where needed as above, each worker slicing
//                                         its piece (none when x is split so already)
//   Each piece is then cloned into the result's own tensor.
//
//   Whole (every other op, and any op whose operands are all whole)
//   anything else                         operands assembled whole on one worker
//
//   Before any strategy (stage_ops.cc, sharding_stage.cc)
//   op in a scope whose config names      operands living elsewhere moved onto them first
//     workers                             (sharded: cut on the config's axis; whole: to its
//                                         first worker; replicated: copied)
//   fetch of a sharded tensor             all-gather, fetch from the first shard's worker
//   inspect (gt/op.h)                     a tensor's layout, or the client's collective
//                                         record, made on its worker and fetched
//
// A client that never registered a config (and with auto-sharding off) costs
// next to nothing: its tensors are all whole on one worker, so the stage
// keeps no record of them, puts its creations on its worker and passes
// everything else on for the router to place by operand. After its first
// config a tensor without a record is such a tensor (whole on the client's
// worker, shape unknown here): an op that mixes one with placed tensors runs
// whole on that worker, the others assembled there first.
//
// Collective bytes never pass through the dispatcher: each collective is one
// instruction per member, executed by the members' backends (Gloo), who meet
// at the rendezvous store this stage hosts.
//
// The files (one concept each):
//   plugin.cc              descriptor, option schema, factory (gt_sharding only)
//   sharding_stage.{h,cc}  ShardingStage: setup, the stream, per-instruction paths, frees,
//                          fetches, units
//   stage_config.cc        signal configs (kConfigure) checked into Configs
//   stage_inspect.cc       layout queries and recordings (kInspect), answered from the
//                          records through the layout codec (gt/layout.h)
//   stage_pending.cc       pending sums settled (one by one, or together on kSettle)
//   stage_ops.cc           creation and every other op (Compute), on meshes and workers
//   stage_restore.cc       a dispatcher restart: records told to their pieces' workers as
//                          tags (Retag), rebuilt from them (Restore)
//   piece_tags.{h,cc}      the tags' encoding and checks
//   bookkeeping.{h,cc}     per-client records (configs, placements, failed ids), live workers
//   placement.{h,cc}       Placement, the placed Tensor, torch.chunk sizes
//   strategy_table.{h,cc}  op -> strategy, the table above
//   strategies.h           the strategies: strategies.cc, movement_strategies.cc,
//                          indexing_strategies.cc, creation.cc
//   mesh.{h,cc}            placements per axis of a 2-D mesh: the ops run there piece by
//                          piece, changes of layout to and from the 1-D layouts
//   step.{h,cc}            the emitter strategies write with: per-worker instructions,
//                          temporaries, moves and collectives
//   rendezvous.{h,cc}      the store collectives meet at; rendezvous.cc is the only LibTorch use
// Everything but plugin.cc and rendezvous.cc is the library gt_sharding_runtime.
//
// Thread-safety: as every Stage (one pipeline thread).
#pragma once

namespace gt::sharding {

// The option names (their types, defaults and docs are in plugin.cc).
inline constexpr const char* kOptionRendezvousHost = "rendezvous_host";
inline constexpr const char* kOptionRendezvousPort = "rendezvous_port";
inline constexpr const char* kOptionExplain = "explain";
inline constexpr const char* kOptionAutoShard = "auto_shard";
inline constexpr const char* kOptionCheckpointRoot = "checkpoint_root";

}  // namespace gt::sharding
