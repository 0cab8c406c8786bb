// A client session's share of the workers (fair queueing, metering): its
// key's entry of the dispatcher manifest's `clients:` list, else weight 1.
// WorkerRegistry sends it to each worker with the client's first
// instruction there (host/fair_share_wire.h).
//
// Thread-safety: a pure function.
#pragma once

#include <vector>

#include "dispatcher/client_table.h"
#include "host/fair_share_wire.h"
#include "dispatcher/worker_registry.h"
#include "host/manifest.h"

namespace gt {

// `client` (nullptr: gone already) of session `id`: weight and label from
// the `manifest.clients` entry whose public key is the client's, else
// weight 1 and the label "session-<id>"; the compute quota from
// `manifest.limits`.
ClientShare ShareOf(const HostManifest& manifest, const ClientState* client, ClientId id);

// Names the worker for `inst` when it creates a tensor: the client's home,
// chosen by load (WorkerRegistry::NextPlacement) the first time and when it
// is lost. The sharding stage takes the hint as the client's default worker
// (where its whole tensors go); a signal config still places what it names.
void PlaceByLoad(WorkerRegistry& workers, ClientState& c, Instruction& inst);

}  // namespace gt
