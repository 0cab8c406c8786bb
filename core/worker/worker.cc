#include "worker/worker.h"

#include <chrono>
#include <cstring>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "gt/log.h"
#include "gt/op_attrs.h"
#include "host/fair_share_wire.h"
#include "host/host_metrics.h"
#include "host/host_snapshot.h"
#include "host/pipeline.h"
#include "host/worker_lost_notice.h"
#include "ir/codec.h"
#include "net/curve_keys.h"
#include "net/handshake_verdict.h"
#include "net/peer_address.h"
#include "net/transport.h"
#include "worker/fair_scheduler.h"
#include "worker/first_refusal.h"
#include "worker/worker_rejoin.h"
#include "worker/worker_terminal.h"

namespace gt {
namespace {

using Clock = std::chrono::steady_clock;

// Control messages from the dispatcher are one frame whose first field is
// their kind (protobuf writes fields in number order: `kind` = 1 comes
// first as the bytes 0x08, KIND); a cheap look tells them from batches,
// which are decoded once, by the pipeline.
bool IsControlKind(const zmq::message_t& frame) {
  const auto* bytes = static_cast<const uint8_t*>(frame.data());
  return frame.size() >= 2 && bytes[0] == 0x08 &&
         (bytes[1] == wire::Envelope::STATS || bytes[1] == wire::Envelope::ERROR);
}

// The control message in `frames`: STATS (answered where it came) or ERROR
// (the dispatcher refused the worker, which ends it); nullopt for anything
// else.
std::optional<wire::Envelope> ControlMessage(const std::vector<zmq::message_t>& frames) {
  if (frames.size() != 1 || !IsControlKind(frames[0])) return std::nullopt;
  wire::Envelope env;
  if (!env.ParseFromArray(frames[0].data(), static_cast<int>(frames[0].size())) ||
      (env.kind() != wire::Envelope::STATS && env.kind() != wire::Envelope::ERROR))
    return std::nullopt;
  return env;
}

}  // namespace

// The registration and both connections' threads; the backend runs in the
// WorkerTerminal, on the pipeline thread.
class Worker::Impl {
 public:
  Impl(const HostManifest& manifest, zmq::context_t& context, prometheus::Registry& registry)
      : manifest_(manifest),
        context_(context),
        registry_(registry),
        metrics_(HostKind::kWorker, manifest.id, registry),
        link_(std::chrono::milliseconds(manifest.reconnect_grace_ms)),
        rejoiner_({[this] { return terminal_->Held(); }, [this](Instruction&& inst) { scheduler_->Push(std::move(inst)); },
                   [this](ClientId client) { return scheduler_->Waiting(client); },
                   [this](wire::Envelope& reg) { SendRegistration(reg); }}) {}

  Status Init(prometheus::Registry& registry) {
    const StageContext ctx = PluginContext(manifest_, *manifest_.backend, registry);
    Result<PluginInstance<Backend>> backend = CreateBackend(manifest_.backend->plugin, ctx);
    if (!backend.ok()) return backend.status();
    terminal_ = std::make_unique<WorkerTerminal>(manifest_.id, std::move(*backend), metrics_);
    const std::string plugin = manifest_.backend->plugin.descriptor->name;
    if (Status s = terminal_->CheckSupportsEveryOp(manifest_.source + ": backend plugin '" + plugin + "'"); !s.ok())
      return s;
    Result<std::unique_ptr<Pipeline>> pipeline = Pipeline::Build(manifest_, metrics_, registry);
    if (!pipeline.ok()) return pipeline.status();
    pipeline_ = std::move(*pipeline);
    scheduler_ = std::make_unique<FairScheduler>(
        *pipeline_, registry, manifest_.id,
        [this](const Instruction& inst, const Status& why) { terminal_->Refuse(inst, why); });
    scheduler_->SetBytesHeld([this](ClientId client) { return terminal_->ClientBytes(client); });
    terminal_->Connect([this](const wire::Envelope& env, const std::vector<BlobPtr>& frames) { SendOnWork(env, frames); },
                       &pipeline_->events());
    pipeline_->SetTerminal(terminal_.get(), manifest_.backend->name);
    pipeline_->SetErrorSink([this](const OpRef& ref, const Status& s) { terminal_->RecordError(ref, s); });
    return Status::Ok();
  }

  void set_metrics_endpoint(std::string e) { metrics_endpoint_ = std::move(e); }
  void set_busy_wait(std::chrono::microseconds busy_wait) { busy_wait_ = busy_wait; }
  bool declared_lost() const { return declared_lost_.load(std::memory_order_acquire); }

  // Two connections to the dispatcher (wire.proto): the work connection,
  // registered here and then owned by the pipeline thread, and the control
  // connection, which this (the I/O) thread attaches once the worker is
  // welcomed and keeps for heartbeats, STATS and the goodbye.
  Status Run(const std::string& dispatcher, const std::atomic<bool>& stop) {
    zmq::socket_t work(context_, zmq::socket_type::dealer);
    zmq::socket_t control(context_, zmq::socket_type::dealer);
    for (zmq::socket_t* dealer : {&work, &control})
      if (Status s = ConfigureDealer(*dealer); !s.ok()) return s;
    // The work connection may sit idle, or behind a busy pipeline thread,
    // while the control connection's heartbeats keep the worker alive:
    // ZeroMQ's PINGs, sent by its I/O thread, prove that this path still
    // carries traffic (the worker is lost with it). This side never times
    // it out itself: the dispatcher's answer can wait behind a large batch
    // still in transit, for longer than any timeout.
    SetConnectionHeartbeats(work, std::numeric_limits<int>::max());
    // The control connection carries only small messages both ways, so this
    // side does time it out: ZeroMQ then connects it again, and its next
    // heartbeat attaches it again (or, for a worker the dispatcher lost,
    // gets the error that ends it).
    SetConnectionHeartbeats(control, static_cast<int>(manifest_.heartbeat_timeout_ms));
    // A refused handshake ends the worker (libzmq would retry it forever),
    // with keys or without (a dispatcher that requires them).
    zmq::socket_t handshake_events(context_, zmq::socket_type::pair);
    handshake_events.set(zmq::sockopt::linger, 0);
    handshake_verdict_.emplace("worker", "--key, --server-key", "workers", dispatcher);
    const std::string events = UniqueInprocEndpoint("gt-worker-handshake");
    if (zmq_socket_monitor(work.handle(), events.c_str(), HandshakeVerdict::kEvents) == 0) {
      handshake_events.connect(events);
      handshake_events_ = &handshake_events;
    }
    if (Status s = CheckEndpoint(dispatcher); !s.ok()) return Status(s.code(), "worker " + manifest_.id + ": " + s.message());
    try {
      work.connect(dispatcher);
      control.connect(dispatcher);
    } catch (const zmq::error_t& e) {
      return Unavailable("worker " + manifest_.id + ": cannot connect to " + dispatcher + ": " + e.what());
    }
    token_ = RandomToken();
    SendControl(work, wire::Envelope::REGISTER);
    GT_LOG(kWorker, manifest_.id << ": registering with " << dispatcher);
    // Starting the thread orders this thread's use of `work` before its.
    std::atomic<bool> pipeline_stop{false};
    std::thread pipeline_thread([&] { PipelineLoop(work, pipeline_stop); });
    const bool attached = IoLoop(control, stop);
    // The goodbye goes at once: the pipeline thread may still be in a long
    // batch, and the heartbeats stop here. Without a control connection it
    // goes on the work connection once that is this thread's again.
    const bool stopping = !Refused();
    if (stopping && attached) SendControl(control, wire::Envelope::BYE);
    pipeline_stop = true;
    pipeline_thread.join();
    handshake_events_ = nullptr;
    // A dispatcher that never completed the handshake takes nothing: the
    // goodbye must not hold the first SIGTERM up waiting for one.
    work.set(zmq::sockopt::sndtimeo, 1000);
    if (stopping && !attached) SendControl(work, wire::Envelope::BYE);
    // A refusal after the goodbye (replies the dispatcher no longer takes) is
    // no failure of this worker.
    const Status refused = refusal_.why();
    if (!stopping) return Status(refused.code(), "worker " + manifest_.id + ": " + refused.message());
    GT_LOG(kWorker, manifest_.id << ": said goodbye to " << dispatcher
                                 << (refused.ok() ? std::string() : " (then: " + refused.message() + ")"));
    return Status::Ok();
  }

 private:
  Status ConfigureDealer(zmq::socket_t& dealer) {
    dealer.set(zmq::sockopt::linger, 1000);
    dealer.set(zmq::sockopt::sndhwm, 0);
    dealer.set(zmq::sockopt::rcvhwm, 0);
    // A dispatcher that restarts is back within about this (DispatcherLink).
    dealer.set(zmq::sockopt::reconnect_ivl_max, DispatcherLink::kReconnectMaxMs);
    if (!manifest_.security.enabled()) return Status::Ok();
    const CurveClientKeys keys{manifest_.security.key, manifest_.security.server_key};
    if (Status s = ApplyCurveClient(dealer, keys); !s.ok()) return Status(s.code(), "worker " + manifest_.id + ": " + s.message());
    return Status::Ok();
  }

  // ZeroMQ's own heartbeats on `dealer`: PINGs every heartbeat interval,
  // whose TTL (at least 100 ms: ZeroMQ counts it in tenths of a second) asks
  // the dispatcher's side to close the connection when they stop coming;
  // this side gives up after `timeout` without an answer.
  void SetConnectionHeartbeats(zmq::socket_t& dealer, int timeout) const {
    dealer.set(zmq::sockopt::heartbeat_ivl, static_cast<int>(manifest_.heartbeat_interval_ms));
    dealer.set(zmq::sockopt::heartbeat_timeout, timeout);
    dealer.set(zmq::sockopt::heartbeat_ttl, static_cast<int>(std::max<int64_t>(100, manifest_.heartbeat_timeout_ms)));
  }

  void SendControl(zmq::socket_t& dealer, wire::Envelope::Kind kind) {
    wire::Envelope env;
    env.set_kind(kind);
    env.set_name(manifest_.id);
    env.set_metrics_endpoint(metrics_endpoint_);
    // The token names this worker: a control connection that ZeroMQ
    // reconnected is attached again by its heartbeats (Dispatcher).
    if (kind != wire::Envelope::BYE) env.set_token(token_);
    // What the dispatcher places new clients by (WorkerRegistry::NextPlacement).
    if (kind == wire::Envelope::HEARTBEAT && scheduler_)
      AddLoad({scheduler_->TakePeakQueued(), static_cast<uint64_t>(metrics_.resident_bytes.Value())}, env);
    if (Result<size_t> sent = SendEnvelope(dealer, "", env, {}); sent.ok()) Count(*sent, metrics_.bytes_sent, metrics_.messages_sent);
  }

  // Pipeline thread: a reply on the work connection.
  void SendOnWork(const wire::Envelope& env, const std::vector<BlobPtr>& frames) {
    if (env.kind() == wire::Envelope::DATA && !frames.empty() && frames[0])
      scheduler_->CountBytesMoved(env.client(), frames[0]->size());
    if (env.kind() == wire::Envelope::SYNC_ACK) rejoiner_.book().NoteAck(env);
    if (Result<size_t> sent = SendEnvelope(*work_, "", env, frames); sent.ok())
      Count(*sent, metrics_.bytes_sent, metrics_.messages_sent);
  }

  static void Count(size_t bytes, prometheus::Counter& byte_counter, prometheus::Counter& message_counter) {
    byte_counter.Increment(static_cast<double>(bytes));
    message_counter.Increment();
  }

  static size_t FrameBytes(const std::vector<zmq::message_t>& frames) {
    size_t n = 0;
    for (const auto& f : frames) n += f.size();
    return n;
  }

  // The dispatcher's refusal (of the registration, the attach, or the keys)
  // ends the worker: no work would ever come. Either thread may learn it.
  void Refuse(Status why) { refusal_.Set(std::move(why)); }
  bool Refused() const { return refusal_.set(); }

  // I/O thread: attaches the control connection once the pipeline thread
  // saw the WELCOME, then keeps the heartbeat going and answers STATS.
  // Returns whether the control connection attached.
  bool IoLoop(zmq::socket_t& control, const std::atomic<bool>& stop) {
    auto interval = std::chrono::milliseconds(manifest_.heartbeat_interval_ms);
    Clock::time_point next_beat = Clock::now() + interval;
    bool attached = false;
    int64_t welcome_poll_ms = 1;  // backs off while no dispatcher answers
    while (!stop.load(std::memory_order_relaxed) && !Refused()) {
      if (attached && !welcomed_.load(std::memory_order_acquire)) {  // the dispatcher went away
        attached = false;
        attach_unanswered_ = true;
      }
      WatchLink();
      if (!attached && welcomed_.load(std::memory_order_acquire)) {
        SendControl(control, wire::Envelope::ATTACH);
        attached = true;
      }
      // Until then, look for the WELCOME's flag often; the work connection
      // stands in for heartbeats meanwhile (registering counts as one).
      const int64_t wait_ms = attached ? std::min<int64_t>(100, manifest_.heartbeat_interval_ms) : welcome_poll_ms;
      if (!attached) welcome_poll_ms = std::min<int64_t>(2 * welcome_poll_ms, 100);
      zmq::pollitem_t item{control.handle(), 0, ZMQ_POLLIN, 0};
      try {
        zmq::poll(&item, 1, std::chrono::milliseconds(wait_ms));
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) return attached;
        continue;
      }
      if (handshake_events_) CheckHandshake();
      if (item.revents & ZMQ_POLLIN) HandleControlMessages(control);
      if (attached && Clock::now() >= next_beat) {
        SendControl(control, wire::Envelope::HEARTBEAT);
        next_beat = Clock::now() + interval;
      }
    }
    return attached;
  }

  // A handshake the dispatcher refused (the worker's key is not on its
  // workers list, the two disagree on keys) or nothing that speaks ZeroMQ:
  // the same verdict a client reaches (net/handshake_verdict.h).
  void CheckHandshake() {
    for (uint16_t event = 0; ReadMonitorEvent(handshake_events_->handle(), &event);) {
      handshake_verdict_->Observe(event);
      link_.Observe(event, Clock::now());
      if (event == ZMQ_EVENT_DISCONNECTED && link_.lost() && welcomed_.exchange(false, std::memory_order_acq_rel))
        GT_LOG(kWorker, manifest_.id << ": lost the dispatcher; keeping every tensor for "
                                     << manifest_.reconnect_grace_ms << " ms while it comes back");
      if (!handshake_verdict_->connected() && !handshake_verdict_->refused().empty())
        Refuse(Unavailable(handshake_verdict_->refused()));
    }
  }

  // I/O thread: only control messages come on the control connection.
  void HandleControlMessages(zmq::socket_t& control) {
    for (int n = 0; n < 256; ++n) {
      auto frames = ReceiveFrames(control, zmq::recv_flags::dontwait);
      if (!frames) return;
      Count(FrameBytes(*frames), metrics_.bytes_received, metrics_.messages_received);
      // An ATTACH sent just before the dispatcher died can reach the next one
      // ahead of this worker's REGISTER: its refusal must not end the worker.
      const bool stale = attach_unanswered_ || !welcomed_.load(std::memory_order_acquire);
      std::optional<wire::Envelope> refusal = ControlMessage(*frames);
      if (stale && refusal && refusal->kind() == wire::Envelope::ERROR && !IsLostNotice(*refusal, token_)) {
        attach_unanswered_ = false;
        continue;
      }
      if (!AnswerControl(control, *frames)) metrics_.malformed_messages.Increment();
    }
  }

  // STATS is answered on the connection it came on (the registry is
  // thread-safe); ERROR is the dispatcher's refusal, or its lost notice.
  // False: not one of them.
  bool AnswerControl(zmq::socket_t& dealer, const std::vector<zmq::message_t>& frames) {
    std::optional<wire::Envelope> control = ControlMessage(frames);
    if (!control) return false;
    if (control->kind() == wire::Envelope::STATS) AnswerStats(dealer, control->request_id());
    else if (IsLostNotice(*control, token_)) DeclaredLost(*control);
    else Refuse(OpErrorToStatus(control->errors_size() ? control->errors(0) : wire::OpError()));
    return true;
  }

  // The dispatcher declared this worker lost (host/worker_lost_notice.h):
  // Run ends, and its caller starts the worker afresh.
  void DeclaredLost(const wire::Envelope& notice) {
    declared_lost_.store(true, std::memory_order_release);
    Refuse(Unavailable(LostNoticeMessage(notice)));
  }

  void AnswerStats(zmq::socket_t& dealer, uint64_t request_id) {
    wire::Envelope reply;
    reply.set_kind(wire::Envelope::STATS_REPLY);
    reply.set_request_id(request_id);
    *reply.add_snapshots() =
        TakeSnapshot(registry_, HostKind::kWorker, manifest_.id, PipelineStageNames(manifest_, manifest_.backend->name));
    if (Result<size_t> sent = SendEnvelope(dealer, "", reply, {}); sent.ok())
      Count(*sent, metrics_.bytes_sent, metrics_.messages_sent);
  }

  // Pipeline thread: reads the work connection, queues what comes and runs
  // one client's turn at a time (FairScheduler). Between turns it takes in
  // whatever arrived meanwhile, so a newcomer's instructions compete with
  // the queued ones from the next turn on.
  void PipelineLoop(zmq::socket_t& work, const std::atomic<bool>& stop) {
    work_ = &work;
    while (!stop.load(std::memory_order_relaxed) && !Refused()) {
      if (rejoin_requested_.exchange(false, std::memory_order_acq_rel)) SendRejoin(work);
      if (rejoiner_.completing() && welcomed_.load(std::memory_order_acquire)) rejoiner_.Complete(index_);
      if (grace_over_.exchange(false, std::memory_order_acq_rel)) FreeAfterGrace();
      zmq::pollitem_t item{work.handle(), 0, ZMQ_POLLIN, 0};
      const bool idle = scheduler_->empty();
      // After a sync point the client's next batch is probably near.
      const auto busy_wait = idle && terminal_->TakeAcknowledgedSync() ? busy_wait_ : std::chrono::microseconds(0);
      int ready = 0;
      try {
        ready = PollWithBusyWait(&item, 1, std::chrono::milliseconds(idle ? 100 : 0), busy_wait);
      } catch (const zmq::error_t&) {
        break;
      }
      if (ready > 0) ReceiveAvailable(work);
      scheduler_->RunTurn();
    }
    work_ = nullptr;
  }

  // Every message waiting on the work connection (at most kMaxMessagesPerRound);
  // false when it read them all.
  static constexpr int kMaxMessagesPerRound = 256;
  bool ReceiveAvailable(zmq::socket_t& work) {
    for (int n = 0; n < kMaxMessagesPerRound; ++n) {
      auto frames = ReceiveFrames(work, zmq::recv_flags::dontwait);
      if (!frames) return false;
      Count(FrameBytes(*frames), metrics_.bytes_received, metrics_.messages_received);
      // Before the control connection attaches, STATS come here.
      if (!AnswerControl(work, *frames)) HandleFrames(std::move(*frames));
    }
    return true;
  }

  void HandleFrames(std::vector<zmq::message_t>&& frames) {
    if (Status decoded = DecodeFramesInto(std::move(frames), false, incoming_); !decoded.ok()) {
      metrics_.malformed_messages.Increment();
      std::cerr << "worker " << manifest_.id << ": dropped a malformed message: " << decoded.ToString() << "\n";
      return;
    }
    HandleMessage(&incoming_);
    incoming_.frames.clear();  // the instructions hold their payloads: no frame outlives its message here
  }

  void HandleMessage(WireMessage* msg) {
    if (msg->envelope.kind() == wire::Envelope::WELCOME) {
      GT_LOG(kWorker, manifest_.id << ": registered as worker #" << msg->envelope.worker_index());
      index_ = msg->envelope.worker_index();
      welcomed_.store(true, std::memory_order_release);
      if (pipeline_->events().enabled()) {
        const std::string detail = "registered as index=" + std::to_string(msg->envelope.worker_index());
        HostEvent event{HostEventKind::kConnect, "dispatcher"};
        event.command = "worker";
        event.detail = detail;
        pipeline_->events().Emit(event);
      }
    }
    if (msg->envelope.kind() != wire::Envelope::BATCH) return;  // WELCOME and friends need no action
    GT_LOG(kWorker, manifest_.id << ": batch of " << msg->envelope.instructions_size() << " instructions");
    rejoiner_.book().NoteBatch(msg->envelope);
    if (msg->envelope.snapshots_size())
      for (const ClientShare& share : SharesIn(msg->envelope)) scheduler_->SetShare(share);
    for (const wire::Instruction& wi : msg->envelope.instructions()) {
      Result<Instruction> inst = DecodeInstruction(wi, msg->frames);
      if (!inst.ok()) {
        Op op = wi.op() < static_cast<uint32_t>(Op::kCount) ? static_cast<Op>(wi.op()) : Op::kSync;
        terminal_->RecordError({wi.client(), wi.seq(), op}, inst.status());
        continue;
      }
      if (inst->payload) scheduler_->CountBytesMoved(inst->client, inst->payload->size());
      scheduler_->Push(std::move(*inst));
    }
  }

  HostManifest manifest_;
  zmq::context_t& context_;
  prometheus::Registry& registry_;  // thread-safe; outlives this host
  HostMetrics metrics_;
  std::string metrics_endpoint_;
  std::chrono::microseconds busy_wait_{0};  // after a sync (set_busy_wait)
  std::unique_ptr<WorkerTerminal> terminal_;  // the backend; before pipeline_, which holds it
  std::unique_ptr<Pipeline> pipeline_;
  std::unique_ptr<FairScheduler> scheduler_;  // runs pipeline_; after it, which it holds
  uint64_t token_ = 0;  // shown by REGISTER, ATTACH and the heartbeats
  std::atomic<bool> welcomed_{false};  // the pipeline thread saw the WELCOME: time to attach
  FirstRefusal refusal_;  // why the worker ends, once a thread learns it
  std::atomic<bool> declared_lost_{false};  // the refusal was the lost notice
  std::optional<HandshakeVerdict> handshake_verdict_;  // I/O thread; made by Run()
  zmq::socket_t* handshake_events_ = nullptr;  // I/O thread: the work dealer's handshake events
  zmq::socket_t* work_ = nullptr;              // the work connection, owned by the pipeline thread
  // Outliving the dispatcher (worker_rejoin.h).
  WireMessage incoming_;    // pipeline thread: the message being handled, reused (DecodeFramesInto)
  DispatcherLink link_;     // I/O thread
  bool attach_unanswered_ = false;  // I/O thread: an ATTACH went to a dispatcher lost since
  Rejoiner rejoiner_;       // pipeline thread
  uint32_t index_ = 0;      // pipeline thread: the index the last WELCOME gave
  std::atomic<bool> rejoin_requested_{false};  // I/O -> pipeline thread: register again
  std::atomic<bool> grace_over_{false};        // I/O -> pipeline thread: free everything

  // I/O thread: what losing the dispatcher asks for now (DispatcherLink).
  void WatchLink() {
    const DispatcherLink::Actions actions = link_.Tick(Clock::now(), welcomed_.load(std::memory_order_acquire));
    if (actions.register_again) rejoin_requested_.store(true, std::memory_order_release);
    if (actions.grace_over) grace_over_.store(true, std::memory_order_release);
  }

  // Pipeline thread: REGISTER again, same token and old index, with the inventory
  // (Rejoiner). What the old dispatcher sent is read first, so the inventory counts
  // it (the new one sends nothing before a WELCOME, which answers an earlier REGISTER).
  void SendRejoin(zmq::socket_t& work) {
    while (ReceiveAvailable(work)) continue;
    if (!welcomed_.load(std::memory_order_acquire)) rejoiner_.Register(index_);
  }

  void SendRegistration(wire::Envelope& reg) {
    reg.set_name(manifest_.id);
    reg.set_metrics_endpoint(metrics_endpoint_);
    reg.set_token(token_);
    GT_LOG(kWorker, manifest_.id << ": registering again as #" << reg.worker_index() << " with "
                                 << reg.inventory_size() << " client sessions");
    if (Result<size_t> sent = SendEnvelope(*work_, "", reg, {}); sent.ok())
      Count(*sent, metrics_.bytes_sent, metrics_.messages_sent);
  }

  // Pipeline thread: no dispatcher came back within the grace period. Every
  // client's tensors are freed; then the worker ends, or (after_grace: wait)
  // stays, empty, for a dispatcher to come.
  void FreeAfterGrace() {
    RejoinBook& book = rejoiner_.book();
    std::vector<ClientId> clients = book.Sessions();
    for (ClientId orphan : book.Orphans(terminal_->Held())) clients.push_back(orphan);
    for (ClientId c : clients) scheduler_->Push(MakeDropClient(c));
    // Bounded: a collective whose peers are gone may never run; exiting frees it all the same.
    for (int turn = 0; turn < 1000 && !scheduler_->empty(); ++turn) scheduler_->RunTurn();
    book.Clear();
    const std::string why = "no dispatcher took this worker back within " +
                            std::to_string(manifest_.reconnect_grace_ms) + " ms (reconnect grace); freed the tensors of " +
                            std::to_string(clients.size()) + " client sessions";
    std::cerr << "worker " << manifest_.id << ": " << why << "\n";
    if (manifest_.exit_after_grace) Refuse(Unavailable(why));
  }
};

Worker::Worker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Worker::~Worker() = default;

Result<std::unique_ptr<Worker>> Worker::Create(const HostManifest& manifest, zmq::context_t& context,
                                               prometheus::Registry& registry) {
  if (manifest.host != HostKind::kWorker || !manifest.backend)
    return InvalidArgument(manifest.source + ": not a worker manifest with a backend");
  auto impl = std::make_unique<Impl>(manifest, context, registry);
  if (Status s = impl->Init(registry); !s.ok()) return s;
  return std::unique_ptr<Worker>(new Worker(std::move(impl)));
}

void Worker::set_metrics_endpoint(std::string endpoint) { impl_->set_metrics_endpoint(std::move(endpoint)); }
void Worker::set_busy_wait(std::chrono::microseconds busy_wait) { impl_->set_busy_wait(busy_wait); }
Status Worker::Run(const std::string& dispatcher, const std::atomic<bool>& stop) { return impl_->Run(dispatcher, stop); }
bool Worker::declared_lost() const { return impl_->declared_lost(); }

}  // namespace gt
