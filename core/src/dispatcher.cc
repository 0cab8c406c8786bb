#include "dispatcher.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <iostream>
#include <iterator>
#include <map>
#include <cstring>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "codec.h"
#include "gt/unit.h"
#include "host_metrics.h"
#include "host_snapshot.h"
#include "pipeline.h"
#include "transport.h"

namespace gt {
namespace {

using Clock = std::chrono::steady_clock;

struct PendingSync {
  uint64_t sync_id = 0;
  std::set<size_t> waiting;  // worker indexes that have not acknowledged yet
  std::vector<wire::OpError> errors;
};

struct ClientState {
  ClientId id = 0;
  std::string route;
  uint64_t token = 0;
  Clock::time_point last_seen;
  int worker = -1;                                  // where new tensors go
  std::unordered_map<TensorId, size_t> tensors;     // live tensor -> worker index
  std::unordered_map<TensorId, uint64_t> failed;    // tensor -> seq of the op that failed to make it
  std::set<size_t> touched;                         // workers sent to since the last sync
  std::set<size_t> ever;                            // workers that may hold its tensors
  std::vector<wire::OpError> errors;                // found here, reported at the next sync
  std::deque<PendingSync> syncs;
  std::unordered_map<uint64_t, Instruction> units;            // kDefineUnit by unit key
  std::unordered_map<uint64_t, uint64_t> unit_keys;           // a key the client chose -> its unit's content key
  std::unordered_map<size_t, std::unordered_set<uint64_t>> units_sent;  // worker -> keys it was sent
};

struct WorkerState {
  std::string route;
  std::string name;
  std::string metrics_endpoint;
  std::string peer_ip;  // tcp peers only
  Clock::time_point last_seen;
  bool alive = true;
  wire::Envelope outgoing;
  std::vector<BlobPtr> payloads;
};

// A STATS request the workers have not all answered yet.
struct PendingStats {
  std::string client_route;
  std::set<size_t> waiting;     // worker indexes that have not answered
  Clock::time_point deadline;
  wire::Envelope reply;         // STATS_REPLY: the dispatcher's snapshot, missing workers
  std::map<size_t, wire::HostSnapshot> answers;  // by worker index: replied in registration order
};

// How long a STATS request waits for workers when the client names no
// timeout, and the most it may name: a dead worker delays the answer by at
// most this, never forever.
constexpr uint32_t kDefaultStatsTimeoutMs = 2000;
constexpr uint32_t kMaxStatsTimeoutMs = 60000;

constexpr const char* kGoodbye = "said goodbye";

std::string TensorName(TensorId id) { return "%" + std::to_string(id); }

// The IP a tcp peer connected from ("" for ipc:// and inproc://), read from
// the message's ZeroMQ metadata.
std::string PeerIp(zmq::message_t& frame) {
  const char* address = zmq_msg_gets(frame.handle(), "Peer-Address");
  return address ? address : "";
}

}  // namespace

class Dispatcher::Impl final : public Terminal {
 public:
  Impl(const HostManifest& manifest, zmq::context_t& context, prometheus::Registry& registry)
      : manifest_(manifest),
        router_(context, zmq::socket_type::router),
        registry_(registry),
        metrics_(HostKind::kDispatcher, manifest.id, registry) {
    router_.set(zmq::sockopt::router_mandatory, 1);
    router_.set(zmq::sockopt::sndhwm, 0);
    router_.set(zmq::sockopt::rcvhwm, 0);
    router_.set(zmq::sockopt::linger, 0);
  }

  Status Init(prometheus::Registry& registry) {
    Result<std::unique_ptr<Pipeline>> pipeline = Pipeline::Build(manifest_, metrics_, registry);
    if (!pipeline.ok()) return pipeline.status();
    pipeline_ = std::move(*pipeline);
    pipeline_->SetTerminal(this, "router");
    pipeline_->SetErrorSink([this](const OpRef& ref, const Status& s) { RecordError(ref, s); });
    return Status::Ok();
  }

  Status Bind(const std::string& endpoint) {
    try {
      router_.bind(endpoint);
    } catch (const zmq::error_t& e) {
      return Unavailable("cannot bind " + endpoint + ": " + e.what());
    }
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    return Status::Ok();
  }

  std::string endpoint() const { return endpoint_; }

  std::vector<WorkerEndpoint> LiveWorkerEndpoints() const {
    std::lock_guard<std::mutex> lock(endpoints_mutex_);
    return endpoints_;
  }
  size_t PublishedLiveWorkerCount() const { return live_workers_.load(std::memory_order_acquire); }

  void Run(const std::atomic<bool>& stop) {
    auto tick = std::chrono::milliseconds(std::max<int64_t>(10, manifest_.heartbeat_interval_ms / 2));
    Clock::time_point next_check = Clock::now() + tick;
    while (!stop.load(std::memory_order_relaxed)) {
      zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
      int ready = 0;
      try {
        ready = zmq::poll(&item, 1, tick);
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) return;
        continue;
      }
      // Drain what is waiting, then look at the clock.
      for (int n = 0; ready > 0 && n < 1024; ++n) {
        auto frames = ReceiveFrames(router_, zmq::recv_flags::dontwait);
        if (!frames) break;
        HandleFrames(std::move(*frames));
      }
      if (Clock::now() >= next_check) {
        CheckLiveness();
        ExpireStats();
        next_check = Clock::now() + tick;
      }
      // Announced here, outside any pipeline pass (a worker can be lost in
      // the middle of one).
      if (membership_changed_) {
        membership_changed_ = false;
        AnnounceMembership();
      }
    }
  }

  // ---- Terminal: the router ------------------------------------------------

  Status Accept(Instruction inst) override {
    // Meant for the stages (the sharding modifier); no worker needs them.
    if (inst.op == Op::kConfigure || inst.op == Op::kMembership) return Status::Ok();
    auto it = clients_.find(inst.client);
    if (it == clients_.end()) return Internal("instruction for unknown client " + std::to_string(inst.client));
    ClientState& c = it->second;
    if (inst.op == Op::kDropClient) return SendDrop(c, inst);
    if (inst.op == Op::kSync) return BeginSync(c, inst);
    if (inst.op == Op::kDefineUnit) return DefineUnit(c, std::move(inst));
    if (Status s = CheckIds(c, inst); !s.ok()) return Refuse(c, inst, s);
    Result<size_t> target = TargetWorker(c, inst);
    if (!target.ok()) return Refuse(c, inst, target.status());
    if (inst.op == Op::kFree)
      for (TensorId id : inst.operands) c.tensors.erase(id);
    if (inst.op == Op::kRunUnit) {
      if (Status s = SendUnitOnce(c, *target, inst); !s.ok()) return Refuse(c, inst, s);
      for (int64_t index : inst.attrs.axes) c.tensors.erase(inst.operands[static_cast<size_t>(index)]);
    }
    for (TensorId r : inst.results) c.tensors[r] = *target;
    Enqueue(*target, c, inst);
    return Status::Ok();
  }

  void EndBatch() override { FlushWorkers(); }

  // Keeps a unit's definition; it goes to a worker just before that worker's
  // first kRunUnit of it (SendUnitOnce), so each worker gets it once.
  Status DefineUnit(ClientState& c, Instruction inst) {
    if (!inst.payload) return InvalidArgument(inst.Describe() + ": no unit template");
    const uint64_t key = inst.attrs.seed;
    auto it = c.units.find(key);
    if (it != c.units.end()) {
      if (it->second.payload->size() == inst.payload->size() &&
          std::equal(it->second.payload->data(), it->second.payload->data() + inst.payload->size(), inst.payload->data()))
        return Status::Ok();
      // Redefined: workers that had the old one must get the new one.
      for (auto& [w, keys] : c.units_sent) keys.erase(key);
    }
    c.units[key] = std::move(inst);
    return Status::Ok();
  }

  Status SendUnitOnce(ClientState& c, size_t w, const Instruction& run) {
    auto unit = c.units.find(run.attrs.seed);
    if (unit == c.units.end()) return NotFound(run.Describe() + ": no unit was defined under this key");
    if (c.units_sent[w].insert(run.attrs.seed).second) Enqueue(w, c, unit->second);
    return Status::Ok();
  }

  // MarkFailed, and a kRunUnit refused here still frees the live operands it
  // would have consumed (the client has forgotten them), as a worker does
  // for one that fails there.
  Status Refuse(ClientState& c, const Instruction& inst, Status status) {
    if (inst.op == Op::kRunUnit) {
      for (TensorId id : ConsumedOperands(inst)) {
        auto it = c.tensors.find(id);
        if (it == c.tensors.end()) continue;
        Instruction free;
        free.op = Op::kFree;
        free.client = c.id;
        free.seq = inst.seq;
        free.operands = {it->first};
        const size_t w = it->second;
        c.tensors.erase(it);
        if (w < workers_.size() && workers_[w].alive) Enqueue(w, c, free);
      }
    }
    return MarkFailed(c, inst, std::move(status));
  }

  // Remembers that the results of `inst` were never made, so later uses
  // name the op that failed. A result id that names a live tensor keeps it.
  Status MarkFailed(ClientState& c, const Instruction& inst, Status status) {
    for (TensorId r : inst.results)
      if (!c.tensors.count(r)) c.failed[r] = inst.seq;
    return status;
  }

 private:
  // ---- incoming messages ---------------------------------------------------

  void HandleFrames(std::vector<zmq::message_t>&& frames) {
    std::string route = frames.empty() ? std::string() : frames[0].to_string();
    metrics_.messages_received.Increment();
    auto w = worker_by_route_.find(route);
    // Where a peer that may be registering connected from (for discovery).
    std::string peer_ip = w == worker_by_route_.end() && !frames.empty() ? PeerIp(frames.back()) : std::string();
    Result<WireMessage> msg = DecodeFrames(std::move(frames), true);
    if (!msg.ok()) return RejectMessage(route, msg.status());
    metrics_.bytes_received.Increment(static_cast<double>(msg->bytes));
    if (w != worker_by_route_.end()) return HandleWorkerMessage(w->second, *msg);
    HandleClientMessage(*msg, peer_ip);
  }

  void RejectMessage(const std::string& route, const Status& status) {
    metrics_.malformed_messages.Increment();
    if (route.empty()) return;
    wire::Envelope reply;
    reply.set_kind(wire::Envelope::ERROR);
    wire::OpError* e = reply.add_errors();
    e->set_code(static_cast<uint32_t>(status.code()));
    e->set_message("dispatcher " + manifest_.id + " rejected a message: " + status.message());
    e->set_host(manifest_.id);
    Send(route, reply, {});
  }

  void HandleClientMessage(WireMessage& msg, const std::string& peer_ip) {
    const wire::Envelope& env = msg.envelope;
    switch (env.kind()) {
      case wire::Envelope::HELLO:
        ClientFor(msg.routing_id, env.token());
        return;
      case wire::Envelope::BATCH:
        return HandleBatch(ClientFor(msg.routing_id, 0), msg);
      case wire::Envelope::HEARTBEAT:
        if (auto it = client_by_token_.find(env.token()); it != client_by_token_.end())
          clients_[it->second].last_seen = Clock::now();
        return;
      case wire::Envelope::BYE:
        if (auto it = client_by_route_.find(msg.routing_id); it != client_by_route_.end()) DropClient(it->second);
        return;
      case wire::Envelope::REGISTER:
        return RegisterWorker(msg.routing_id, env, peer_ip);
      case wire::Envelope::STATS:
        return BeginStats(msg.routing_id, env);
      default:
        return RejectMessage(msg.routing_id, InvalidArgument("unexpected message kind " +
                                                             wire::Envelope::Kind_Name(env.kind()) + " from a client"));
    }
  }

  ClientState& ClientFor(const std::string& route, uint64_t token) {
    if (auto it = client_by_route_.find(route); it != client_by_route_.end()) {
      ClientState& c = clients_[it->second];
      c.last_seen = Clock::now();
      return c;
    }
    ClientId id = next_client_++;
    ClientState& c = clients_[id];
    c.id = id;
    c.route = route;
    c.token = token;
    c.last_seen = Clock::now();
    client_by_route_[route] = id;
    if (token != 0) client_by_token_[token] = id;
    metrics_.clients_connected.Increment();
    return c;
  }

  void HandleBatch(ClientState& c, WireMessage& msg) {
    for (const wire::Instruction& wi : msg.envelope.instructions()) {
      Result<Instruction> inst = DecodeInstruction(wi, msg.frames);
      Op op = wi.op() < static_cast<uint32_t>(Op::kCount) ? static_cast<Op>(wi.op()) : Op::kSync;
      if (!inst.ok()) {
        metrics_.malformed_messages.Increment();
        RecordError({c.id, wi.seq(), op}, inst.status());
        continue;
      }
      inst->client = c.id;  // the namespace is the connection's, whatever the message says
      if (inst->op == Op::kDropClient) {
        RecordError({c.id, wi.seq(), op}, InvalidArgument("drop_client is reserved for the dispatcher"));
        continue;
      }
      // A client marks compile scopes (id 0); ids of hot sequences are the
      // hotpath stage's, and the compile stage replays a region marked with
      // one by ops and wiring alone.
      if ((inst->op == Op::kHotStart || inst->op == Op::kHotEnd) && inst->attrs.seed != 0) {
        RecordError({c.id, wi.seq(), op}, InvalidArgument(inst->Describe() + ": a client's markers carry no sequence id"));
        continue;
      }
      if (inst->op == Op::kDefineUnit || inst->op == Op::kRunUnit) KeyByContent(c, *inst);
      // Held until the first worker registers and the stages know it, so
      // that every stage error names the client's own instruction.
      if (!ever_had_worker_) backlog_.push_back(std::move(*inst));
      else pipeline_->Push(std::move(*inst));
    }
    pipeline_->EndBatch();
  }

  void HandleWorkerMessage(size_t w, WireMessage& msg) {
    WorkerState& worker = workers_[w];
    worker.last_seen = Clock::now();
    const wire::Envelope& env = msg.envelope;
    switch (env.kind()) {
      case wire::Envelope::HEARTBEAT:
        return;
      case wire::Envelope::SYNC_ACK:
        return OnSyncAck(w, env);
      case wire::Envelope::DATA:
        return ForwardData(msg);
      case wire::Envelope::BYE:
        return WorkerLost(w, kGoodbye);
      case wire::Envelope::REGISTER:
        return;  // a repeated registration changes nothing
      case wire::Envelope::STATS_REPLY:
        return OnStatsReply(w, env);
      default:
        metrics_.malformed_messages.Increment();
        std::cerr << "dispatcher: unexpected " << wire::Envelope::Kind_Name(env.kind()) << " from worker "
                  << worker.name << "\n";
    }
  }

  // ---- workers -------------------------------------------------------------

  void RegisterWorker(const std::string& route, const wire::Envelope& env, const std::string& peer_ip) {
    size_t index = workers_.size();
    WorkerState w;
    w.route = route;
    w.name = env.name().empty() ? "worker-" + std::to_string(index) : env.name();
    w.metrics_endpoint = env.metrics_endpoint();
    w.peer_ip = peer_ip;
    w.last_seen = Clock::now();
    workers_.push_back(std::move(w));
    worker_by_route_[route] = index;
    metrics_.workers_connected.Increment();
    PublishEndpoints();
    wire::Envelope welcome;
    welcome.set_kind(wire::Envelope::WELCOME);
    welcome.set_worker_index(static_cast<uint32_t>(index));
    Send(route, welcome, {});
    if (!ever_had_worker_) ReplayBacklog();
    membership_changed_ = true;
  }

  void ReplayBacklog() {
    ever_had_worker_ = true;
    AnnounceMembership();
    std::deque<Instruction> pending;
    pending.swap(backlog_);
    for (Instruction& inst : pending)
      if (clients_.count(inst.client)) pipeline_->Push(std::move(inst));  // a client gone meanwhile is skipped
    pipeline_->EndBatch();
  }

  void CheckLiveness() {
    auto now = Clock::now();
    auto timeout = std::chrono::milliseconds(manifest_.heartbeat_timeout_ms);
    for (size_t w = 0; w < workers_.size(); ++w) {
      if (workers_[w].alive && now - workers_[w].last_seen > timeout) {
        metrics_.heartbeats_missed.Increment();
        WorkerLost(w, "missed heartbeats for " + std::to_string(manifest_.heartbeat_timeout_ms) + " ms");
      }
    }
    // Clients that send heartbeats (token != 0) get the same treatment.
    std::vector<ClientId> silent;
    for (auto& [id, c] : clients_)
      if (c.token != 0 && now - c.last_seen > 2 * timeout) silent.push_back(id);
    for (ClientId id : silent) {
      metrics_.heartbeats_missed.Increment();
      DropClient(id);
    }
  }

  void WorkerLost(size_t w, const std::string& why) {
    WorkerState& worker = workers_[w];
    if (!worker.alive) return;
    worker.alive = false;
    worker_by_route_.erase(worker.route);
    metrics_.workers_connected.Decrement();
    PublishEndpoints();
    membership_changed_ = true;
    if (why != kGoodbye) std::cerr << "dispatcher " << manifest_.id << ": worker " << worker.name << " lost (" << why << ")\n";
    for (auto& [id, c] : clients_) {
      for (auto it = c.syncs.begin(); it != c.syncs.end();) {
        if (it->waiting.erase(w)) {
          wire::OpError e;
          e.set_client(id);
          e.set_code(static_cast<uint32_t>(Code::kUnavailable));
          e.set_message("worker " + worker.name + " was lost (" + why + ") before it answered; its tensors are gone");
          e.set_host(manifest_.id);
          it->errors.push_back(e);
        }
        ++it;
      }
      CompleteReadySyncs(c);
    }
    for (auto it = stats_.begin(); it != stats_.end();) {
      if (it->second.waiting.erase(w)) it->second.reply.add_missing(worker.name);
      it = it->second.waiting.empty() ? AnswerStats(it) : std::next(it);
    }
  }

  // Replaces the snapshot LiveWorkerEndpoints() returns.
  void PublishEndpoints() {
    std::vector<WorkerEndpoint> live;
    size_t alive = 0;
    for (const WorkerState& w : workers_) {
      alive += w.alive ? 1 : 0;
      if (w.alive && !w.metrics_endpoint.empty()) live.push_back({w.name, w.metrics_endpoint, w.peer_ip});
    }
    live_workers_.store(alive, std::memory_order_release);
    std::lock_guard<std::mutex> lock(endpoints_mutex_);
    endpoints_.swap(live);
  }

  Result<size_t> TargetWorker(ClientState& c, const Instruction& inst) {
    if (inst.worker >= 0) {  // placed by a stage
      const size_t w = static_cast<size_t>(inst.worker);
      const std::string where = inst.signal.empty() ? "" : "signal '" + inst.signal + "': ";
      if (w >= workers_.size() || !workers_[w].alive)
        return Unavailable(where + inst.Describe() + ": worker index " + std::to_string(w) +
                           " is not a live worker (" + std::to_string(LiveWorkerCount()) + " live)");
      for (TensorId id : inst.operands)
        if (c.tensors.at(id) != w)
          return Internal(inst.Describe() + ": operand " + TensorName(id) + " is on " + workers_[c.tensors.at(id)].name +
                          ", not on the worker the instruction was placed on");
      return w;
    }
    if (!inst.operands.empty()) {
      size_t w = c.tensors.at(inst.operands[0]);
      for (TensorId id : inst.operands)
        if (c.tensors.at(id) != w)
          return Unavailable(inst.Describe() + ": operands live on different workers (" + workers_[w].name + ", " +
                             workers_[c.tensors.at(id)].name + ")");
      if (!workers_[w].alive)
        return Unavailable(inst.Describe() + ": operands were on worker " + workers_[w].name + ", which is gone");
      return w;
    }
    if (c.worker >= 0 && workers_[c.worker].alive) return static_cast<size_t>(c.worker);
    for (size_t k = 0; k < workers_.size(); ++k) {
      size_t w = (next_placement_ + k) % workers_.size();
      if (!workers_[w].alive) continue;
      next_placement_ = w + 1;
      c.worker = static_cast<int>(w);
      return w;
    }
    return Unavailable(inst.Describe() + ": no live worker");
  }

  size_t LiveWorkerCount() const {
    size_t n = 0;
    for (const WorkerState& w : workers_) n += w.alive ? 1 : 0;
    return n;
  }

  // Tells the stages which workers are alive (the sharding modifier places
  // tensors on them).
  void AnnounceMembership() {
    Instruction m;
    m.op = Op::kMembership;
    for (size_t w = 0; w < workers_.size(); ++w)
      if (workers_[w].alive) m.attrs.shape.push_back(static_cast<int64_t>(w));
    pipeline_->Push(std::move(m));
    pipeline_->EndBatch();
  }

  // Workers keep units by key for every client and refuse a different
  // template under a key they hold, so a unit a client defined itself (its
  // own compile stage) reaches them under a key made from its template's
  // bytes, not the key the client chose: two clients' templates never meet
  // under one key unless they are the same template (then shared). The
  // client's runs name its key; they are mapped through its definitions.
  static void KeyByContent(ClientState& c, Instruction& inst) {
    if (inst.op == Op::kRunUnit) {
      if (auto it = c.unit_keys.find(inst.attrs.seed); it != c.unit_keys.end()) inst.attrs.seed = it->second;
      return;  // else the router finds no such unit of this client's
    }
    if (!inst.payload) return;  // refused by the router
    const uint64_t content = ContentKey(*inst.payload);
    c.unit_keys[inst.attrs.seed] = content;
    inst.attrs.seed = content;
  }

  static uint64_t ContentKey(const Blob& bytes) {
    auto mix = [](uint64_t x) {
      x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
      x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
      return x ^ (x >> 31);
    };
    uint64_t h = mix(bytes.size() ^ 0x6a09e667f3bcc909ull);
    size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
      uint64_t word;
      std::memcpy(&word, bytes.data() + i, 8);
      h = mix(h ^ word);
    }
    uint64_t tail = 0;
    if (i < bytes.size()) std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
    return mix(h ^ tail ^ 0x9e3779b97f4a7c15ull);
  }

  Status CheckIds(const ClientState& c, const Instruction& inst) const {
    for (TensorId id : inst.operands) {
      if (auto f = c.failed.find(id); f != c.failed.end())
        return FailedPrecondition(inst.Describe() + ": operand " + TensorName(id) + " does not exist because op #" +
                                  std::to_string(f->second) + " failed");
      if (!c.tensors.count(id)) return NotFound(inst.Describe() + ": unknown tensor " + TensorName(id));
    }
    for (TensorId id : inst.results)
      if (c.tensors.count(id))
        return InvalidArgument(inst.Describe() + ": result " + TensorName(id) + " already names a live tensor");
    if (ProducesTensor(inst.op) && inst.results.size() != 1)
      return InvalidArgument(inst.Describe() + ": expected exactly one result id");
    if (inst.op == Op::kRunUnit) {
      // Several results: every one a distinct new id (each is placed on the target worker).
      std::unordered_set<TensorId> distinct(inst.results.begin(), inst.results.end());
      if (distinct.size() != inst.results.size())
        return InvalidArgument(inst.Describe() + ": a result id appears twice");
      for (int64_t index : inst.attrs.axes)
        if (index < 0 || static_cast<size_t>(index) >= inst.operands.size())
          return InvalidArgument(inst.Describe() + ": freed operand index " + std::to_string(index) + " out of range");
    }
    return Status::Ok();
  }

  // ---- sync ----------------------------------------------------------------

  Status BeginSync(ClientState& c, const Instruction& inst) {
    PendingSync sync;
    sync.sync_id = inst.attrs.sync_id;
    for (size_t w : c.touched) {
      if (!workers_[w].alive) continue;
      sync.waiting.insert(w);
      Enqueue(w, c, inst);
    }
    c.touched.clear();
    c.syncs.push_back(std::move(sync));
    CompleteReadySyncs(c);
    return Status::Ok();
  }

  void OnSyncAck(size_t w, const wire::Envelope& env) {
    auto it = clients_.find(env.client());
    if (it == clients_.end()) return;  // the client left meanwhile
    ClientState& c = it->second;
    for (PendingSync& s : c.syncs) {
      if (s.sync_id != env.sync_id() || !s.waiting.erase(w)) continue;
      s.errors.insert(s.errors.end(), env.errors().begin(), env.errors().end());
      break;
    }
    CompleteReadySyncs(c);
  }

  // Answers finished syncs in the order the client asked for them.
  void CompleteReadySyncs(ClientState& c) {
    while (!c.syncs.empty() && c.syncs.front().waiting.empty()) {
      PendingSync& s = c.syncs.front();
      wire::Envelope done;
      done.set_kind(wire::Envelope::SYNC_DONE);
      done.set_sync_id(s.sync_id);
      for (auto& e : c.errors) *done.add_errors() = std::move(e);
      for (auto& e : s.errors) *done.add_errors() = std::move(e);
      c.errors.clear();
      Send(c.route, done, {});
      c.syncs.pop_front();
    }
  }

  void ForwardData(WireMessage& msg) {
    auto it = clients_.find(msg.envelope.client());
    if (it == clients_.end()) return;
    msg.envelope.clear_client();
    Send(it->second.route, msg.envelope, msg.frames);
  }

  // ---- stats ---------------------------------------------------------------

  // Takes the dispatcher's own snapshot now and asks every live worker for
  // theirs; the client is answered when the last one arrives (OnStatsReply),
  // a worker is lost (WorkerLost) or the deadline passes (ExpireStats).
  void BeginStats(const std::string& route, const wire::Envelope& request) {
    const uint64_t id = next_stats_++;
    PendingStats& p = stats_[id];
    p.client_route = route;
    uint32_t timeout = request.timeout_ms() == 0 ? kDefaultStatsTimeoutMs : std::min(request.timeout_ms(), kMaxStatsTimeoutMs);
    p.deadline = Clock::now() + std::chrono::milliseconds(timeout);
    p.reply.set_kind(wire::Envelope::STATS_REPLY);
    p.reply.set_request_id(request.request_id());
    *p.reply.add_snapshots() =
        TakeSnapshot(registry_, HostKind::kDispatcher, manifest_.id, PipelineStageNames(manifest_, "router"));
    wire::Envelope ask;
    ask.set_kind(wire::Envelope::STATS);
    ask.set_request_id(id);
    for (size_t w = 0; w < workers_.size(); ++w) {
      if (!workers_[w].alive) continue;
      if (Send(workers_[w].route, ask, {})) p.waiting.insert(w);
      else p.reply.add_missing(workers_[w].name);
    }
    if (p.waiting.empty()) AnswerStats(stats_.find(id));
  }

  void OnStatsReply(size_t w, const wire::Envelope& env) {
    auto it = stats_.find(env.request_id());
    if (it == stats_.end() || !it->second.waiting.erase(w)) return;  // late (after the deadline) or unasked
    if (env.snapshots_size() == 1) it->second.answers[w] = env.snapshots(0);
    else it->second.reply.add_missing(workers_[w].name);  // a malformed answer is no answer
    if (it->second.waiting.empty()) AnswerStats(it);
  }

  void ExpireStats() {
    const Clock::time_point now = Clock::now();
    for (auto it = stats_.begin(); it != stats_.end();) {
      if (now < it->second.deadline) {
        ++it;
        continue;
      }
      for (size_t w : it->second.waiting) it->second.reply.add_missing(workers_[w].name);
      it = AnswerStats(it);
    }
  }

  // Sends the reply (a client that left meanwhile is not there to get it).
  std::map<uint64_t, PendingStats>::iterator AnswerStats(std::map<uint64_t, PendingStats>::iterator it) {
    for (auto& [w, snapshot] : it->second.answers) *it->second.reply.add_snapshots() = std::move(snapshot);
    (void)Send(it->second.client_route, it->second.reply, {});
    return stats_.erase(it);
  }

  // ---- clients -------------------------------------------------------------

  void RecordError(const OpRef& ref, const Status& status) {
    auto it = clients_.find(ref.client);
    if (it == clients_.end()) {
      std::cerr << "dispatcher " << manifest_.id << ": " << status.ToString() << "\n";
      return;
    }
    Instruction named;
    named.client = ref.client;
    named.seq = ref.seq;
    named.op = ref.op;
    it->second.errors.push_back(MakeOpError(named, status, manifest_.id));
  }

  // The drop goes through the stages (they free what they keep for the
  // client) and reaches the workers from the router (SendDrop).
  void DropClient(ClientId id) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    Instruction drop;
    drop.op = Op::kDropClient;
    drop.client = id;
    pipeline_->Push(std::move(drop));
    pipeline_->EndBatch();
    ClientState& c = it->second;  // the pipeline pass adds no client: `it` is still valid
    client_by_route_.erase(c.route);
    if (c.token) client_by_token_.erase(c.token);
    clients_.erase(it);
    metrics_.clients_connected.Decrement();
  }

  Status SendDrop(ClientState& c, const Instruction& drop) {
    for (size_t w : c.ever)
      if (workers_[w].alive) Enqueue(w, c, drop);
    return Status::Ok();
  }

  // ---- outgoing ------------------------------------------------------------

  void Enqueue(size_t w, ClientState& c, const Instruction& inst) {
    WorkerState& worker = workers_[w];
    if (worker.outgoing.instructions_size() == 0) worker.outgoing.set_kind(wire::Envelope::BATCH);
    EncodeInstruction(inst, worker.outgoing.add_instructions(), &worker.payloads);
    if (inst.op != Op::kDropClient) {
      c.touched.insert(w);
      c.ever.insert(w);
    }
    dirty_.insert(w);
  }

  void FlushWorkers() {
    for (size_t w : dirty_) {
      WorkerState& worker = workers_[w];
      if (worker.alive) {
        if (!Send(worker.route, worker.outgoing, worker.payloads)) WorkerLost(w, "unreachable");
      }
      worker.outgoing.Clear();
      worker.payloads.clear();
    }
    dirty_.clear();
  }

  bool Send(const std::string& route, const wire::Envelope& env, const std::vector<BlobPtr>& frames) {
    Result<size_t> sent = SendEnvelope(router_, route, env, frames);
    if (!sent.ok()) return false;
    metrics_.messages_sent.Increment();
    metrics_.bytes_sent.Increment(static_cast<double>(*sent));
    return true;
  }

  HostManifest manifest_;
  zmq::socket_t router_;
  std::string endpoint_;
  prometheus::Registry& registry_;  // outlives this host
  HostMetrics metrics_;
  std::unique_ptr<Pipeline> pipeline_;

  ClientId next_client_ = 1;
  std::unordered_map<ClientId, ClientState> clients_;
  std::unordered_map<std::string, ClientId> client_by_route_;
  std::unordered_map<uint64_t, ClientId> client_by_token_;

  std::vector<WorkerState> workers_;  // never shrinks: indexes stay valid
  std::unordered_map<std::string, size_t> worker_by_route_;
  size_t next_placement_ = 0;
  bool ever_had_worker_ = false;
  bool membership_changed_ = false;  // announce the live workers to the stages
  std::deque<Instruction> backlog_;
  std::set<size_t> dirty_;
  uint64_t next_stats_ = 1;
  std::map<uint64_t, PendingStats> stats_;  // by the request id sent to workers

  // The one piece of state other threads read (the discovery server).
  mutable std::mutex endpoints_mutex_;
  std::vector<WorkerEndpoint> endpoints_;  // GUARDED_BY(endpoints_mutex_)
  std::atomic<size_t> live_workers_{0};    // written by Run()'s thread with endpoints_
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
std::vector<WorkerEndpoint> Dispatcher::LiveWorkerEndpoints() const { return impl_->LiveWorkerEndpoints(); }
size_t Dispatcher::LiveWorkerCount() const { return impl_->PublishedLiveWorkerCount(); }

}  // namespace gt
