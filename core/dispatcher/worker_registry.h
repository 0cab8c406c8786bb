// The dispatcher's table of workers: who registered, who is alive, where new
// tensors go, and the batch of instructions each worker gets at the end of
// the current pipeline pass.
//
// Worker indexes are positions in registration order and never reused: a
// lost worker keeps its slot (marked dead), so an index held by a client's
// tensor or a stage stays meaningful.
//
// Thread-safety: owned by the dispatcher's thread, except LiveEndpoints()
// and PublishedLiveCount(), which any thread may call (the discovery server).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gt/instruction.h"
#include "gt/stage.h"
#include "host/fair_share_wire.h"
#include "wire.pb.h"

namespace gt {

// A live worker's metrics endpoint, as published for service discovery.
struct WorkerEndpoint {
  std::string name;     // the worker's id (its `instance` label)
  std::string metrics;  // "host:port" the worker announced in REGISTER; the host
                        // may be a wildcard (0.0.0.0, [::]) when it listens on
                        // every interface
  std::string peer_ip;  // IP address the worker connected from (tcp only; ""
                        // for ipc:// and inproc:// peers)
};

// A worker talks to the dispatcher over up to two connections. The one it
// registered on carries its work: BATCH out, SYNC_ACK and DATA back, read
// and written by the worker's pipeline thread with no relay in between. The
// optional control connection, attached later under the token the worker
// registered with, carries heartbeats and STATS from the worker's I/O
// thread, which a long op on the pipeline thread does not hold up.
struct WorkerState {
  std::string route;          // the registering (work) connection's ZeroMQ routing id
  std::string control_route;  // the attached control connection's; "" until one attaches
  uint64_t token = 0;         // from REGISTER; 0: the worker attaches no control connection
  std::string key;            // the CURVE key it registered under ("" without keys)
  std::string name;
  std::string metrics_endpoint;
  std::string peer_ip;  // tcp peers only
  std::chrono::steady_clock::time_point last_seen;
  int fd = -1;          // its work connection's file descriptor (tcp, ipc); -1: unknown (inproc)
  int control_fd = -1;  // its control connection's, likewise
  bool alive = true;
  // It holds its index because it said it had it before a restart (REGISTER
  // `rejoining`): a second such claim is refused, not moved.
  bool claimed_index = false;
  wire::Envelope outgoing;        // this pass's BATCH, sent by Flush()
  std::vector<BlobPtr> payloads;  // its payload frames
  // Its load, from its last heartbeat (ReportLoad: the most instructions that
  // waited at once since the one before, so a busy worker never reads idle
  // between a client's rounds), and the clients placed
  // on it since (a burst of new clients between two heartbeats spreads).
  uint64_t queued = 0;
  uint64_t resident_bytes = 0;
  uint64_t placed_since_report = 0;
  // The clients whose ClientShare it was sent (the first BATCH with their
  // instructions carries it), until their kDropClient.
  std::unordered_set<ClientId> told;
  ClientId last_told = 0;  // Enqueue's cache: consecutive instructions are mostly one client's

  // Where control messages (STATS) go: the control connection once attached.
  const std::string& ControlRoute() const { return control_route.empty() ? route : control_route; }
};

class WorkerRegistry {
 public:
  using Clock = std::chrono::steady_clock;

  // Adds a worker; returns its index. An empty `name` becomes "worker-<index>".
  // A worker named as one that was lost replaces it under the same index (a
  // signal config's worker list keeps meaning the same workers); what the
  // lost one held is gone (the router forgot it when it was lost). `fd` is
  // the connection's file descriptor, -1 when unknown.
  // `token` and `key` are what a control connection must show to attach.
  // `at`: the index a rejoining worker had (wire.proto REGISTER
  // `rejoining`), taken when not live; the slots before it that no worker
  // held yet wait, dead, for theirs; `claimed`: the worker asked for `at`
  // (WorkerState::claimed_index). REQUIRES: !IsAlive(*at).
  size_t Register(const std::string& route, const std::string& name, const std::string& metrics_endpoint,
                  const std::string& peer_ip, int fd = -1, uint64_t token = 0, const std::string& key = "",
                  std::optional<size_t> at = std::nullopt, bool claimed = true);
  // The worker, live or lost, that registered with `token` (non-zero), if
  // any still holds its index.
  std::optional<size_t> FindByToken(uint64_t token) const;
  // Makes `route` (connection `fd`) worker w's control connection, in place
  // of any it had. REQUIRES: w is live and `route` is nobody's.
  void AttachControl(size_t w, const std::string& route, int fd);
  // Forgets worker w's control connection (it closed); control messages go
  // to its work connection again.
  void DetachControl(size_t w);
  // The live worker connected under `route` (either connection), if any.
  std::optional<size_t> FindByRoute(const std::string& route) const;
  // The live worker whose work connection is file descriptor `fd`, if any.
  std::optional<size_t> FindByFd(int fd) const;
  // The live worker whose control connection is file descriptor `fd`, if any.
  std::optional<size_t> FindByControlFd(int fd) const;
  // The live worker named `name`, if any.
  std::optional<size_t> FindLiveByName(const std::string& name) const;
  // Marks worker `w` dead; false when it already was.
  bool MarkLost(size_t w);

  // REQUIRES: w < size().
  const WorkerState& at(size_t w) const { return workers_[w]; }
  void Touch(size_t w) { workers_[w].last_seen = Clock::now(); }
  bool IsAlive(size_t w) const { return w < workers_.size() && workers_[w].alive; }
  size_t size() const { return workers_.size(); }
  size_t LiveCount() const;
  std::vector<int64_t> LiveIndexes() const;
  // Live workers whose last message is older than `timeout`.
  std::vector<size_t> Silent(Clock::time_point now, Clock::duration timeout) const;
  // Where a new client's tensors go: the live worker with the least load
  // (LoadScore); among equals, the next in round-robin order.
  std::optional<size_t> NextPlacement();
  // Worker w's heartbeat: instructions waiting in its fair queue and its
  // backend's resident bytes.
  void ReportLoad(size_t w, uint64_t queued, uint64_t resident_bytes);
  // Queued instructions, plus the clients placed since its last report,
  // plus one per kBytesPerQueuedUnit of resident memory.
  static constexpr uint64_t kBytesPerQueuedUnit = 256ull << 20;
  uint64_t LoadScore(size_t w) const;

  // The ClientShare (weight, metrics label, compute quota) of a client,
  // told to each worker with the first instruction of that client it is
  // sent (host/fair_share_wire.h).
  using ShareSource = std::function<ClientShare(ClientId)>;
  void SetShareSource(ShareSource source) { share_source_ = std::move(source); }
  // A client's session as workers are told of it with its share (its token
  // digest: a restarted dispatcher checks a RESUME against what they kept).
  using SessionSource = std::function<std::optional<wire::ClientSession>(ClientId)>;
  void SetSessionSource(SessionSource source) { session_source_ = std::move(source); }

  // Appends `inst` to worker w's batch for this pass.
  void Enqueue(size_t w, const Instruction& inst);
  // Appends a stage's tag (gt/stage.h PieceTag) to its worker's batch for
  // this pass (a worker not alive: dropped).
  void AddTag(PieceTag&& tag);
  // Hands every non-empty batch of a live worker to `send` and clears all
  // batches; returns the workers `send` could not reach.
  std::vector<size_t> Flush(const std::function<bool(const WorkerState&)>& send);

  // The workers alive now that announced a metrics endpoint, in registration
  // order, as of the last Register()/MarkLost(). Thread-safe.
  std::vector<WorkerEndpoint> LiveEndpoints() const;
  // How many workers were alive at the last Register()/MarkLost(). Thread-safe.
  size_t PublishedLiveCount() const { return live_workers_.load(std::memory_order_acquire); }

 private:
  void Publish();

  std::vector<WorkerState> workers_;  // never shrinks: indexes stay valid
  std::unordered_map<std::string, size_t> by_route_;
  size_t next_placement_ = 0;
  ShareSource share_source_;
  SessionSource session_source_;
  std::set<size_t> dirty_;  // workers with a batch this pass

  mutable std::mutex endpoints_mutex_;
  std::vector<WorkerEndpoint> endpoints_;  // GUARDED_BY(endpoints_mutex_)
  std::atomic<size_t> live_workers_{0};
};

}  // namespace gt
