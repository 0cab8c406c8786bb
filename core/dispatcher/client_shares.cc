#include "dispatcher/client_shares.h"

#include <string>

namespace gt {

wire::ClientShare ShareOf(const HostManifest& manifest, const ClientState* client, ClientId id) {
  const ClientLimits& limits = manifest.limits;
  const std::vector<ClientShareConfig>& entries = manifest.clients;
  wire::ClientShare share;
  share.set_client(id);
  share.set_weight(1.0);
  share.set_label("session-" + std::to_string(id));
  share.set_max_compute_seconds_per_minute(limits.max_compute_seconds_per_minute);
  if (!client || client->key.empty()) return share;
  for (const ClientShareConfig& entry : entries) {
    if (entry.public_key != client->key) continue;
    share.set_weight(entry.weight);
    share.set_label(entry.name);
  }
  return share;
}

}  // namespace gt
