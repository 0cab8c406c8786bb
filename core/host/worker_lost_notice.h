// The dispatcher's word to a worker it has declared lost, and what a lost
// worker's leftovers look like on the dispatcher's side (issue 37, item 4).
//
// A worker is declared lost after `heartbeat_timeout_ms` of silence (a
// SIGSTOP, a frozen machine), when its work connection closes, or when a
// send to it fails. A worker process that lives on (SIGCONT, a connection
// ZeroMQ reconnected) learns it at its next heartbeat: the dispatcher
// answers with an ERROR that carries the worker's own registration token,
// the LOST NOTICE. A worker that receives it holds nothing anyone can use
// (every client that had tensors there was told they are gone), so it
// starts afresh (gt-worker replaces its process image: services/start_afresh.h)
// and registers again, empty, under its id.
//
// Until then the lost worker may still send the replies of work it had
// queued (SYNC_ACK, DATA, STATS_REPLY) on connections no live worker holds:
// the dispatcher drops them unread (Dispatcher::Impl::HandleFrames), for the
// clients they were meant for already heard of the loss. Rejecting them
// would send the worker an ERROR without its token, which ends it instead.
//
// Wire format: unchanged (wire.proto). An ERROR never carried a token
// before, so an older worker takes the notice for a refusal and ends, as it
// always did.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <string>

#include "wire.pb.h"

namespace gt {

// The notice to the worker `worker_name` that registered with `token`; its
// message names the dispatcher and the worker, for the worker's log.
wire::Envelope MakeLostNotice(const std::string& dispatcher_id, const std::string& worker_name, uint64_t token);

// Whether `env` is the lost notice for the registration with `token`
// (non-zero): an ERROR carrying that token.
bool IsLostNotice(const wire::Envelope& env, uint64_t token);

// The message of a lost notice, for the worker's log ("" if it has none).
std::string LostNoticeMessage(const wire::Envelope& env);

}  // namespace gt
