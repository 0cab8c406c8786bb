// Admission: what the dispatcher takes from a client, decided in one place,
// for each decoded instruction, before any stage sees it.
//
// Two checks, both in the client's own terms (one instruction, one tensor
// id), so that a stage that splits an op into per-worker pieces and
// collectives never has one piece refused while its peers wait for it in a
// collective:
//  - the sender's role: only the kinds the op table lets a client send
//    (ClientMaySend), also inside a unit's body; no worker of its choosing;
//    no hot sequence ids on markers (the hotpath stage's); the result and
//    operand counts the stages rely on;
//  - the client's quotas (manifest `limits:`): tensors it holds and
//    instructions no sync has answered yet. Frees, syncs, markers and
//    configures are never refused: they give resources back, report
//    errors, or keep the stages' view of the stream whole.
// A refused instruction's results are recorded as failed (a later use names
// it), and the error reaches the client at its next sync point.
//
// Thread-safety: the dispatcher's thread, like the ClientState it keeps.
#pragma once

#include "dispatcher/client_table.h"
#include "gt/instruction.h"
#include "gt/status.h"
#include "host/host_metrics.h"
#include "host/manifest.h"

namespace gt {

class Admission {
 public:
  Admission() = default;
  Admission(const ClientLimits& limits, QuotaMetrics live_tensors, QuotaMetrics inflight)
      : limits_(limits), live_quota_(live_tensors), inflight_quota_(inflight) {}

  // OK: `inst` (its client already set from the connection) goes on to the
  // stages, and is counted. Else why not; its results are recorded failed.
  Status Admit(ClientState& c, const Instruction& inst);

  // What a client may not send, whatever its quotas.
  static Status CheckSender(const Instruction& inst);

 private:
  static Status CheckUnitBody(const Instruction& define);
  static Status CheckArity(const Instruction& inst);
  Status CheckQuota(const ClientState& c, const Instruction& inst) const;
  static void Count(ClientState& c, const Instruction& inst);

  ClientLimits limits_{0, 0, 0};
  QuotaMetrics live_quota_;
  QuotaMetrics inflight_quota_;
};

}  // namespace gt
