// A client session's share of the workers (fair queueing, metering): its
// key's entry of the dispatcher manifest's `clients:` list, else weight 1.
// WorkerRegistry sends it to each worker with the client's first
// instruction there (wire.proto ClientShare).
//
// Thread-safety: a pure function.
#pragma once

#include <vector>

#include "dispatcher/client_table.h"
#include "host/manifest.h"
#include "wire.pb.h"

namespace gt {

// `client` (nullptr: gone already) of session `id`: weight and label from
// the `manifest.clients` entry whose public key is the client's, else
// weight 1 and the label "session-<id>"; the compute quota from
// `manifest.limits`.
wire::ClientShare ShareOf(const HostManifest& manifest, const ClientState* client, ClientId id);

}  // namespace gt
