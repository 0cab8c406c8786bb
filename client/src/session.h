// The client's one session per process: the socket to the dispatcher, the
// batch being filled, id and sequence counters, and (for the embedded
// default) the in-process cluster.
//
// Thread-safety: every public method takes mu_; the DEALER socket is used
// only under it. The heartbeat thread owns its own socket.
#pragma once

#include <atomic>
#include <chrono>
#include <array>
#include <functional>
#include <map>
#include <optional>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <zmq.hpp>

#include "client_pipeline.h"
#include "connection_watch.h"
#include "net/curve_keys.h"
#include "resume_log.h"
#include "embedded/embedded_cluster.h"
#include "gt/gt.h"
#include "ir/shape_inference.h"
#include "wire.pb.h"

namespace gt::client_internal {

class Session;

// Loads the file GT_CONFIG names (if set) the first time it is called; a
// bad file throws gt::Error then (and is read again at the next op).
void LoadEnvConfigOnce();

// What a Tensor handle points at. Frees the remote tensor when destroyed.
struct TensorRecord {
  TensorId id;
  TensorMeta meta;
  std::shared_ptr<Session> session;
  // Bumped by every in-place change of the tensor's data and shared with the
  // tensors that view the same data (reshape, transpose, slice, ... are
  // views on the worker), so that backward() can refuse a gradient that
  // needs values changed since they were used, as PyTorch does. Made on
  // first need; none means version 0.
  mutable std::shared_ptr<uint64_t> version;
  uint64_t Version() const { return version ? *version : 0; }
  void BumpVersion() const;
  // `view` sees this tensor's data: share the counter.
  void ShareVersionWith(const TensorRecord& view) const;
  // Set when this tensor is a transpose of dims {first, second} (first <
  // second, non-negative) of `transpose_of`: transposing it back the same
  // way gives that tensor again, without an instruction (Tensor::transpose,
  // with grad off: the gradient formulas transpose transposes often). Made
  // with grad off (a gradient formula's), the view keeps that tensor too:
  // its handle is usually gone by the time the transpose back comes.
  std::weak_ptr<TensorRecord> transpose_of;
  std::shared_ptr<TensorRecord> keeps_transposed;
  std::array<int64_t, 2> transposed_dims = {0, 0};
  ~TensorRecord();
};

// True on a thread inside backward() (autograd.cc).
bool InBackward();

struct FetchedData {
  DType dtype;
  Shape shape;
  BlobPtr bytes;
  // Over inproc (the embedded default) a fetched frame is the worker's own
  // tensor memory, passed along without a copy; over a socket it is a buffer
  // ZeroMQ filled for this client alone.
  bool shares_worker_memory = false;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  // The process's session, created on first use.
  static std::shared_ptr<Session> Get();

  // REQUIRES: no op issued yet.
  void SetAddress(const std::string& address);
  void SetWorkers(int n);

  // Queues `inst` (its results and seq are filled in here) and returns the
  // handle of its result. Throws gt::Error if shape inference rejects it.
  std::shared_ptr<TensorRecord> Issue(Instruction inst, const std::vector<const TensorRecord*>& operands);
  // Queues an instruction that changes operands[0] in place (no result).
  void Mutate(Instruction inst, const std::vector<const TensorRecord*>& operands);

  // Queues a compile-scope marker (kHotStart / kHotEnd, signature 0) named
  // `signal`; a kHotStart first sends what is queued, so the scope starts a
  // new message. Nothing when GT_COMPILE is off (CompileScopesEager); with
  // GT_COMPILE=1 the marker requires a compile stage (HotMarker::required).
  void Marker(Op op, const std::string& signal);

  // Sync points.
  // `tensor`'s bytes, handed to `read` while this session's lock is held:
  // over inproc they are the worker's own tensor memory, which another
  // thread's next op could change as soon as the lock is released (it cannot
  // reach the worker before), so `read` takes what it keeps then.
  void Fetch(const TensorRecord& tensor, const std::function<void(FetchedData&)>& read);
  // Sends an inspect (gt/op.h) about `operand` (may be null) and returns the
  // dispatcher's answer, except for a start of recording (attrs.seed 2),
  // which is queued like an op and answered by nothing. Starting a
  // recording also starts noting each later op's origin here; the answer
  // to attrs.seed 3 ends it.
  // One kSettle of `tensors` (their pending sums summed together, DDP's
  // bucketing) when tensors are placed (a signal config or a redistribute:
  // else nothing is pending); not a sync point.
  void SettleTogether(const std::vector<const TensorRecord*>& tensors);
  // True once tensors may be placed (split, copied, on a mesh): a signal
  // config, a redistribute or GT_AUTO_SHARD did it. Until then every tensor
  // of the session is whole on one worker.
  bool Places();
  FetchedData Inspect(Instruction inst, const TensorRecord* operand);
  // What the session noted of the op with `seq` while recording (empty op: nothing).
  struct Origin {
    std::string op, signal, source;
    bool backward = false;
  };
  Origin OriginOf(uint64_t seq);
  void SetSourceHook(std::function<std::string()> hook);
  void Sync();
  // Syncs, then asks the dispatcher for every host's metrics snapshot
  // (wire.proto, "Stats") and returns its STATS_REPLY. Throws gt::Error
  // (unavailable) when no reply comes within timeout_ms + 5 s.
  wire::Envelope Stats(uint32_t timeout_ms);

  // Signal configs (gt/config.h): kept here and sent to the dispatcher,
  // now if the session has started, else when it starts. `config` nullopt
  // forgets the signal's config.
  void SetConfig(const std::string& name, std::optional<SignalConfig> config);
  std::optional<SignalConfig> GetConfig(const std::string& name);
  void ClearConfigs();

  // Queues a free; called from ~TensorRecord. Never throws.
  void Free(TensorId id) noexcept;

  void Close();
  ~Session();

 private:
  Session() = default;
  void EnsureStartedLocked();              // REQUIRES: mu_ held
  // The start's settings (gt/settings.h) and the client's stages; returns
  // GT_CONNECT_TIMEOUT (nullopt: wait forever). Throws gt::Error naming a bad
  // variable. REQUIRES: mu_ held.
  std::optional<std::chrono::milliseconds> ReadSettingsLocked();
  // Starts the embedded default and returns its endpoint. REQUIRES: mu_ held.
  std::string StartEmbeddedLocked();
  // Makes socket_ (CURVE, the connection watch) and connects it to
  // `endpoint`. REQUIRES: mu_ held.
  void ConnectLocked(const std::string& endpoint, const std::optional<std::chrono::milliseconds>& connect_timeout);
  // A DEALER with the options of a connection to a dispatcher (CURVE when
  // keys are set); not connected. REQUIRES: mu_ held.
  std::unique_ptr<zmq::socket_t> NewSocketLocked();
  // How `address_` is reached now (tcp, or the local dispatcher's ipc socket).
  std::string RemoteEndpointLocked() const;
  // The watch of a new socket_ to `endpoint`: "address (endpoint)" in errors.
  Result<std::unique_ptr<ConnectionWatch>> WatchLocked(const std::string& endpoint, std::chrono::milliseconds timeout);
  // The connection to the dispatcher was lost (`lost` says how): takes the
  // session to a dispatcher at the same address within the grace period
  // (session_resume.cc) and re-sends every kept batch. Returns once it
  // did; else marks the session broken and throws gt::Error naming what
  // was lost and why it could not be resumed.
  void RecoverLocked(const Status& lost);
  // One try of RecoverLocked on a fresh socket: true once the dispatcher
  // took the session back and the kept batches went out again; false when
  // this connection closed too (try again). Throws when it refused.
  bool ResumeOnceLocked(std::chrono::steady_clock::time_point deadline);
  // The watch of socket_ said `s` (not OK): recovers, or throws.
  void ConnectionLostLocked(const Status& s);
  // Queues `inst` through the client's stages (when it has any and does not
  // place tensors) and sends the batch once it is full.
  void QueueLocked(Instruction&& inst);
  // Frees in a row travel as one free naming every tensor (about half of a
  // training step's instructions are frees, mostly in runs): the run is held
  // here until the next other instruction or flush goes out, so it ends at
  // the same place in the stream whatever the batch boundaries are (a hot
  // sequence stays the same sequence).
  void QueueFreesLocked();
  // Encodes `inst` into the batch being filled.
  void AppendLocked(const Instruction& inst);
  // Sends the batch as it is; the stages may still hold instructions back.
  void SendBatchLocked();
  void SendConfigLocked(const std::string& name, const std::optional<SignalConfig>& config);
  // Ends the stages' batch, then sends everything queued.
  void FlushLocked();
  // A client whose signal configs place tensors (shard, replicated) bypasses
  // its own stages from then on: the dispatcher's sharding stage must see
  // each of its instructions, not units (GT_AUTO_SHARD=1 too).
  void UpdatePlacingLocked();
  // Waits until the dispatcher has answered every instruction sent so far.
  // Errors are thrown (RemoteError), or with `keep_errors` kept for the
  // next sync (a backpressure sync the program did not ask for).
  void SyncLocked(uint64_t fetch_seq, FetchedData* data, bool keep_errors = false);
  // The next message from the dispatcher; throws gt::Error when the
  // connection watch gives up on it, or the socket closed.
  std::vector<zmq::message_t> ReceiveLocked();
  wire::Envelope AwaitStatsReplyLocked(uint64_t request_id, std::chrono::steady_clock::time_point deadline);
  void HeartbeatLoop(std::string endpoint, uint64_t token);

  std::mutex mu_;
  bool started_ = false;        // GUARDED_BY(mu_)
  bool closed_ = false;         // GUARDED_BY(mu_)
  std::string address_;         // GUARDED_BY(mu_); empty: embedded default
  int workers_ = 0;             // GUARDED_BY(mu_); 0: GT_WORKERS or 2
  TensorId next_id_ = 1;        // GUARDED_BY(mu_)
  uint64_t next_seq_ = 1;       // GUARDED_BY(mu_)
  uint64_t next_sync_ = 1;      // GUARDED_BY(mu_)
  uint64_t next_stats_ = 1;     // GUARDED_BY(mu_)
  wire::Envelope batch_;        // GUARDED_BY(mu_)
  std::vector<BlobPtr> payloads_;  // GUARDED_BY(mu_)
  size_t payload_bytes_ = 0;    // GUARDED_BY(mu_)
  std::vector<wire::OpError> stray_errors_;  // GUARDED_BY(mu_): ERROR replies seen while waiting
  int64_t unsynced_ = 0;                     // GUARDED_BY(mu_): instructions sent since the last sync
  bool sent_early_ = false;                  // GUARDED_BY(mu_): a heavy op went out ahead since the last sync
  std::optional<Instruction> pending_free_;  // GUARDED_BY(mu_): the run of frees not queued yet
  std::map<std::string, SignalConfig> configs_;  // GUARDED_BY(mu_)
  bool placing_ = false;        // GUARDED_BY(mu_): a config placed tensors at some point, or a redistribute did
  // Recording collectives (Inspect): each op's origin by seq. The hook is
  // called outside mu_ (it may take the Python GIL).
  std::atomic<bool> recording_{false};
  std::unordered_map<uint64_t, Origin> origins_;  // GUARDED_BY(mu_)
  std::mutex hook_mu_;
  std::function<std::string()> source_hook_;      // GUARDED_BY(hook_mu_)
  // The origin of an op about to be issued, while recording (else empty).
  Origin NoteOrigin(Op op, const std::string& signal);
  bool compile_scopes_eager_ = false;     // GT_COMPILE off: compile scopes send no markers (set at start)
  bool compile_scopes_required_ = false;  // GT_COMPILE=1: markers say the scope must be compiled (set at start)
  std::unique_ptr<ClientPipeline> pipeline_;  // GUARDED_BY(mu_); null: no client stages

  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<EmbeddedCluster> cluster_;
  std::unique_ptr<zmq::socket_t> socket_;  // GUARDED_BY(mu_)
  bool inproc_ = false;                    // GUARDED_BY(mu_): socket_ is connected to an inproc:// endpoint
  std::unique_ptr<ConnectionWatch> watch_;  // GUARDED_BY(mu_); null: embedded, or GT_CONNECT_TIMEOUT=0
  // GUARDED_BY(mu_): how long a wait for the dispatcher polls before it
  // sleeps; 0 in the embedded default.
  std::chrono::microseconds busy_wait_{0};
  Status broken_;  // GUARDED_BY(mu_): why the dispatcher will never answer again, once the watch said so
  // Surviving a dispatcher restart (resume_log.h): null when there is
  // nothing to survive (the embedded default) or GT_RECONNECT_GRACE=0.
  std::unique_ptr<ResumeLog> resume_;       // GUARDED_BY(mu_)
  std::chrono::milliseconds reconnect_grace_{0};  // GUARDED_BY(mu_): GT_RECONNECT_GRACE
  uint64_t token_ = 0;                      // GUARDED_BY(mu_): the HELLO token, presented again by a RESUME
  std::thread heartbeat_;
  CurveClientKeys curve_;  // set before heartbeat_ starts; read-only after
  std::atomic<bool> stop_heartbeat_{false};
};

}  // namespace gt::client_internal
