// Per-client use of one worker, as Prometheus series (docs/METRICS.md,
// "Per-client use"), declared here in one place:
//
//   gt_worker_client_compute_seconds_total{client}  counter  execution time of the client's instructions
//   gt_worker_client_instructions_total{client}     counter  instructions of the client run here
//   gt_worker_client_bytes_moved_total{client}      counter  tensor bytes in (from_bytes payloads) and out (fetches)
//   gt_worker_client_bytes_held{client}             gauge    memory the backend holds for the client (Backend::ClientBytes)
//   gt_worker_client_queued_instructions{client}    gauge    instructions waiting in the client's lane
//   gt_worker_client_weight{client}                 gauge    the client's fair-share weight
//   gt_worker_queued_instructions                   gauge    instructions waiting, all clients
//   gt_worker_active_clients                        gauge    clients with instructions waiting
// (every series also has the host's labels host, instance).
//
// The `client` label is what the dispatcher names the session in its
// ClientShare: the name of its key's `clients:` entry (shared by every
// session of that key), else "session-<id>" ("dispatcher" for the
// dispatcher's own instructions). Cardinality is bounded: at
// most kMaxLabels distinct values at once; past that, sessions count under
// "other". A session label's series are removed when its last session
// ends; a key's stay.
//
// Thread-safety: the pipeline thread calls everything; the handles are
// prometheus-cpp's (thread-safe for the scrape).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "gt/instruction.h"

namespace gt {

class ClientMeter {
 public:
  static constexpr size_t kMaxLabels = 32;
  static constexpr const char* kOverflowLabel = "other";

  // REQUIRES: `registry` outlives this object.
  ClientMeter(prometheus::Registry& registry, const std::string& instance);

  // Names `client`'s series `label` (a ClientShare's); a client never named
  // counts as "session-<id>".
  void Name(ClientId client, const std::string& label, double weight);
  // One turn of `client`: `instructions` run in `seconds`.
  void AddTurn(ClientId client, double seconds, uint64_t instructions);
  void AddBytesMoved(ClientId client, uint64_t bytes);
  // What the backend holds for `client` now; a label's gauge is the sum
  // over the sessions counting under it.
  void SetBytesHeld(ClientId client, uint64_t bytes);
  void SetQueued(ClientId client, size_t instructions);
  void SetTotals(size_t queued, size_t active_clients);
  // The session ended: its label is released (and a session label's series
  // removed) once no other session uses it.
  void Forget(ClientId client);

 private:
  struct Series {
    prometheus::Counter* seconds = nullptr;
    prometheus::Counter* instructions = nullptr;
    prometheus::Counter* bytes = nullptr;
    prometheus::Gauge* queued = nullptr;
    prometheus::Gauge* weight = nullptr;
    prometheus::Gauge* held = nullptr;
    size_t sessions = 0;   // clients counting under this label now
    bool keyed = false;    // a key's label: kept when its sessions end
  };
  Series& SeriesOf(ClientId client);
  Series& Label(const std::string& label, bool keyed);
  void Remove(const std::string& label, Series& series);

  prometheus::Labels host_labels_;
  prometheus::Family<prometheus::Counter>& seconds_;
  prometheus::Family<prometheus::Counter>& instructions_;
  prometheus::Family<prometheus::Counter>& bytes_;
  prometheus::Family<prometheus::Gauge>& queued_;
  prometheus::Family<prometheus::Gauge>& weight_;
  prometheus::Family<prometheus::Gauge>& held_;
  prometheus::Gauge& total_queued_;
  prometheus::Gauge& active_clients_;
  std::unordered_map<std::string, Series> labels_;
  struct Client {
    std::string label;
    Series* series = nullptr;
    uint64_t bytes_held = 0;  // its part of series->held
  };
  Client& ClientOf(ClientId client);
  std::unordered_map<ClientId, Client> clients_;
  ClientId last_client_ = 0;  // AddTurn's cache: one lookup per change of client
  Client* last_ = nullptr;
};

}  // namespace gt
