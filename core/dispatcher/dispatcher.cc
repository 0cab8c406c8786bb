#include "dispatcher/dispatcher.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <iostream>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "dispatcher/admission.h"
#include "dispatcher/client_table.h"
#include "ir/codec.h"
#include "net/curve_keys.h"
#include "gt/log.h"
#include "gt/op_attrs.h"
#include "gt/unit.h"
#include "host/host_metrics.h"
#include "host/host_snapshot.h"
#include "net/peer_address.h"
#include "host/pipeline.h"
#include "dispatcher/router.h"
#include "dispatcher/stats_fanout.h"
#include "dispatcher/sync_tracker.h"
#include "net/transport.h"
#include "net/zap_handler.h"

namespace gt {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kGoodbye = "said goodbye";

// Messages queued toward one peer before it counts as not reading
// (ZeroMQ's own default). A client that reads holds at most one sync's
// replies; a worker's I/O thread reads its batches as they come. Unbounded,
// a peer that never reads (a raw client sending STATS or fetches) would grow
// the shared dispatcher's memory until the machine killed it.
constexpr int kPeerQueueMessages = 1000;

// The IP a tcp peer connected from ("" for ipc:// and inproc://), read from
// the message's ZeroMQ metadata.
std::string PeerIp(zmq::message_t& frame) {
  const char* address = zmq_msg_gets(frame.handle(), "Peer-Address");
  return address ? address : "";
}

// The file descriptor of the connection a message came on (-1 for inproc://
// or when unknown): a monitor's disconnect event names only that.
int PeerFd(zmq::message_t& frame) {
  const int fd = zmq_msg_get(frame.handle(), ZMQ_SRCFD);
  return fd >= 0 ? fd : -1;
}

constexpr const char* kConnectionClosed = "its connection closed";

// "dispatcher 'id' (stages: a, b)", as errors about a missing stage name it.
std::string DescribeHost(const HostManifest& manifest) {
  std::string stages;
  for (const auto& stage : manifest.stages) stages += (stages.empty() ? "" : ", ") + stage.name;
  return "dispatcher '" + manifest.id + "' (stages: " + (stages.empty() ? "none" : stages) + ")";
}

}  // namespace

class Dispatcher::Impl final : public PeerSender {
 public:
  Impl(const HostManifest& manifest, zmq::context_t& context, prometheus::Registry& registry)
      : manifest_(manifest),
        context_(context),
        socket_(context, zmq::socket_type::router),
        monitor_(context, zmq::socket_type::pair),
        registry_(registry),
        metrics_(HostKind::kDispatcher, manifest.id, registry),
        syncs_(workers_, *this, manifest.id),
        stats_(workers_, *this,
               [this] {
                 return TakeSnapshot(registry_, HostKind::kDispatcher, manifest_.id, PipelineStageNames(manifest_, "router"));
               }),
        router_(clients_, workers_, syncs_, [this] { FlushWorkers(); }) {
    socket_.set(zmq::sockopt::router_mandatory, 1);
    socket_.set(zmq::sockopt::sndhwm, kPeerQueueMessages);
    socket_.set(zmq::sockopt::rcvhwm, 0);
    socket_.set(zmq::sockopt::linger, 0);
    // A worker killed outright (SIGKILL, a machine gone) is lost as soon as
    // its connection closes, not after the heartbeat timeout: its clients
    // hear of it at once (README, "When a worker dies").
    const std::string monitor = UniqueInprocEndpoint("gt-dispatcher-monitor");
    monitor_.set(zmq::sockopt::linger, 0);
    if (zmq_socket_monitor(socket_.handle(), monitor.c_str(), ZMQ_EVENT_DISCONNECTED) == 0) monitor_.connect(monitor);
  }

  Status Init(prometheus::Registry& registry) {
    if (Status s = InitSecurity(); !s.ok()) return s;
    Result<std::unique_ptr<Pipeline>> pipeline = Pipeline::Build(manifest_, metrics_, registry);
    if (!pipeline.ok()) return pipeline.status();
    pipeline_ = std::move(*pipeline);
    pipeline_->SetTerminal(&router_, "router");
    pipeline_->SetErrorSink([this](const OpRef& ref, const Status& s) { RecordError(ref, s); });
    router_.set_events(&pipeline_->events());
    router_.set_host_description(DescribeHost(manifest_));
    admission_ = Admission(manifest_.limits,
                           metrics_.ForQuota("live_tensors", static_cast<double>(manifest_.limits.max_live_tensors)),
                           metrics_.ForQuota("inflight", static_cast<double>(manifest_.limits.max_inflight)));
    sessions_quota_ =
        metrics_.ForQuota("sessions_per_key", static_cast<double>(manifest_.limits.max_sessions_per_key));
    return Status::Ok();
  }

  // With a key: CURVE on every connection, and the ZAP handler admitting
  // the allow-listed keys, each under its role.
  Status InitSecurity() {
    const SecurityConfig& security = manifest_.security;
    if (!security.enabled()) return Status::Ok();
    Result<CurveKeyPair> own = ReadCurveKeyFile(security.key, true);
    if (!own.ok()) return own.status();
    Result<std::vector<std::string>> clients = ReadCurvePublicKeys(security.client_keys);
    if (!clients.ok()) return clients.status();
    Result<std::vector<std::string>> workers = ReadCurvePublicKeys(security.worker_keys);
    if (!workers.ok()) return workers.status();
    Result<std::unique_ptr<ZapHandler>> zap = ZapHandler::Create(context_, *clients, *workers);
    if (!zap.ok()) return zap.status();
    zap_ = std::move(*zap);
    socket_.set(zmq::sockopt::curve_server, 1);
    socket_.set(zmq::sockopt::curve_secretkey, own->secret_key);
    socket_.set(zmq::sockopt::zap_domain, "gt");
    // A peer that connects and never completes the handshake is dropped.
    socket_.set(zmq::sockopt::handshake_ivl, static_cast<int>(manifest_.heartbeat_timeout_ms));
    return Status::Ok();
  }

  // Without keys, any peer that reaches the dispatcher may register as a
  // worker and read every client's data: only loopback (or inproc/ipc,
  // guarded by the file system) unless the manifest says insecure.
  Status CheckExposure(const std::string& endpoint) const {
    if (manifest_.security.enabled() || manifest_.security.insecure) return Status::Ok();
    const std::string host = TcpEndpointHost(endpoint);
    if (host.empty() || IsLoopbackAddress(host)) return Status::Ok();
    return FailedPrecondition("refusing to listen on " + endpoint +
                              " without authentication: any peer reaching it could register as a worker and read "
                              "every client's tensors. Give keys (security: {key, clients, workers}; gt keygen "
                              "writes them; see docs/SECURITY.md), bind 127.0.0.1, or accept the risk with "
                              "security: {insecure: true} (--insecure)");
  }

  Status Bind(const std::string& endpoint) {
    if (Status s = CheckEndpoint(endpoint); !s.ok()) return s;
    if (Status s = CheckExposure(endpoint); !s.ok()) return s;
    try {
      socket_.bind(endpoint);
    } catch (const zmq::error_t& e) {
      return Unavailable("cannot bind " + endpoint + ": " + e.what());
    }
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    return Status::Ok();
  }

  std::string endpoint() const { return endpoint_; }
  const WorkerRegistry& workers() const { return workers_; }

  void set_busy_wait(std::chrono::microseconds busy_wait) { busy_wait_ = busy_wait; }

  void Run(const std::atomic<bool>& stop) {
    auto tick = std::chrono::milliseconds(std::max<int64_t>(10, manifest_.heartbeat_interval_ms / 2));
    Clock::time_point next_check = Clock::now() + tick;
    bool near_sync = false;  // a sync began or was answered in the last pass
    while (!stop.load(std::memory_order_relaxed)) {
      zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                                 {monitor_.handle(), 0, ZMQ_POLLIN, 0},
                                 {zap_ ? zap_->socket().handle() : nullptr, 0, ZMQ_POLLIN, 0}};
      int ready = 0;
      // Held messages are tried again soon: their queues drain on ZeroMQ's I/O thread.
      const auto wait = held_.empty() ? tick : std::chrono::milliseconds(1);
      try {
        ready = PollWithBusyWait(items, zap_ ? 3 : 2, wait, near_sync ? busy_wait_ : std::chrono::microseconds(0));
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) return;
        continue;
      }
      if (zap_) zap_->AnswerPending();
      // Drain what is waiting, then the closed connections: what a peer
      // sent before it closed (a worker's BYE) is queued before the close
      // is reported, so it is read first. (A registration reads the closes
      // itself first: a new peer's fd may be a closed one's, see
      // ConnectionClosed.) Then look at the clock.
      for (int n = 0; ready > 0 && n < 1024; ++n) {
        auto frames = ReceiveFrames(socket_, zmq::recv_flags::dontwait);
        if (!frames) break;
        HandleFrames(std::move(*frames));
      }
      HandleMonitorEvents();
      if (!held_.empty()) SendHeld();
      if (!unread_.empty()) DropUnreadClients();
      near_sync = syncs_.TakeActivity();
      if (Clock::now() >= next_check) {
        CheckLiveness();
        stats_.Expire(Clock::now());
        next_check = Clock::now() + tick;
      }
      // Announced here, outside any pipeline pass (a worker can be lost in
      // the middle of one).
      if (!lost_unreported_.empty()) ReportLostWorkers();
      if (membership_changed_) {
        membership_changed_ = false;
        AnnounceMembership();
      }
    }
  }

  // PeerSender: every message leaves through here.
  bool Send(const std::string& route, const wire::Envelope& env, const std::vector<BlobPtr>& frames) override {
    if (auto held = held_.find(route); held != held_.end()) {  // after those held before it, in order
      held->second.push_back({env, frames});
      return true;
    }
    Result<size_t> sent = SendEnvelope(socket_, route, env, frames);
    if (sent.ok()) {
      CountSent(route, env, *sent);
      return true;
    }
    return sent.status().code() == Code::kResourceExhausted && QueueFull(route, env, frames);
  }

 private:
  // ---- a peer that does not read ------------------------------------------

  struct HeldMessage {
    wire::Envelope env;
    std::vector<BlobPtr> frames;
  };

  void CountSent(const std::string& route, const wire::Envelope& env, size_t bytes) {
    if (LogsEvents()) RecordReply(route, env, bytes);
    metrics_.messages_sent.Increment();
    metrics_.bytes_sent.Increment(static_cast<double>(bytes));
  }

  // `route`'s queue is full. A worker's fills only in a burst its I/O thread
  // has not drained yet: the message waits here, and Run() sends it when
  // there is room. A client with kPeerQueueMessages replies unread reads
  // none: it is dropped after this pass (its tensors freed), and nothing
  // more is queued for it. Returns whether the message will still go.
  bool QueueFull(const std::string& route, const wire::Envelope& env, const std::vector<BlobPtr>& frames) {
    if (workers_.FindByRoute(route)) {
      held_[route].push_back({env, frames});
      return true;
    }
    if (ClientState* c = clients_.FindByRoute(route)) unread_.insert(c->id);
    return false;
  }

  // Each held queue in order, until one is full again.
  void SendHeld() {
    for (auto it = held_.begin(); it != held_.end();) {
      std::deque<HeldMessage>& queue = it->second;
      while (!queue.empty()) {
        Result<size_t> sent = SendEnvelope(socket_, it->first, queue.front().env, queue.front().frames);
        if (!sent.ok() && sent.status().code() == Code::kResourceExhausted) break;
        if (sent.ok()) CountSent(it->first, queue.front().env, *sent);  // else its worker is gone
        queue.pop_front();
      }
      it = queue.empty() ? held_.erase(it) : std::next(it);
    }
  }

  void DropUnreadClients() {
    for (ClientId id : std::exchange(unread_, {}))
      DropClient(id, "it left " + std::to_string(kPeerQueueMessages) + " replies unread");
  }

  // ---- incoming messages ---------------------------------------------------

  // zmq_socket_monitor's events: two frames, the first holding the event
  // (uint16) and its value (uint32: the fd, for a disconnect).
  void HandleMonitorEvents() {
    for (;;) {
      auto frames = ReceiveFrames(monitor_, zmq::recv_flags::dontwait);
      if (!frames) return;
      if (frames->empty() || (*frames)[0].size() < 6) continue;
      uint16_t event = 0;
      uint32_t fd = 0;
      std::memcpy(&event, (*frames)[0].data(), sizeof(event));
      std::memcpy(&fd, static_cast<const char*>((*frames)[0].data()) + sizeof(event), sizeof(fd));
      if (event == ZMQ_EVENT_DISCONNECTED) ConnectionClosed(static_cast<int>(fd));
    }
  }

  // A connection's fd is reused by the next one accepted; the monitor queues
  // the close before that accept, and Run() reads it before the socket (and
  // RegisterWorker again, for a close that came during a drain), so `fd`
  // still names the closed connection's worker here.
  //
  // A worker is lost with its work connection. Its control connection alone
  // closing loses only the heartbeats and STATS path: on a graceful stop it
  // may close before the BYE on the work connection is read, and the loss
  // must still read as a goodbye.
  void ConnectionClosed(int fd) {
    if (std::optional<size_t> w = workers_.FindByFd(fd)) WorkerLost(*w, kConnectionClosed);
    else if (std::optional<size_t> c = workers_.FindByControlFd(fd)) workers_.DetachControl(*c);
  }

  void HandleFrames(std::vector<zmq::message_t>&& frames) {
    std::string route = frames.empty() ? std::string() : frames[0].to_string();
    metrics_.messages_received.Increment();
    std::optional<size_t> worker = workers_.FindByRoute(route);
    // Where a peer that may be registering connected from (for discovery),
    // and on which connection (to notice it closing).
    std::string peer_ip = !worker && !frames.empty() ? PeerIp(frames.back()) : std::string();
    const int peer_fd = !worker && !frames.empty() ? PeerFd(frames.back()) : -1;
    const PeerRole role = frames.empty() ? PeerRole::kAny : PeerRoleOf(frames.back());
    const std::string peer_key = worker || frames.empty() ? std::string() : PeerKeyOf(frames.back());
    Result<WireMessage> msg = DecodeFrames(std::move(frames), true);
    if (!msg.ok()) return RejectMessage(route, msg.status());
    metrics_.bytes_received.Increment(static_cast<double>(msg->bytes));
    if (worker) return HandleWorkerMessage(*worker, *msg);
    if (msg->envelope.kind() == wire::Envelope::HEARTBEAT && HandleStrayWorkerHeartbeat(*msg, peer_fd, peer_key)) return;
    if (Status s = CheckRole(role, msg->envelope.kind()); !s.ok()) return RejectMessage(route, s);
    HandleClientMessage(*msg, peer_ip, peer_fd, peer_key);
  }

  // A heartbeat carrying a worker's token from a connection no worker holds:
  // ZeroMQ reconnected that worker's control connection (it is attached
  // again), or this dispatcher lost the worker (it is told so, and ends
  // rather than live on unheard). False: not a worker's.
  bool HandleStrayWorkerHeartbeat(const WireMessage& msg, int fd, const std::string& key) {
    const uint64_t token = msg.envelope.token();
    if (token == 0 || clients_.FindByToken(token)) return false;
    std::optional<size_t> w = workers_.FindByToken(token);
    if (!w || workers_.at(*w).key != key) return false;
    if (workers_.IsAlive(*w)) {
      AttachWorkerControl(msg.routing_id, msg.envelope, fd, key);
      return true;
    }
    SendError(msg.routing_id, Unavailable("dispatcher " + manifest_.id + " lost worker " + workers_.at(*w).name +
                                          ": start it again"));
    return true;
  }

  // With authentication on, a connection's role is the one its key was
  // admitted under: only a worker's key registers, and a worker's key opens
  // no client session (it could otherwise name itself a client's worker).
  Status CheckRole(PeerRole role, wire::Envelope::Kind kind) const {
    if (!zap_) return Status::Ok();
    const bool registering = kind == wire::Envelope::REGISTER || kind == wire::Envelope::ATTACH;
    if (registering && role != PeerRole::kWorker)
      return InvalidArgument(std::string("a ") + PeerRoleName(role) + " may not register as a worker (only a key on the workers list may)");
    if (!registering && role != PeerRole::kClient)
      return InvalidArgument(std::string("a ") + PeerRoleName(role) + " connection carries no client messages; register first");
    return Status::Ok();
  }

  void RejectMessage(const std::string& route, const Status& status) {
    metrics_.malformed_messages.Increment();
    SendError(route, Status(status.code(), "dispatcher " + manifest_.id + " rejected a message: " + status.message()));
  }

  // An ERROR envelope to the peer at `route` (none for an empty route).
  void SendError(const std::string& route, const Status& status) {
    if (route.empty()) return;
    wire::Envelope reply;
    reply.set_kind(wire::Envelope::ERROR);
    wire::OpError* e = reply.add_errors();
    e->set_code(static_cast<uint32_t>(status.code()));
    e->set_message(status.message());
    e->set_host(manifest_.id);
    Send(route, reply, {});
  }

  // `peer_key`: the CURVE public key the connection proved ("" without keys).
  void HandleClientMessage(WireMessage& msg, const std::string& peer_ip, int peer_fd, const std::string& peer_key) {
    const wire::Envelope& env = msg.envelope;
    switch (env.kind()) {
      case wire::Envelope::HELLO:
        // The token names the client's heartbeats: without them a client
        // that vanished would never be cleaned up.
        if (env.token() == 0) return RejectMessage(msg.routing_id, InvalidArgument("HELLO carries no heartbeat token"));
        return Hello(msg.routing_id, env.token(), peer_key);
      case wire::Envelope::BATCH:
        // Nothing is kept for a peer that never said HELLO; a session is
        // the key's that opened it, whatever routing id a peer claims.
        if (ClientState* c = clients_.FindByRoute(msg.routing_id)) {
          if (c->key != peer_key) return RejectMessage(msg.routing_id, InvalidArgument("this session belongs to another key"));
          return HandleBatch(*c, msg);
        }
        if (std::optional<std::string> why = clients_.ClosedWhy(msg.routing_id))
          return RejectMessage(msg.routing_id, Unavailable("this client's session was closed (" + *why +
                                                           "); its tensors are gone: connect again"));
        return RejectMessage(msg.routing_id, FailedPrecondition("no session: a client says HELLO before its first batch"));
      case wire::Envelope::HEARTBEAT:
        if (ClientState* c = clients_.FindByToken(env.token())) c->last_seen = Clock::now();
        return;
      case wire::Envelope::BYE:
        if (ClientState* c = clients_.FindByRoute(msg.routing_id)) DropClient(c->id, kGoodbye);
        return;
      case wire::Envelope::REGISTER:
        return RegisterWorker(msg.routing_id, env, peer_ip, peer_fd, peer_key);
      case wire::Envelope::ATTACH:
        return AttachWorkerControl(msg.routing_id, env, peer_fd, peer_key);
      case wire::Envelope::STATS:
        // Only a session's: answers to a peer that never said HELLO would
        // be queued for nobody.
        if (!clients_.FindByRoute(msg.routing_id))
          return RejectMessage(msg.routing_id, FailedPrecondition("no session: a client says HELLO before STATS"));
        return stats_.Begin(msg.routing_id, env);
      default:
        return RejectMessage(msg.routing_id, InvalidArgument("unexpected message kind " +
                                                             wire::Envelope::Kind_Name(env.kind()) + " from a client"));
    }
  }

  // One key's sessions are capped: the per-session quotas then bound what
  // the key holds. A repeated HELLO on an open session changes nothing.
  void Hello(const std::string& route, uint64_t token, const std::string& key) {
    const int64_t cap = manifest_.limits.max_sessions_per_key;
    const bool new_session = clients_.FindByRoute(route) == nullptr;
    if (new_session && cap > 0 && static_cast<int64_t>(clients_.SessionsOf(key)) >= cap) {
      if (sessions_quota_.refusals) sessions_quota_.refusals->Increment();
      return RejectMessage(route, ResourceExhausted("this client key already holds " + std::to_string(cap) +
                                                    " sessions, its limit (limits.max_sessions_per_key): "
                                                    "close one first"));
    }
    ClientFor(route, token).key = key;
  }

  ClientState& ClientFor(const std::string& route, uint64_t token) {
    bool created = false;
    ClientState& c = clients_.ForRoute(route, token, &created);
    if (created) {
      metrics_.clients_connected.Increment();
      GT_LOG(kDispatcher, manifest_.id << ": client " << c.id << " connected");
      if (LogsEvents()) Record(HostEventKind::kConnect, "client " + std::to_string(c.id), "client", "");
    }
    return c;
  }

  void HandleBatch(ClientState& c, WireMessage& msg) {
    GT_LOG(kDispatcher, manifest_.id << ": batch of " << msg.envelope.instructions_size() << " instructions from client "
                                     << c.id);
    for (const wire::Instruction& wi : msg.envelope.instructions()) {
      Result<Instruction> inst = DecodeInstruction(wi, msg.frames);
      const OpRef ref{c.id, wi.seq(), wi.op() < static_cast<uint32_t>(Op::kCount) ? static_cast<Op>(wi.op()) : Op::kSync};
      if (!inst.ok()) {
        metrics_.malformed_messages.Increment();
        wire::OpError e = MakeOpError(ref, inst.status(), manifest_.id);
        e.set_op(wi.op());  // as sent: the client calls a code it does not know "op N", not the sync of `ref`
        c.errors.push_back(std::move(e));
        continue;
      }
      inst->client = c.id;  // the namespace is the connection's, whatever the message says
      if (Status s = admission_.Admit(c, *inst); !s.ok()) {
        RecordError(ref, s);
        continue;
      }
      if (inst->op == Op::kDefineUnit || inst->op == Op::kRunUnit) ClientTable::KeyUnitByContent(c, *inst);
      // Held until the first worker registers and the stages know it, so
      // that every stage error names the client's own instruction.
      if (!ever_had_worker_) backlog_.push_back(std::move(*inst));
      else pipeline_->Push(std::move(*inst));
    }
    pipeline_->EndBatch();
  }

  void HandleWorkerMessage(size_t w, WireMessage& msg) {
    workers_.Touch(w);
    const wire::Envelope& env = msg.envelope;
    switch (env.kind()) {
      case wire::Envelope::HEARTBEAT:
        return;
      case wire::Envelope::SYNC_ACK:
        if (ClientState* c = clients_.Find(env.client())) syncs_.OnAck(*c, w, env);
        return;  // else the client left meanwhile
      case wire::Envelope::DATA:
        return ForwardData(msg);
      case wire::Envelope::BYE:
        return WorkerLost(w, kGoodbye);
      case wire::Envelope::REGISTER:
      case wire::Envelope::ATTACH:
        return;  // a repeated registration changes nothing
      case wire::Envelope::STATS_REPLY:
        return stats_.OnReply(w, env);
      default:
        metrics_.malformed_messages.Increment();
        std::cerr << "dispatcher: unexpected " << wire::Envelope::Kind_Name(env.kind()) << " from worker "
                  << workers_.at(w).name << "\n";
    }
  }

  void ForwardData(WireMessage& msg) {
    ClientState* c = clients_.Find(msg.envelope.client());
    if (!c) return;
    msg.envelope.clear_client();
    Send(c->route, msg.envelope, msg.frames);
  }

  // ---- workers -------------------------------------------------------------

  void RegisterWorker(const std::string& route, const wire::Envelope& env, const std::string& peer_ip, int fd,
                      const std::string& key) {
    // The close of a connection whose fd this one reuses is queued before
    // this connection's accept, but may have arrived during this drain:
    // read it now, or it would be taken for this worker's. Losses found
    // while flushing are reported before a replacement takes their index.
    HandleMonitorEvents();
    if (!lost_unreported_.empty()) ReportLostWorkers();
    // An open connection's fd is unique: a live worker still on this one
    // had its connection closed (its monitor event was lost).
    ConnectionClosed(fd);
    // A worker registering under the id of one that has missed two
    // heartbeats replaces it: a restart of a hung or unreachable process
    // not yet past its heartbeat timeout. One that is heard from keeps its
    // place (two workers may share an id, e.g. the default "worker").
    if (std::optional<size_t> old = workers_.FindLiveByName(env.name()))
      if (Clock::now() - workers_.at(*old).last_seen > 2 * std::chrono::milliseconds(manifest_.heartbeat_interval_ms))
        WorkerLost(*old, "replaced by a new registration under its id");
    const size_t index = workers_.Register(route, env.name(), env.metrics_endpoint(), peer_ip, fd, env.token(), key);
    GT_LOG(kDispatcher, manifest_.id << ": worker " << env.name() << " registered as #" << index
                                     << (peer_ip.empty() ? "" : " from " + peer_ip));
    metrics_.workers_connected.Increment();
    if (LogsEvents())
      Record(HostEventKind::kConnect, "worker " + workers_.at(index).name, "worker",
             "index=" + std::to_string(index) + (peer_ip.empty() ? "" : " from=" + peer_ip));
    wire::Envelope welcome;
    welcome.set_kind(wire::Envelope::WELCOME);
    welcome.set_worker_index(static_cast<uint32_t>(index));
    Send(route, welcome, {});
    if (!ever_had_worker_) ReplayBacklog();
    membership_changed_ = true;
  }

  // A registered worker's second connection, for heartbeats and STATS
  // (wire.proto), in place of any it had. It must show the REGISTER's
  // token, and with keys the same key; a route that holds a client session
  // cannot become a worker's.
  void AttachWorkerControl(const std::string& route, const wire::Envelope& env, int fd, const std::string& key) {
    // As in RegisterWorker: closes queued before this connection's accept
    // are read first, and a live worker on this fd lost that connection.
    HandleMonitorEvents();
    ConnectionClosed(fd);
    std::optional<size_t> w = workers_.FindByToken(env.token());
    if (!w || !workers_.IsAlive(*w) || workers_.at(*w).key != key)
      return RejectMessage(route, InvalidArgument("ATTACH names no registered worker"));
    if (clients_.FindByRoute(route))
      return RejectMessage(route, InvalidArgument("a client's connection cannot become a worker's"));
    workers_.AttachControl(*w, route, fd);
    workers_.Touch(*w);
    GT_LOG(kDispatcher, manifest_.id << ": worker " << workers_.at(*w).name << " attached its control connection");
  }

  void ReplayBacklog() {
    ever_had_worker_ = true;
    AnnounceMembership();
    std::deque<Instruction> pending;
    pending.swap(backlog_);
    for (Instruction& inst : pending)
      if (clients_.Find(inst.client)) pipeline_->Push(std::move(inst));  // a client gone meanwhile is skipped
    pipeline_->EndBatch();
  }

  void CheckLiveness() {
    const auto now = Clock::now();
    const auto timeout = std::chrono::milliseconds(manifest_.heartbeat_timeout_ms);
    for (size_t w : workers_.Silent(now, timeout)) {
      metrics_.heartbeats_missed.Increment();
      WorkerLost(w, "missed heartbeats for " + std::to_string(manifest_.heartbeat_timeout_ms) + " ms");
    }
    // Clients that send heartbeats (token != 0) get the same treatment.
    for (ClientId id : clients_.Silent(now, 2 * timeout)) {
      metrics_.heartbeats_missed.Increment();
      DropClient(id, "no heartbeat for " + std::to_string(2 * manifest_.heartbeat_timeout_ms) + " ms");
    }
  }

  // The stages hear of a loss before the router (the router's error to each
  // client names the tensors the stages placed there); a loss found while
  // flushing, inside a pipeline pass, is reported once the pass is over.
  void WorkerLost(size_t w, const std::string& why) {
    held_.erase(workers_.at(w).route);
    held_.erase(workers_.at(w).control_route);
    if (!workers_.MarkLost(w)) return;
    metrics_.workers_connected.Decrement();
    GT_LOG(kDispatcher, manifest_.id << ": worker " << workers_.at(w).name << " disconnected (" << why << ")");
    if (LogsEvents()) Record(HostEventKind::kDisconnect, "worker " + workers_.at(w).name, "worker", why);
    if (why != kGoodbye)
      std::cerr << "dispatcher " << manifest_.id << ": worker " << workers_.at(w).name << " lost (" << why << ")\n";
    lost_unreported_.emplace_back(w, why);
    if (!flushing_) ReportLostWorkers();
  }

  void ReportLostWorkers() {
    while (!lost_unreported_.empty()) {
      auto [w, why] = std::move(lost_unreported_.front());
      lost_unreported_.pop_front();
      std::vector<int64_t> live = workers_.LiveIndexes();
      // Not live (RegisterWorker reports losses before a replacement takes
      // an index); erased all the same, as the announcement must not list it.
      std::erase(live, static_cast<int64_t>(w));
      pipeline_->Push(MakeMembership(live, LostWorker{static_cast<int>(w), workers_.at(w).name}));
      pipeline_->EndBatch();
      router_.OnWorkerLost(w, why);
      stats_.OnWorkerLost(w);
    }
  }

  // Tells the stages which workers are alive (the sharding modifier places
  // tensors on them).
  void AnnounceMembership() {
    pipeline_->Push(MakeMembership(workers_.LiveIndexes()));
    pipeline_->EndBatch();
  }

  void FlushWorkers() {
    auto send = [this](const WorkerState& w) {
      GT_LOG(kDispatcher, manifest_.id << ": batch of " << w.outgoing.instructions_size() << " instructions to worker "
                                       << w.name);
      return Send(w.route, w.outgoing, w.payloads);
    };
    flushing_ = true;
    for (size_t w : workers_.Flush(send)) WorkerLost(w, "unreachable");
    flushing_ = false;
  }

  // ---- host events (gt/host_event.h) ---------------------------------------

  // Whether a stage records host events; test it before building one.
  bool LogsEvents() const { return pipeline_ && pipeline_->events().enabled(); }

  void Record(HostEventKind kind, const std::string& peer, std::string_view command, std::string_view detail) {
    HostEvent event{kind, peer};
    event.command = command;
    event.detail = detail;
    pipeline_->events().Emit(event);
  }

  // SEND: what a client got back (fetched data, a sync's answer, an error).
  void RecordReply(const std::string& route, const wire::Envelope& env, size_t bytes) {
    if (env.kind() != wire::Envelope::DATA && env.kind() != wire::Envelope::SYNC_DONE &&
        env.kind() != wire::Envelope::ERROR)
      return;
    const ClientState* c = clients_.FindByRoute(route);
    if (c == nullptr) return;  // a worker, or a peer that never said hello
    HostEvent event{HostEventKind::kSend, {}};
    std::string detail;
    if (env.kind() == wire::Envelope::DATA) {
      event.command = "fetch";
      detail = "fetch #" + std::to_string(env.seq()) + " tensor=%" + std::to_string(env.tensor());
    } else if (env.kind() == wire::Envelope::SYNC_DONE) {
      event.command = "sync";
      detail = "sync_id=" + std::to_string(env.sync_id()) + " errors=" + std::to_string(env.errors_size());
    } else {
      event.command = "error";
      detail = "errors=" + std::to_string(env.errors_size());
    }
    const std::string peer = "client " + std::to_string(c->id);
    event.peer = peer;
    event.bytes = bytes;
    event.detail = detail;
    pipeline_->events().Emit(event);
  }

  // ---- clients -------------------------------------------------------------

  void RecordError(const OpRef& ref, const Status& status) {
    ClientState* c = clients_.Find(ref.client);
    if (!c) {
      std::cerr << "dispatcher " << manifest_.id << ": " << status.ToString() << "\n";
      return;
    }
    c->errors.push_back(MakeOpError(ref, status, manifest_.id));
  }

  // The drop goes through the stages (they free what they keep for the
  // client) and reaches the workers from the router.
  void DropClient(ClientId id, std::string_view why) {
    if (!clients_.Find(id)) return;
    if (LogsEvents()) Record(HostEventKind::kDisconnect, "client " + std::to_string(id), "client", why);
    pipeline_->Push(MakeDropClient(id));
    pipeline_->EndBatch();
    if (why == kGoodbye) clients_.Erase(id);
    else clients_.Close(id, "dispatcher " + manifest_.id + ": " + std::string(why));
    GT_LOG(kDispatcher, manifest_.id << ": client " << id << " disconnected");
    metrics_.clients_connected.Decrement();
  }

  HostManifest manifest_;
  zmq::context_t& context_;
  zmq::socket_t socket_;
  zmq::socket_t monitor_;  // socket_'s disconnect events (zmq_socket_monitor)
  std::string endpoint_;
  std::chrono::microseconds busy_wait_{0};  // Run(): after a pass near a sync, poll this long before sleeping
  prometheus::Registry& registry_;  // outlives this host
  HostMetrics metrics_;
  ClientTable clients_;
  WorkerRegistry workers_;
  SyncTracker syncs_;
  StatsFanout stats_;
  Router router_;
  Admission admission_;
  QuotaMetrics sessions_quota_;
  std::unique_ptr<Pipeline> pipeline_;
  std::unique_ptr<ZapHandler> zap_;  // null: no authentication (loopback or insecure)

  bool ever_had_worker_ = false;
  bool membership_changed_ = false;  // announce the live workers to the stages
  bool flushing_ = false;            // inside FlushWorkers, so inside a pipeline pass
  std::deque<std::pair<size_t, std::string>> lost_unreported_;  // lost workers the stages and router have not heard of
  std::deque<Instruction> backlog_;  // client instructions that came before any worker
  std::unordered_map<std::string, std::deque<HeldMessage>> held_;  // by route: to workers whose queue was full
  std::unordered_set<ClientId> unread_;  // clients whose queue was full in this pass
};

Dispatcher::Dispatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Dispatcher::~Dispatcher() = default;

Result<std::unique_ptr<Dispatcher>> Dispatcher::Create(const HostManifest& manifest, zmq::context_t& context,
                                                       prometheus::Registry& registry) {
  if (manifest.host != HostKind::kDispatcher) return InvalidArgument(manifest.source + ": not a dispatcher manifest");
  auto impl = std::make_unique<Impl>(manifest, context, registry);
  if (Status s = impl->Init(registry); !s.ok()) return s;
  return std::unique_ptr<Dispatcher>(new Dispatcher(std::move(impl)));
}

Status Dispatcher::Bind(const std::string& endpoint) { return impl_->Bind(endpoint); }
std::string Dispatcher::endpoint() const { return impl_->endpoint(); }
void Dispatcher::Run(const std::atomic<bool>& stop) { impl_->Run(stop); }
void Dispatcher::set_busy_wait(std::chrono::microseconds busy_wait) { impl_->set_busy_wait(busy_wait); }
std::vector<WorkerEndpoint> Dispatcher::LiveWorkerEndpoints() const { return impl_->workers().LiveEndpoints(); }
size_t Dispatcher::LiveWorkerCount() const { return impl_->workers().PublishedLiveCount(); }

}  // namespace gt
