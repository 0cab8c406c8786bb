// The client's session: its start (settings, the client's stages, the
// embedded default or the connection to a dispatcher, CURVE, the connection
// watch), signal configs, the heartbeat and the goodbye. Issuing and batching
// are in session_issue.cc, sync points in session_sync.cc.
#include "session.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "gt/endpoint.h"
#include "gt/log.h"
#include "gt/op_attrs.h"
#include "gt/settings.h"
#include "host/shipped_configs.h"
#include "net/default_keys.h"
#include "net/local_ipc.h"
#include "net/transport.h"

namespace gt::client_internal {
namespace {

// Past this many bytes sent since its last sync, a session stops keeping
// them for a dispatcher restart (resume_log.h): a restart then loses it.
constexpr size_t kResumeKeepBytes = size_t{1} << 30;

// An explicit endpoint (tcp://, ipc://, inproc://) is used as given; a bare
// host:port is tcp, or the local dispatcher's ipc socket (core/net/local_ipc.h).
std::string Endpoint(const std::string& address) {
  if (address.find("://") != std::string::npos) return address;
  return PreferLocalIpc(ToZmqEndpoint(address));
}

// `result`'s value, or a gt::Error with its message after `what`: how the
// session's start reports a bad setting (naming the variable), manifest or
// cluster, failing the first op.
template <typename T>
T OrThrow(Result<T> result, const std::string& what = "gt: ") {
  if (!result.ok()) throw Error(result.status().code(), what + result.status().message());
  return std::move(*result);
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

// The session must end before exit() destroys anything its threads use: the
// embedded workers run LibTorch, and LibTorch (like protobuf) makes many of
// its statics on first use, registering their destructors after any atexit
// handler registered at the session's start, so exit() would destroy them
// first, under a worker still inside at::rand (a crash, or a hang on a
// destroyed mutex). glibc's exit() runs the calling thread's thread_local
// destructors before every atexit handler and static destructor: a
// thread_local of the main thread closes the session first. Other threads'
// copies do nothing when those threads end.
struct MainThreadExitGuard {
  ~MainThreadExitGuard() {
    if (gettid() == getpid()) CloseAtExit();
  }
};

void ArmExitGuard() {
  thread_local MainThreadExitGuard guard;
  (void)guard;
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
  ArmExitGuard();
  std::lock_guard<std::mutex> lock(global_mu);
  std::shared_ptr<Session>& s = GlobalSession();
  if (!s) s = std::shared_ptr<Session>(new Session());
  return s;
}

void Session::SetAddress(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) throw Error(Code::kFailedPrecondition, "gt::connect must be called before the first tensor op");
  // "" is the embedded default again.
  if (Status s = address.empty() ? Status::Ok() : CheckEndpoint(ToZmqEndpoint(address)); !s.ok())
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
  const std::optional<std::chrono::milliseconds> connect_timeout = ReadSettingsLocked();
  context_ = std::make_unique<zmq::context_t>(1);
  const std::string endpoint = address_.empty() ? StartEmbeddedLocked() : Endpoint(address_);
  // Says goodbye (freeing this client's remote tensors) and stops the
  // embedded hosts at exit when the main thread never used the session (so
  // has no exit guard, above). Registered after the backend plugins loaded
  // LibTorch, so it runs before the destructors of LibTorch's load-time
  // statics (not of those made on first use since: see MainThreadExitGuard).
  std::atexit(CloseAtExit);
  ConnectLocked(endpoint, connect_timeout);
  const uint64_t token = RandomToken();
  token_ = token;
  // Only a separate dispatcher can restart under a session, and only a
  // watched connection says when it did.
  if (!address_.empty() && watch_ && reconnect_grace_.count() > 0) resume_ = std::make_unique<ResumeLog>(kResumeKeepBytes);
  wire::Envelope hello;
  hello.set_kind(wire::Envelope::HELLO);
  hello.set_token(token);
  (void)SendEnvelope(*socket_, "", hello, {});
  heartbeat_ = std::thread([this, endpoint, token] { HeartbeatLoop(endpoint, token); });
  started_ = true;
  for (const auto& [name, config] : configs_) SendConfigLocked(name, config);
}

std::optional<std::chrono::milliseconds> Session::ReadSettingsLocked() {
  if (Status s = CheckSettings(); !s.ok()) throw Error(s.code(), "gt: " + s.message());
  // The client's own stages first: a bad manifest fails before anything starts.
  std::optional<HostManifest> manifest = OrThrow(ClientManifestFromEnv());
  std::optional<std::chrono::milliseconds> connect_timeout = OrThrow(ConnectTimeoutFromEnv());
  reconnect_grace_ = std::chrono::milliseconds(std::llround(OrThrow(SecondsSetting("GT_RECONNECT_GRACE")) * 1000));
  // CURVE keys for a dispatcher that authenticates its clients (docs/SECURITY.md).
  curve_ = CurveClientKeys{TextSetting("GT_CLIENT_KEY").value_or(""), TextSetting("GT_SERVER_KEY").value_or("")};
  // The embedded dispatcher's sharding stage then places tensors with no config.
  if (OrThrow(SwitchSetting("GT_AUTO_SHARD"))) placing_ = true;
  // GT_EXPLAIN is the sharding stage's, read where the dispatcher runs: in
  // this process only for the embedded default. A client of a separate
  // dispatcher says where it must be set instead of silently ignoring it.
  if (!address_.empty() && OrThrow(SwitchSetting("GT_EXPLAIN")))
    std::cerr << "gt: GT_EXPLAIN=1 has no effect in a client of the dispatcher at " << address_
              << ": its sharding stage explains placements on the dispatcher's own stderr. Set GT_EXPLAIN=1 where "
                 "the dispatcher starts (gt-dispatcher, gt cluster, python -m gt.server), or explain: true in "
                 "its manifest's sharding stage.\n";
  compile_scopes_eager_ = OrThrow(CompileScopesEager());
  compile_scopes_required_ = OrThrow(CompileStagesFromEnv());
  if (manifest) {
    pipeline_ = OrThrow(ClientPipeline::Create(*manifest, [this](Instruction&& inst) { AppendLocked(inst); }),
                        "gt: client stages: ");
  }
  return connect_timeout;
}

std::string Session::StartEmbeddedLocked() {
  EmbeddedClusterOptions options;
  options.workers = workers_ > 0 ? workers_ : static_cast<int>(OrThrow(IntSetting("GT_WORKERS")));
  options.intra_op_threads = OrThrow(IntSetting("GT_INTRA_OP_THREADS"));
  options.busy_wait = std::chrono::microseconds(OrThrow(IntSetting("GT_BUSY_WAIT_US")));
  cluster_ = OrThrow(EmbeddedCluster::Start(*context_, options), "gt: cannot start the embedded cluster: ");
  return cluster_->endpoint();
}

std::unique_ptr<zmq::socket_t> Session::NewSocketLocked() {
  auto socket = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::dealer);
  socket->set(zmq::sockopt::linger, 2000);
  socket->set(zmq::sockopt::sndhwm, 0);
  socket->set(zmq::sockopt::rcvhwm, 0);
  if (address_.empty()) return socket;
  if (curve_.enabled()) {
    if (Status s = ApplyCurveClient(*socket, curve_); !s.ok())
      throw Error(s.code(), "gt: GT_CLIENT_KEY / GT_SERVER_KEY: " + s.message());
  }
  // With no connection to queue on (refused keys, a closed one) a send
  // would wait forever: give up after a second, then say why.
  socket->set(zmq::sockopt::sndtimeo, 1000);
  // A dispatcher whose host vanished sends no FIN: ZMTP heartbeats close
  // the connection, so the watch sees it.
  socket->set(zmq::sockopt::heartbeat_ivl, 2000);
  socket->set(zmq::sockopt::heartbeat_timeout, 20000);
  return socket;
}

std::string Session::RemoteEndpointLocked() const { return Endpoint(address_); }

Result<std::unique_ptr<ConnectionWatch>> Session::WatchLocked(const std::string& endpoint,
                                                              std::chrono::milliseconds timeout) {
  return ConnectionWatch::Attach(*context_, *socket_, address_ == endpoint ? endpoint : address_ + " (" + endpoint + ")",
                                 endpoint, timeout);
}

void Session::ConnectLocked(const std::string& endpoint,
                            const std::optional<std::chrono::milliseconds>& connect_timeout) {
  // Without keys, a dispatcher on this machine is this user's
  // (core/net/default_keys.h); a resumed session reuses what this resolved.
  if (!address_.empty())
    curve_ = OrThrow(ResolveConnectKeys(curve_, endpoint, OrThrow(SwitchSetting("GT_INSECURE")), "client"), "gt: ");
  socket_ = NewSocketLocked();
  if (!address_.empty()) {
    // The reply to a sync comes from another process, whose work runs on
    // its own cores: polling before sleeping saves this thread's wake-up
    // (docs/performance/round-trip.md). In the
    // embedded default the poll would take the CPU its own hosts need.
    busy_wait_ = std::chrono::microseconds(OrThrow(IntSetting("GT_BUSY_WAIT_US")));
    if (connect_timeout) {
      Result<std::unique_ptr<ConnectionWatch>> watch = WatchLocked(endpoint, *connect_timeout);
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
  Instruction configure = MakeConfigure(next_seq_++, spec);
  if (resume_) resume_->Configured(name, config ? std::optional<Instruction>(configure) : std::nullopt);
  QueueLocked(std::move(configure));
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
