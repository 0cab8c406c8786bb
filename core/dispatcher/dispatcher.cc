#include "dispatcher/dispatcher.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <utility>

#include "dispatcher/client_protocol.h"
#include "dispatcher/client_shares.h"
#include "dispatcher/client_table.h"
#include "dispatcher/dispatcher_events.h"
#include "dispatcher/listener_security.h"
#include "dispatcher/peer_outbox.h"
#include "dispatcher/router.h"
#include "dispatcher/session_resume.h"
#include "dispatcher/stats_fanout.h"
#include "dispatcher/sync_tracker.h"
#include "dispatcher/worker_membership.h"
#include "gt/log.h"
#include "host/host_metrics.h"
#include "host/host_snapshot.h"
#include "host/pipeline.h"
#include "net/peer_address.h"
#include "net/transport.h"
#include "net/zap_handler.h"

namespace gt {
namespace {

using Clock = std::chrono::steady_clock;

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

// "dispatcher 'id' (stages: a, b)", as errors about a missing stage name it.
std::string DescribeHost(const HostManifest& manifest) {
  std::string stages;
  for (const auto& stage : manifest.stages) stages += (stages.empty() ? "" : ", ") + stage.name;
  return "dispatcher '" + manifest.id + "' (stages: " + (stages.empty() ? "none" : stages) + ")";
}

}  // namespace

class Dispatcher::Impl {
 public:
  Impl(const HostManifest& manifest, zmq::context_t& context, prometheus::Registry& registry)
      : manifest_(manifest),
        context_(context),
        socket_(context, zmq::socket_type::router),
        monitor_(context, zmq::socket_type::pair),
        registry_(registry),
        metrics_(HostKind::kDispatcher, manifest.id, registry),
        events_(clients_),
        outbox_(socket_, manifest.id, metrics_, workers_, clients_, events_),
        syncs_(workers_, outbox_, manifest.id),
        stats_(workers_, outbox_,
               [this] {
                 return TakeSnapshot(registry_, HostKind::kDispatcher, manifest_.id, PipelineStageNames(manifest_, "router"));
               }),
        router_(clients_, workers_, syncs_, [this] { membership_->Flush(); }),
        resume_(std::chrono::milliseconds(manifest.resume_wait_ms), std::chrono::milliseconds(manifest.reconnect_grace_ms)) {
    socket_.set(zmq::sockopt::router_mandatory, 1);
    socket_.set(zmq::sockopt::sndhwm, PeerOutbox::kQueueMessages);
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
    Result<std::unique_ptr<ZapHandler>> zap = SecureListener(manifest_, context_, socket_);
    if (!zap.ok()) return zap.status();
    zap_ = std::move(*zap);
    Result<std::unique_ptr<Pipeline>> pipeline = Pipeline::Build(manifest_, metrics_, registry);
    if (!pipeline.ok()) return pipeline.status();
    pipeline_ = std::move(*pipeline);
    events_.set_sinks(&pipeline_->events());
    clients_protocol_ =
        std::make_unique<ClientProtocol>(manifest_, metrics_, clients_, *pipeline_, outbox_, stats_, events_);
    membership_ = std::make_unique<WorkerMembership>(
        manifest_, metrics_, workers_, clients_, syncs_, stats_, router_, *pipeline_, outbox_, events_,
        WorkerMembership::Hooks{[this] { HandleMonitorEvents(); }, [this] { clients_protocol_->ReleaseBacklog(); },
                                [this] {
                                  // The stages hear of the rejoined worker before a session placed on it resumes.
                                  membership_->EndPass();
                                  clients_protocol_->RetryResumes(Clock::now());
                                }});
    membership_->set_resume_book(&resume_);
    clients_protocol_->set_resume_book(&resume_);
    // What a restarted dispatcher checks a RESUME against (session_resume.h).
    workers_.SetSessionSource([this](ClientId id) -> std::optional<wire::ClientSession> {
      const ClientState* c = clients_.Find(id);
      if (!c || c->token == 0) return std::nullopt;
      wire::ClientSession session;
      session.set_client(id);
      session.set_digest(SessionDigest(c->token));
      session.set_key(c->key);
      return session;
    });
    pipeline_->SetTerminal(&router_, "router");
    pipeline_->SetErrorSink([this](const OpRef& ref, const Status& s) { clients_protocol_->RecordError(ref, s); });
    router_.set_events(&pipeline_->events());
    router_.set_host_description(DescribeHost(manifest_));
    workers_.SetShareSource([this](ClientId id) { return ShareOf(manifest_, clients_.Find(id), id); });
    clients_protocol_->set_placer([this](ClientState& c, Instruction& inst) { PlaceByLoad(workers_, c, inst); });
    return Status::Ok();
  }

  Status Bind(const std::string& endpoint) {
    if (Status s = CheckEndpoint(endpoint); !s.ok()) return s;
    if (Status s = CheckExposure(manifest_.security, endpoint); !s.ok()) return s;
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
      const auto wait = outbox_.has_held() ? std::chrono::milliseconds(1) : tick;
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
      // WorkerMembership::ConnectionClosed.) Then look at the clock.
      for (int n = 0; ready > 0 && n < 1024; ++n) {
        auto frames = ReceiveFrames(socket_, zmq::recv_flags::dontwait);
        if (!frames) break;
        HandleFrames(std::move(*frames));
      }
      HandleMonitorEvents();
      if (outbox_.has_held()) outbox_.SendHeld();
      if (outbox_.has_unread()) clients_protocol_->DropUnread();
      near_sync = syncs_.TakeActivity();
      if (Clock::now() >= next_check) {
        const auto now = Clock::now();
        membership_->LoseSilent(now);
        // Clients that send heartbeats (token != 0) get the same treatment.
        clients_protocol_->DropSilent(now, 2 * std::chrono::milliseconds(manifest_.heartbeat_timeout_ms));
        stats_.Expire(Clock::now());
        clients_protocol_->RetryResumes(Clock::now());
        membership_->DropUnclaimed(Clock::now());
        next_check = Clock::now() + tick;
      }
      membership_->EndPass();
    }
  }

 private:
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
      if (event == ZMQ_EVENT_DISCONNECTED) membership_->ConnectionClosed(static_cast<int>(fd));
    }
  }

  // One message: a registered worker's goes to the membership; from anyone
  // else, after the role check, a registration to the membership and the
  // rest to the client protocol.
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
    // What this message makes anyone log is charged to its peer (gt/log.h).
    // Without a key, an address: a peer reconnecting gets a new route, not a
    // new budget (every ipc peer is one, this machine's users).
    const std::string peer = worker              ? "worker #" + std::to_string(*worker)
                             : !peer_key.empty() ? peer_key
                             : !peer_ip.empty()  ? peer_ip
                                                 : "local ipc";
    log::WarningPeer charged(peer);
    Result<WireMessage> msg = DecodeFrames(std::move(frames), true);
    if (!msg.ok()) return outbox_.Reject(route, msg.status());
    metrics_.bytes_received.Increment(static_cast<double>(msg->bytes));
    if (worker) return membership_->Handle(*worker, *msg);
    const wire::Envelope::Kind kind = msg->envelope.kind();
    if (kind == wire::Envelope::HEARTBEAT && membership_->HandleStrayHeartbeat(*msg, peer_fd, peer_key)) return;
    // A worker's replies meant for the dispatcher before this one (or for
    // this one before it lost the worker), sent on as its connection came
    // back: nobody to give them to, and no error (it would end the worker).
    if (kind == wire::Envelope::SYNC_ACK || kind == wire::Envelope::DATA || kind == wire::Envelope::STATS_REPLY) return;
    // A worker's heartbeat (or goodbye) that reaches a restarted dispatcher
    // before its registration does: the token is nobody's yet, the REGISTER
    // follows. Refusing it would end the worker and lose what it holds.
    if (zap_ && role == PeerRole::kWorker && (kind == wire::Envelope::HEARTBEAT || kind == wire::Envelope::BYE)) return;
    if (zap_)
      if (Status s = CheckRole(role, kind); !s.ok()) return outbox_.Reject(route, s);
    if (kind == wire::Envelope::REGISTER) return membership_->Register(route, msg->envelope, peer_ip, peer_fd, peer_key);
    if (kind == wire::Envelope::ATTACH) return membership_->Attach(route, msg->envelope, peer_fd, peer_key);
    clients_protocol_->Handle(*msg, peer_key);
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
  DispatcherEvents events_;
  PeerOutbox outbox_;
  SyncTracker syncs_;
  StatsFanout stats_;
  Router router_;
  ResumeBook resume_;  // sessions the workers hold that no client has resumed yet
  std::unique_ptr<Pipeline> pipeline_;
  std::unique_ptr<ClientProtocol> clients_protocol_;  // after pipeline_: it pushes into it
  std::unique_ptr<WorkerMembership> membership_;
  std::unique_ptr<ZapHandler> zap_;  // null: no authentication (loopback or insecure)
};

Dispatcher::Dispatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Dispatcher::~Dispatcher() = default;

Result<std::unique_ptr<Dispatcher>> Dispatcher::Create(const HostManifest& manifest, zmq::context_t& context,
                                                       prometheus::Registry& registry) {
  if (manifest.host != HostKind::kDispatcher) return InvalidArgument(manifest.source + ": not a dispatcher manifest");
  if (Status s = CheckClientShares(manifest); !s.ok()) return s;  // after the command line's keys
  log::RouteProtobufLog();  // a peer's malformed message must not write a line each (gt/log.h)
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
