// How gt-worker comes back after its dispatcher declared it lost (a SIGSTOP
// past the heartbeat timeout, a connection that broke: host/worker_lost_notice.h).
//
// Its clients were told that everything on it is gone, so it must hold
// nothing when it registers again: no tensors, no compiled units, no
// collective groups, and no LibTorch or Gloo thread still blocked in a
// collective with a dead group (Gloo in LibTorch 1.13 cannot abort one).
// The only way to be sure of all of that is a fresh process image: the
// process replaces itself (execv of its own executable, same arguments,
// same process id, so a supervisor sees it still running) and starts as
// it did the first time, registering under the same id.
#pragma once

#include "gt/status.h"

namespace gt::services {

// Replaces this process with a fresh run of its own executable and `argv`.
// Every descriptor but stdin, stdout and stderr is closed on the way (the
// old connections, the metrics listener). Returns only on failure, saying why.
Status StartAfresh(char** argv);

}  // namespace gt::services
