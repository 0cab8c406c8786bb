#include "dispatcher/client_shares.h"

#include <optional>
#include <string>

#include "gt/op.h"

namespace gt {

ClientShare ShareOf(const HostManifest& manifest, const ClientState* client, ClientId id) {
  const ClientLimits& limits = manifest.limits;
  const std::vector<ClientShareConfig>& entries = manifest.clients;
  ClientShare share;
  share.client = id;
  share.label = "session-" + std::to_string(id);
  share.max_compute_seconds_per_minute = limits.max_compute_seconds_per_minute;
  if (!client || client->key.empty()) return share;
  for (const ClientShareConfig& entry : entries) {
    if (entry.public_key != client->key) continue;
    share.weight = entry.weight;
    share.label = entry.name;
  }
  return share;
}

void PlaceByLoad(WorkerRegistry& workers, ClientState& c, Instruction& inst) {
  if (KindOf(inst.op) != OpKind::kCreate || inst.worker >= 0) return;
  if (c.worker < 0 || !workers.IsAlive(static_cast<size_t>(c.worker))) {
    std::optional<size_t> w = workers.NextPlacement();
    if (!w) return;
    c.worker = static_cast<int>(*w);
  }
  inst.worker = c.worker;
}

}  // namespace gt
