// The sharding stage's pending sums (DTensor's Partial()): settled when an
// op needs their values (Settle, SettleOne, SettleMesh), or together on a
// kSettle (SettleTogether, DDP's bucketing); and the views of a mesh tensor
// turned into copies with it (MakeFamilyCopies), so that they still share data.
#include <algorithm>
#include <vector>

#include "mesh.h"
#include "sharding_stage.h"
#include "strategies.h"

namespace gt::sharding {

void ShardingStage::Settle(Client& c, Step& s, const Instruction& inst) {
  for (TensorId id : inst.operands) {
    auto it = c.tensors.find(id);
    if (it != c.tensors.end() && it->second.placement.partial()) SettleOne(c, s, it->second);
  }
  SettleMesh(c, s, inst);
}

void ShardingStage::MakeFamilyCopies(Client& c, Step& s, TensorId id) {
  const Tensor& t = c.tensors.at(id);
  const TensorId root = t.view_of.empty() ? id : t.view_of[0].operands.at(0);
  auto base = c.tensors.find(root);
  if (base != c.tensors.end() && base->second.placement.mesh()) MakeCopies(s, base->second);
  for (auto& [member_id, m] : c.tensors) {
    if (member_id == root || !m.placement.mesh() || m.view_of.empty() || m.view_of[0].operands.at(0) != root) continue;
    if (base == c.tensors.end()) {  // its base is gone: nothing can write through it
      MakeCopies(s, m);
      continue;
    }
    // Made again from the base's copies through each view between them (temporaries), then m.
    Placement view = base->second.placement;
    for (size_t i = 0; i < m.view_of.size(); ++i) {
      const bool last = i + 1 == m.view_of.size();
      view.ids = PerMember(s, view, m.view_of[i].op, m.view_of[i].attrs, [&view](size_t r) {
        return std::vector<TensorId>{view.ids[r]};
      }, !last);
    }
    for (size_t k = 0; k < m.placement.workers.size(); ++k) s.temporaries.emplace_back(m.placement.workers[k], m.placement.ids[k]);
    m.placement = view;
  }
}

void ShardingStage::SettleMesh(Client& c, Step& s, const Instruction& inst) {
  for (TensorId id : inst.operands) {
    auto it = c.tensors.find(id);
    if (it != c.tensors.end() && HasPartialAxis(it->second.placement)) SumMeshPartials(s, it->second);
  }
}

void ShardingStage::SettleOne(Client& c, Step& s, Tensor& t) {
  auto base = t.view_of.empty() ? c.tensors.end() : c.tensors.find(t.view_of[0].operands.at(0));
  if (base == c.tensors.end()) {  // not a view, or its base is gone (nothing can write into it then)
    Materialize(s, t);
    t.view_of.clear();
    return;
  }
  if (base->second.placement.partial()) SettleOne(c, s, base->second);
  for (size_t r = 0; r < t.placement.workers.size(); ++r) s.temporaries.emplace_back(t.placement.workers[r], t.placement.ids[r]);
  Placement view = base->second.placement;  // a copy on each of the same workers now
  for (size_t i = 0; i < t.view_of.size(); ++i) {  // the views between them, made again (temporaries), then t
    const bool last = i + 1 == t.view_of.size();
    view.ids = PerMember(s, view, t.view_of[i].op, t.view_of[i].attrs, [&view](size_t r) {
      return std::vector<TensorId>{view.ids[r]};
    }, !last);
  }
  t.placement = view;
  t.view_of.clear();
}

Status ShardingStage::SettleTogether(Client& c, Instruction&& inst, Emitter& out) {
  // The roots of the pending sums named (a view's base when it is there and
  // pending: the view is made again from it when it is needed), once each,
  // grouped by workers and dtype; a group of one is summed as Settle sums it.
  std::vector<Tensor*> roots, on_mesh;
  for (TensorId id : inst.operands) {
    auto it = c.tensors.find(id);
    if (it != c.tensors.end() && HasPartialAxis(it->second.placement) &&
        std::find(on_mesh.begin(), on_mesh.end(), &it->second) == on_mesh.end())
      on_mesh.push_back(&it->second);
    if (it == c.tensors.end() || !it->second.placement.partial()) continue;  // failed, whole or settled: nothing to do
    Tensor* t = &it->second;
    if (!t->view_of.empty()) {
      auto base = c.tensors.find(t->view_of[0].operands.at(0));
      if (base != c.tensors.end() && base->second.placement.partial()) t = &base->second;
    }
    if (std::find(roots.begin(), roots.end(), t) == roots.end()) roots.push_back(t);
  }
  if (roots.empty() && on_mesh.empty()) return Status::Ok();
  Step s = StepFor(c, inst, out);
  for (Tensor* t : on_mesh) SumMeshPartials(s, *t);  // each along its own groups
  if (roots.empty()) {
    Explain(s, {}, on_mesh[0]->placement);
    FreeTemporaries(s);
    return Status::Ok();
  }
  std::vector<bool> done(roots.size(), false);
  for (size_t i = 0; i < roots.size(); ++i) {
    if (done[i]) continue;
    std::vector<Tensor*> group;
    for (size_t j = i; j < roots.size(); ++j)
      if (!done[j] && roots[j]->placement.workers == roots[i]->placement.workers &&
          roots[j]->meta.dtype == roots[i]->meta.dtype) {
        group.push_back(roots[j]);
        done[j] = true;
      }
    if (group.size() == 1) SettleOne(c, s, *group[0]);
    else MaterializeTogether(s, group, group[0]->made_by);
    for (Tensor* t : group) t->view_of.clear();
  }
  Explain(s, {}, roots[0]->placement);  // "settle #N: -> replicated on [...]; collectives: all_reduce(sum) [...]"
  FreeTemporaries(s);
  return Status::Ok();
}

}  // namespace gt::sharding
