#include "session.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string_view>

#include "ir/codec.h"
#include "gt/log.h"
#include "gt/op_attrs.h"
#include "gt/options.h"
#include "net/local_ipc.h"
#include "net/peer_address.h"
#include "host/shipped_configs.h"
#include "net/transport.h"

namespace gt::client_internal {
namespace {

// Instructions per message: large enough to amortize a message, small enough
// that workers start on a long stream before it is all queued.
constexpr int kBatchInstructions = 256;
// A program that never reads a result would grow the dispatcher's and the
// workers' queues without bound (and meet the dispatcher's max_inflight
// quota): past this many instructions without a sync the client waits for
// one, as backpressure. Far below the default quota, so that sharding's
// several instructions per op stay under it too.
constexpr int64_t kSyncWindow = 32768;
// At most this many tensors in one free (a run of frees is held until the next
// other instruction; this bounds one instruction's size).
constexpr size_t kFreesPerInstruction = 1024;
constexpr size_t kBatchPayloadBytes = 4 << 20;

// "localhost:P" / "127.0.0.1:P" of a dispatcher on this machine: its local
// ipc endpoint when it listens there and GT_LOCAL_IPC is not off; else "".
// (core/net/local_ipc.h).
std::string LocalIpcEndpoint(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return "";
  const std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  // A plain port 1..65535 without leading zeros: the dispatcher names its
  // socket after the number, so "05555" would name another file.
  if (port.empty() || port.size() > 5 || port[0] == '0' || port.find_first_not_of("0123456789") != std::string::npos ||
      std::atoi(port.c_str()) > 65535)
    return "";
  return LocalDispatcherEndpoint(host, std::atoi(port.c_str()));
}

// An explicit endpoint (tcp://, ipc://, inproc://) is used as given; a bare
// host:port is tcp, or the local dispatcher's ipc socket (LocalIpcEndpoint).
std::string Endpoint(const std::string& address) {
  if (address.find("://") != std::string::npos) return address;
  if (std::string ipc = LocalIpcEndpoint(address); !ipc.empty()) return ipc;
  return "tcp://" + address;
}

int DefaultWorkers() {
  const char* env = std::getenv("GT_WORKERS");
  int n = env ? std::atoi(env) : 0;
  return n > 0 ? n : 2;
}

// GT_INTRA_OP_THREADS: LibTorch and OpenBLAS threads of the embedded
// workers (process-wide, as both pools are); unset or 0 keeps their defaults.
int64_t DefaultIntraOpThreads() {
  const char* env = std::getenv("GT_INTRA_OP_THREADS");
  int64_t n = env ? std::atoll(env) : 0;
  return n > 0 ? n : 0;
}

// GT_BUSY_WAIT_US: how long the embedded default's hosts, or a client
// connected to a dispatcher, poll before they sleep around a sync point; 0
// turns it off; at most 10 ms.
std::chrono::microseconds DefaultBusyWait() {
  const char* env = std::getenv("GT_BUSY_WAIT_US");
  if (env == nullptr || *env == '\0') return kEmbeddedBusyWait;
  return std::chrono::microseconds(std::clamp<long long>(std::atoll(env), 0, 10000));
}

std::mutex global_mu;
std::shared_ptr<Session>& GlobalSession() {  // GUARDED_BY(global_mu)
  static auto* session = new std::shared_ptr<Session>();
  return *session;
}

void CloseAtExit() {
  std::shared_ptr<Session> s;
  {
    std::lock_guard<std::mutex> lock(global_mu);
    s = GlobalSession();
  }
  if (s) s->Close();
}

Error RemoteError(const std::vector<wire::OpError>& errors) {
  // A host's own error (seq 0, e.g. a lost worker) is the cause of the op
  // errors beside it: raise that one.
  auto host_error = std::find_if(errors.begin(), errors.end(), [](const wire::OpError& e) { return e.seq() == 0; });
  const wire::OpError& first = host_error != errors.end() ? *host_error : errors.front();
  std::string op = first.op() < static_cast<uint32_t>(Op::kCount) ? std::string(OpName(static_cast<Op>(first.op())))
                                                                   : "op " + std::to_string(first.op());
  Status status = OpErrorToStatus(first);
  // Sequence numbers start at 1: seq 0 is an error of the host itself (a lost
  // worker), which no one instruction caused.
  std::string message = first.seq() == 0 ? "gt: " + first.host() + ": " + status.ToString()
                                          : "gt: " + op + " #" + std::to_string(first.seq()) + " failed on " +
                                                first.host() + ": " + status.ToString();
  if (errors.size() > 1) message += " (and " + std::to_string(errors.size() - 1) + " more failed ops)";
  return Error(status.code(), message);
}

}  // namespace

void TensorRecord::BumpVersion() const {
  if (!version) version = std::make_shared<uint64_t>(0);
  ++*version;
}

void TensorRecord::ShareVersionWith(const TensorRecord& view) const {
  if (!version) version = std::make_shared<uint64_t>(0);
  view.version = version;
}

TensorRecord::~TensorRecord() {
  if (session) session->Free(id);
}

std::shared_ptr<Session> Session::Get() {
  std::lock_guard<std::mutex> lock(global_mu);
  std::shared_ptr<Session>& s = GlobalSession();
  if (!s) s = std::shared_ptr<Session>(new Session());
  return s;
}

void Session::SetAddress(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) throw Error(Code::kFailedPrecondition, "gt::connect must be called before the first tensor op");
  // "" is the embedded default again.
  if (Status s = address.empty() ? Status::Ok()
                                 : CheckEndpoint(address.find("://") == std::string::npos ? "tcp://" + address : address);
      !s.ok())
    throw Error(s.code(), "gt::connect: " + s.message());
  address_ = address;
}

void Session::SetWorkers(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) throw Error(Code::kFailedPrecondition, "gt::workers must be called before the first tensor op");
  if (n < 1) throw Error(Code::kInvalidArgument, "gt::workers: need at least 1 worker, got " + std::to_string(n));
  workers_ = n;
}

void Session::EnsureStartedLocked() {
  if (closed_) throw Error(Code::kFailedPrecondition, "gt: the session was shut down");
  if (started_) return;
  // The client's own stages first: a bad manifest fails before anything starts.
  Result<std::optional<HostManifest>> manifest = ClientManifestFromEnv();
  if (!manifest.ok()) throw Error(manifest.status().code(), "gt: " + manifest.status().message());
  Result<std::optional<std::chrono::milliseconds>> connect_timeout = ConnectTimeoutFromEnv();
  if (!connect_timeout.ok()) throw Error(connect_timeout.status().code(), "gt: " + connect_timeout.status().message());
  // CURVE keys for a dispatcher that authenticates its clients (docs/SECURITY.md).
  const char* client_key = std::getenv("GT_CLIENT_KEY");
  const char* server_key = std::getenv("GT_SERVER_KEY");
  curve_ = CurveClientKeys{client_key ? client_key : "", server_key ? server_key : ""};
  // The embedded dispatcher's sharding stage then places tensors with no config.
  if (const char* auto_shard = std::getenv("GT_AUTO_SHARD"); auto_shard && *auto_shard && EnvFlag(auto_shard))
    placing_ = true;
  compile_scopes_eager_ = CompileScopesEager();
  compile_scopes_required_ = CompileStagesFromEnv();
  if (*manifest) {
    Result<std::unique_ptr<ClientPipeline>> pipeline =
        ClientPipeline::Create(**manifest, [this](Instruction&& inst) { AppendLocked(inst); });
    if (!pipeline.ok()) throw Error(pipeline.status().code(), "gt: client stages: " + pipeline.status().message());
    pipeline_ = std::move(*pipeline);
  }
  context_ = std::make_unique<zmq::context_t>(1);
  std::string endpoint;
  if (address_.empty()) {
    EmbeddedClusterOptions options;
    options.workers = workers_ > 0 ? workers_ : DefaultWorkers();
    options.intra_op_threads = DefaultIntraOpThreads();
    options.busy_wait = DefaultBusyWait();
    Result<std::unique_ptr<EmbeddedCluster>> cluster = EmbeddedCluster::Start(*context_, options);
    if (!cluster.ok()) throw Error(cluster.status().code(), "gt: cannot start the embedded cluster: " + cluster.status().message());
    cluster_ = std::move(*cluster);
    endpoint = cluster_->endpoint();
  } else {
    endpoint = Endpoint(address_);
  }
  // Says goodbye (freeing this client's remote tensors) and stops the
  // embedded hosts at exit. Registered after the backend plugins loaded
  // LibTorch, so it runs before LibTorch's own static destructors.
  std::atexit(CloseAtExit);
  socket_ = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::dealer);
  socket_->set(zmq::sockopt::linger, 2000);
  socket_->set(zmq::sockopt::sndhwm, 0);
  socket_->set(zmq::sockopt::rcvhwm, 0);
  if (!address_.empty() && curve_.enabled()) {
    if (Status s = ApplyCurveClient(*socket_, curve_); !s.ok())
      throw Error(s.code(), "gt: GT_CLIENT_KEY / GT_SERVER_KEY: " + s.message());
  }
  if (!address_.empty()) {
    // With no connection to queue on (refused keys, a closed one) a send
    // would wait forever: give up after a second, then say why.
    socket_->set(zmq::sockopt::sndtimeo, 1000);
    // A dispatcher whose host vanished sends no FIN: ZMTP heartbeats close
    // the connection, so the watch sees it.
    socket_->set(zmq::sockopt::heartbeat_ivl, 2000);
    socket_->set(zmq::sockopt::heartbeat_timeout, 20000);
    // The reply to a sync comes from another process, whose work runs on
    // its own cores: polling before sleeping saves this thread's wake-up
    // (docs/PERFORMANCE.md, the process cluster's round trip). In the
    // embedded default the poll would take the CPU its own hosts need.
    busy_wait_ = DefaultBusyWait();
    if (*connect_timeout) {
      Result<std::unique_ptr<ConnectionWatch>> watch = ConnectionWatch::Attach(
          *context_, *socket_, address_ == endpoint ? endpoint : address_ + " (" + endpoint + ")", **connect_timeout);
      if (watch.ok()) watch_ = std::move(*watch);
      else GT_LOG(kClient, "no connection watch: " << watch.status().message());  // then syncs wait as before
    }
  }
  try {
    socket_->connect(endpoint);
  } catch (const zmq::error_t& e) {  // CheckEndpoint let it through; ZeroMQ says why not
    throw Error(Code::kInvalidArgument, "gt: cannot connect to " + endpoint + ": " + e.what());
  }
  inproc_ = endpoint.rfind("inproc://", 0) == 0;
  GT_LOG(kClient, "connected to " << (address_.empty() ? "the embedded cluster at " : "") << endpoint
                                  << (!address_.empty() && endpoint.rfind("ipc://", 0) == 0 &&
                                              address_.find("://") == std::string::npos
                                          ? " (local ipc for " + address_ + ")"
                                          : ""));
  const uint64_t token = RandomToken();
  wire::Envelope hello;
  hello.set_kind(wire::Envelope::HELLO);
  hello.set_token(token);
  (void)SendEnvelope(*socket_, "", hello, {});
  heartbeat_ = std::thread([this, endpoint, token] { HeartbeatLoop(endpoint, token); });
  started_ = true;
  for (const auto& [name, config] : configs_) SendConfigLocked(name, config);
}

void Session::SetConfig(const std::string& name, std::optional<SignalConfig> config) {
  std::lock_guard<std::mutex> lock(mu_);
  if (config) configs_[name] = *config;
  else configs_.erase(name);
  UpdatePlacingLocked();
  if (started_ && !closed_) SendConfigLocked(name, config);
}

std::optional<SignalConfig> Session::GetConfig(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = configs_.find(name);
  if (it == configs_.end()) return std::nullopt;
  return it->second;
}

void Session::ClearConfigs() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, SignalConfig> old;
  old.swap(configs_);
  UpdatePlacingLocked();
  if (started_ && !closed_)
    for (const auto& entry : old) SendConfigLocked(entry.first, std::nullopt);
}

// Sticky: tensors placed while a config was registered stay placed after it
// is gone, and a unit must never take one (the sharding stage refuses it).
void Session::UpdatePlacingLocked() {
  bool placing = placing_;
  for (const auto& [name, config] : configs_) placing = placing || config.shard || config.replicated || config.mesh;
  // What the stages hold back goes first: the configure comes after it.
  if (placing && !placing_ && pipeline_) pipeline_->Drain();
  placing_ = placing;
}

void Session::SendConfigLocked(const std::string& name, const std::optional<SignalConfig>& config) {
  ConfigureSpec spec;
  spec.signal = name;
  spec.forget = !config;
  if (config) {
    if (config->shard) {
      spec.shard_axis = config->shard->axis;
      spec.workers.assign(config->shard->workers.begin(), config->shard->workers.end());
    }
    spec.replicated = config->replicated;
    if (config->replicated) spec.workers.assign(config->replicas.begin(), config->replicas.end());
    spec.compile = config->compile;
    spec.backward = config->backward;
    if (config->mesh) {
      const MeshConfig& m = *config->mesh;
      spec.workers.assign(m.workers.begin(), m.workers.end());
      spec.mesh = {m.rows, m.columns};
      for (const std::optional<int64_t>& dim : m.shard_dims) spec.mesh.insert(spec.mesh.end(), {dim ? 1 : 2, dim.value_or(0)});
    }
  }
  QueueLocked(MakeConfigure(next_seq_++, spec));
}

void Session::HeartbeatLoop(std::string endpoint, uint64_t token) {
  zmq::socket_t beat(*context_, zmq::socket_type::dealer);
  beat.set(zmq::sockopt::linger, 0);
  beat.set(zmq::sockopt::sndtimeo, 0);  // no connection: this beat is dropped, the loop goes on (and can stop)
  if (curve_.enabled() && !ApplyCurveClient(beat, curve_).ok()) return;  // the main socket's check failed first
  beat.connect(endpoint);
  wire::Envelope env;
  env.set_kind(wire::Envelope::HEARTBEAT);
  env.set_token(token);
  while (!stop_heartbeat_.load()) {
    (void)SendEnvelope(beat, "", env, {});
    for (int i = 0; i < 10 && !stop_heartbeat_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::shared_ptr<TensorRecord> Session::Issue(Instruction inst, const std::vector<const TensorRecord*>& operands) {
  std::vector<const TensorMeta*> metas;
  for (const TensorRecord* r : operands) {
    if (r == nullptr) throw Error(Code::kInvalidArgument, std::string(OpName(inst.op)) + ": operand is an undefined tensor");
    metas.push_back(&r->meta);
    inst.operands.push_back(r->id);
  }
  Result<TensorMeta> meta = InferResult(inst, metas);
  if (!meta.ok()) throw Error(meta.status().code(), meta.status().message());
  LoadEnvConfigOnce();
  Origin origin = NoteOrigin(inst.op, inst.signal);
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  auto record = std::make_shared<TensorRecord>();
  record->id = next_id_++;
  record->meta = std::move(*meta);
  inst.results = {record->id};
  inst.seq = next_seq_++;
  if (!origin.op.empty()) origins_[inst.seq] = std::move(origin);
  if (inst.op == Op::kRedistribute && !placing_) {
    // Its result has a placement record at the dispatcher: from now on every
    // op must reach the sharding stage as itself, not inside a unit.
    if (pipeline_) pipeline_->Drain();
    placing_ = true;
  }
  QueueLocked(std::move(inst));
  // Only once queued: a record dropped by a throw above must not free its
  // id (its destructor would take mu_, held here).
  record->session = shared_from_this();
  return record;
}

void Session::Mutate(Instruction inst, const std::vector<const TensorRecord*>& operands) {
  for (const TensorRecord* r : operands) {
    if (r == nullptr) throw Error(Code::kInvalidArgument, std::string(OpName(inst.op)) + ": undefined tensor");
    inst.operands.push_back(r->id);
  }
  if (inst.op == Op::kCopyInto || inst.op == Op::kMulInto || inst.op == Op::kAddInto) {
    const Shape& to = operands[0]->meta.shape;
    const Shape& from = operands[1]->meta.shape;
    Result<Shape> shape = BroadcastShapes(to, from);
    const char* what = inst.op == Op::kCopyInto ? "copy_: source" : inst.op == Op::kMulInto ? "mul_: factor" : "add_: addend";
    if (!shape.ok() || *shape != to)
      throw Error(Code::kInvalidArgument, std::string(what) + " of shape " + ShapeToString(from) +
                                              " does not broadcast to destination " + ShapeToString(to));
  }
  Origin origin = NoteOrigin(inst.op, inst.signal);
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  inst.seq = next_seq_++;
  if (!origin.op.empty()) origins_[inst.seq] = std::move(origin);
  QueueLocked(std::move(inst));
}

void Session::Marker(Op op, const std::string& signal) {
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  if (compile_scopes_eager_) return;
  if (op == Op::kHotStart) FlushLocked();
  // A compile scope: no sequence id.
  Instruction marker = MakeHotMarker(op, HotMarker{.required = compile_scopes_required_});
  marker.seq = next_seq_++;
  marker.signal = signal;
  QueueLocked(std::move(marker));
}

void Session::QueueLocked(Instruction&& inst) {
  QueueFreesLocked();
  if (unsynced_ >= kSyncWindow) SyncLocked(0, nullptr, /*keep_errors=*/true);
  if (pipeline_ && !placing_) pipeline_->Push(std::move(inst));
  else AppendLocked(inst);
  if (batch_.instructions_size() >= kBatchInstructions || payload_bytes_ >= kBatchPayloadBytes) SendBatchLocked();
}

void Session::AppendLocked(const Instruction& inst) {
  if (batch_.instructions_size() == 0) batch_.set_kind(wire::Envelope::BATCH);
  EncodeInstruction(inst, batch_.add_instructions(), &payloads_);
  if (inst.payload) payload_bytes_ += inst.payload->size();
  ++unsynced_;
}

void Session::QueueFreesLocked() {
  if (!pending_free_) return;
  Instruction run = std::move(*pending_free_);
  pending_free_.reset();
  QueueLocked(std::move(run));
}

void Session::FlushLocked() {
  QueueFreesLocked();
  if (pipeline_) pipeline_->Drain();
  SendBatchLocked();
}

void Session::SendBatchLocked() {
  if (batch_.instructions_size() == 0) return;
  Result<size_t> sent = SendEnvelope(*socket_, "", batch_, payloads_);
  GT_LOG(kClient, "sent a batch of " << batch_.instructions_size() << " instructions ("
                                     << (sent.ok() ? std::to_string(*sent) + " bytes" : sent.status().ToString()) << ")");
  batch_.Clear();
  payloads_.clear();
  payload_bytes_ = 0;
  if (sent.ok()) return;
  if (watch_) {
    watch_->Drain();
    if (Status s = watch_->Check(ConnectionWatch::Clock::now()); !s.ok()) {
      broken_ = s;
      throw Error(s.code(), "gt: " + s.message());
    }
  }
  throw Error(sent.status().code(), "gt: cannot reach the dispatcher: " + sent.status().message());
}

void Session::Free(TensorId id) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_ || closed_) return;
    if (pending_free_ && pending_free_->operands.size() < kFreesPerInstruction) {
      pending_free_->operands.push_back(id);
      return;
    }
    QueueFreesLocked();
    pending_free_ = MakeFree(0, next_seq_++, {id});
  } catch (...) {
    // A free that cannot be sent is reclaimed when the session ends.
  }
}

void Session::Fetch(const TensorRecord& tensor, const std::function<void(FetchedData&)>& read) {
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  Instruction fetch = MakeFetch(0, next_seq_++, tensor.id);
  const uint64_t fetch_seq = fetch.seq;
  // Whatever the client's stages hold goes before the fetch and its sync,
  // whatever the stages do with them.
  if (pipeline_) pipeline_->Drain();
  QueueLocked(std::move(fetch));
  FetchedData data;
  SyncLocked(fetch_seq, &data);
  read(data);
}

void Session::SettleTogether(const std::vector<const TensorRecord*>& tensors) {
  if (tensors.size() < 2) return;  // one alone is summed when it is first needed, just as well
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  if (!placing_) return;
  Instruction settle;
  settle.op = Op::kSettle;
  for (const TensorRecord* t : tensors) settle.operands.push_back(t->id);
  settle.seq = next_seq_++;
  QueueLocked(std::move(settle));
}

bool Session::Places() {
  std::lock_guard<std::mutex> lock(mu_);
  return placing_;
}

FetchedData Session::Inspect(Instruction inst, const TensorRecord* operand) {
  if (operand) inst.operands = {operand->id};
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  inst.seq = next_seq_++;
  const uint64_t seq = inst.seq;
  const Result<InspectMode> request = ReadInspect(inst);
  const bool start = request.ok() && *request == InspectMode::kStartRecording;
  if (pipeline_) pipeline_->Drain();
  if (start) {
    origins_.clear();
    recording_ = true;
  }
  QueueLocked(std::move(inst));
  FetchedData data;
  if (start) return data;
  if (request.ok() && *request == InspectMode::kStopRecording) recording_ = false;
  SyncLocked(seq, &data);
  return data;
}

Session::Origin Session::OriginOf(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = origins_.find(seq);
  return it == origins_.end() ? Origin{} : it->second;
}

void Session::SetSourceHook(std::function<std::string()> hook) {
  std::lock_guard<std::mutex> lock(hook_mu_);
  source_hook_ = std::move(hook);
}

Session::Origin Session::NoteOrigin(Op op, const std::string& signal) {
  if (!recording_.load(std::memory_order_relaxed)) return {};
  Origin origin{std::string(OpName(op)), signal, "", client_internal::InBackward()};
  std::function<std::string()> hook;
  {
    std::lock_guard<std::mutex> lock(hook_mu_);
    hook = source_hook_;
  }
  try {
    if (hook) origin.source = hook();
  } catch (...) {  // a report without its source line rather than a failed op
  }
  return origin;
}

void Session::Sync() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_) return;
  EnsureStartedLocked();
  SyncLocked(0, nullptr);
}

void Session::SyncLocked(uint64_t fetch_seq, FetchedData* data, bool keep_errors) {
  // Its dispatcher is gone: nothing queued will ever be answered.
  if (!broken_.ok()) throw Error(broken_.code(), "gt: " + broken_.message());
  unsynced_ = 0;
  const uint64_t sync_id = next_sync_++;
  Instruction sync = MakeSync(0, next_seq_++, sync_id);
  if (pipeline_) pipeline_->Drain();
  QueueLocked(std::move(sync));
  FlushLocked();
  const auto waited_from = std::chrono::steady_clock::now();
  bool have_data = false;
  std::vector<wire::OpError> errors;
  errors.swap(stray_errors_);
  if (pipeline_)
    for (wire::OpError& e : pipeline_->TakeErrors()) errors.push_back(std::move(e));
  for (;;) {
    Result<WireMessage> msg = DecodeFrames(ReceiveLocked(), false);
    if (!msg.ok()) throw Error(Code::kInternal, "gt: undecodable reply from the dispatcher: " + msg.status().message());
    const wire::Envelope& env = msg->envelope;
    if (env.kind() == wire::Envelope::ERROR) {
      // The dispatcher refused a whole message (this sync's, or one before
      // it): no SYNC_DONE may come, so the sync fails with the reason.
      errors.insert(errors.end(), env.errors().begin(), env.errors().end());
      break;
    } else if (env.kind() == wire::Envelope::DATA && data && env.seq() == fetch_seq && msg->frames.size() == 1) {
      data->dtype = static_cast<DType>(std::min<uint32_t>(env.dtype(), static_cast<uint32_t>(DType::kCount) - 1));
      data->shape.assign(env.shape().begin(), env.shape().end());
      data->bytes = msg->frames[0];
      data->shares_worker_memory = inproc_;
      have_data = true;
    } else if (env.kind() == wire::Envelope::SYNC_DONE && env.sync_id() == sync_id) {
      errors.insert(errors.end(), env.errors().begin(), env.errors().end());
      break;
    }
  }
  GT_LOG(kClient, "sync " << sync_id << (data ? " (fetch #" + std::to_string(fetch_seq) + ")" : std::string())
                          << " waited "
                          << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - waited_from).count()
                          << " ms, " << errors.size() << " errors");
  for (const wire::OpError& e : errors)
    GT_LOG(kClient, "error from " << e.host() << ": op #" << e.seq() << ": " << e.message());
  if (!errors.empty() && keep_errors) {
    stray_errors_ = std::move(errors);
    return;
  }
  if (!errors.empty()) throw RemoteError(errors);
  if (data && !have_data) throw Error(Code::kInternal, "gt: fetch #" + std::to_string(fetch_seq) + " got no data");
}

std::vector<zmq::message_t> Session::ReceiveLocked() {
  for (;;) {
    // The message that is there already costs no poll.
    auto frames = ReceiveFrames(*socket_, watch_ ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
    if (frames) return std::move(*frames);
    if (!watch_) throw Error(Code::kUnavailable, "gt: connection closed while waiting for the dispatcher");
    zmq::pollitem_t items[] = {{socket_->handle(), 0, ZMQ_POLLIN, 0}, watch_->PollItem()};
    PollWithBusyWait(items, 2, watch_->PollTimeout(ConnectionWatch::Clock::now()), busy_wait_);
    watch_->Drain();
    if (Status s = watch_->Check(ConnectionWatch::Clock::now()); !s.ok()) {
      broken_ = s;
      throw Error(s.code(), "gt: " + s.message());
    }
  }
}

wire::Envelope Session::Stats(uint32_t timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  SyncLocked(0, nullptr);  // the figures then include every op issued before
  wire::Envelope request;
  request.set_kind(wire::Envelope::STATS);
  request.set_request_id(next_stats_++);
  request.set_timeout_ms(timeout_ms);
  Result<size_t> sent = SendEnvelope(*socket_, "", request, {});
  if (!sent.ok()) throw Error(sent.status().code(), "gt: cannot reach the dispatcher: " + sent.status().message());
  // The dispatcher answers by its deadline; the grace covers a busy one.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms) + std::chrono::seconds(5);
  wire::Envelope reply = AwaitStatsReplyLocked(request.request_id(), deadline);
  if (pipeline_) *reply.add_snapshots() = pipeline_->Snapshot();  // the client's own stages, after the hosts
  return reply;
}

wire::Envelope Session::AwaitStatsReplyLocked(uint64_t request_id, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    zmq::pollitem_t item{socket_->handle(), 0, ZMQ_POLLIN, 0};
    if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0)
      throw Error(Code::kUnavailable, "gt: the dispatcher did not answer a stats request");
    auto frames = ReceiveFrames(*socket_, zmq::recv_flags::dontwait);
    if (!frames) continue;
    Result<WireMessage> msg = DecodeFrames(std::move(*frames), false);
    if (!msg.ok()) throw Error(Code::kInternal, "gt: undecodable reply from the dispatcher: " + msg.status().message());
    wire::Envelope& env = msg->envelope;
    if (env.kind() == wire::Envelope::ERROR) {  // reported at the next sync point, as elsewhere
      stray_errors_.insert(stray_errors_.end(), env.errors().begin(), env.errors().end());
    } else if (env.kind() == wire::Envelope::STATS_REPLY && env.request_id() == request_id) {
      return std::move(env);
    }
  }
}

void Session::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  if (!started_) return;
  if (broken_.ok()) {  // else nobody is there to say goodbye to
    try {
      FlushLocked();
      wire::Envelope bye;
      bye.set_kind(wire::Envelope::BYE);
      (void)SendEnvelope(*socket_, "", bye, {});
    } catch (...) {
    }
  }
  stop_heartbeat_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
  watch_.reset();
  socket_.reset();
  cluster_.reset();
  context_.reset();
}

Session::~Session() { Close(); }

}  // namespace gt::client_internal
