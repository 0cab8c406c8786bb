#include <map>

#include "strategies.h"

namespace gt::sharding {

Result<Placement> Creation(Step& s, const Config* chosen, const TensorMeta& meta) {
  const Instruction& inst = *s.inst;
  const TensorId result = inst.results.at(0);
  Placement p;
  if (chosen) {
    const Config& cfg = *chosen;
    std::vector<int> workers = cfg.replicated || cfg.sharded ? s.workers->Of(cfg) : std::vector<int>{};
    const bool local_ok = inst.op == Op::kZeros || inst.op == Op::kOnes ||
                          ((inst.op == Op::kRandn || inst.op == Op::kRand) && inst.attrs.seed == 0);
    if (cfg.sharded && meta.shape.empty()) {
      // A scalar cannot be split: whole on the scope's first worker.
      Instruction whole = inst;
      EmitOn(s, workers[0], whole);
      p = Placement{Placement::Kind::kWhole, {workers[0]}, {result}, 0, {}};
    } else if (cfg.sharded) {
      const int64_t rank = static_cast<int64_t>(meta.shape.size());
      const int64_t axis = cfg.axis < 0 ? cfg.axis + rank : cfg.axis;
      std::vector<int64_t> sizes = ChunkSizes(meta.shape[axis], workers.size());
      if (sizes.size() >= 1) {
        workers.resize(sizes.size());
        p.kind = Placement::Kind::kSharded;
        p.workers = workers;
        p.axis = axis;
        p.sizes = sizes;
        const bool split_payload = inst.op == Op::kFromBytes && axis == 0 && inst.payload;
        if (local_ok || split_payload) {
          const size_t row_bytes = meta.shape[0] == 0 ? 0 : (inst.payload ? inst.payload->size() / meta.shape[0] : 0);
          int64_t start = 0;
          for (size_t r = 0; r < workers.size(); ++r) {
            Instruction piece = inst;
            piece.attrs.shape[axis] = sizes[r];
            if (split_payload) {
              if (inst.payload->size() != row_bytes * meta.shape[0])
                return InvalidArgument(inst.Describe() + ": payload size does not match shape and dtype");
              piece.payload = CopyToBlob(inst.payload->data() + start * row_bytes, sizes[r] * row_bytes);
            }
            start += sizes[r];
            TensorId id = NewId(*s.client);
            piece.results = {id};
            EmitOn(s, workers[r], piece);
            p.ids.push_back(id);
          }
          s.collectives.push_back(split_payload ? "payload split by the dispatcher" : "created in place");
        } else {
          // Values that must match a one-worker run: made whole, then scattered.
          Instruction whole = inst;
          TensorId id = NewId(*s.client);
          whole.results = {id};
          EmitOn(s, workers[0], whole);
          s.temporaries.emplace_back(workers[0], id);
          Tensor t{meta, Placement{Placement::Kind::kWhole, {workers[0]}, {id}, 0, {}}};
          p.ids = ShardLike(s, t, axis, p);
          Keep(s, p.ids);  // the slices are the shards
        }
      }
    } else if (cfg.replicated) {
      p.kind = Placement::Kind::kReplicated;
      p.workers = workers;
      if (local_ok && inst.op != Op::kRandn && inst.op != Op::kRand) {
        for (int w : workers) {
          Instruction copy = inst;
          TensorId id = NewId(*s.client);
          copy.results = {id};
          EmitOn(s, w, copy);
          p.ids.push_back(id);
        }
      } else {
        Instruction whole = inst;
        whole.results = {result};
        EmitOn(s, workers[0], whole);
        Tensor t{meta, Placement{Placement::Kind::kWhole, {workers[0]}, {result}, 0, {}}};
        std::map<int, TensorId> copies = Replicate(s, t, workers);
        for (int w : workers) p.ids.push_back(copies[w]);
        Keep(s, p.ids);  // the broadcast's results are the replicas
      }
    }
  }
  if (p.ids.empty()) {  // whole: no config, or nothing to split
    p = Placement{Placement::Kind::kWhole, {s.workers->DefaultFor(*s.client, inst.worker)}, {result}, 0, {}};
    EmitOn(s, p.workers[0], inst);
  }
  return p;
}

}  // namespace gt::sharding
