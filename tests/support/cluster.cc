#include "cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "ir/codec.h"
#include "gt/op_attrs.h"
#include "net/default_keys.h"
#include "net/transport.h"

extern char** environ;

namespace gt::testing {
namespace {

// With `log`, the process's stdout and stderr go to that file.
pid_t Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& extra_env,
            const std::string& log = "") {
  // getenv finds the first entry of a name: the test's own would win.
  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    if (!extra_env.count(std::string(entry.substr(0, entry.find('='))))) env_storage.emplace_back(entry);
  }
  for (const auto& [k, v] : extra_env) env_storage.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!log.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  pid_t pid = -1;
  const int failed = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return failed != 0 ? -1 : pid;
}

// The first line a service writes to `log`, where it says which addresses it
// bound; "" when `pid` exits or no whole line comes within `timeout_ms`.
std::string AnnouncementLine(const std::string& log, pid_t pid, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(log);
    std::string line;
    if (std::getline(in, line) && !in.eof()) return line;  // a whole first line
    int status = 0;
    if (pid <= 0 || waitpid(pid, &status, WNOHANG) != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::fprintf(stderr, "%s: the service announced nothing\n", log.c_str());
  return "";
}

// The loopback port after `what` ("metrics on http://", "discovery on
// http://") in an announcement line, for a service told port 0; 0 if absent.
int AnnouncedPort(const std::string& line, const std::string& what) {
  const std::regex pattern(what + "127\\.0\\.0\\.1:([0-9]+)/");
  std::smatch port;
  if (std::regex_search(line, port, pattern)) return std::stoi(port[1]);
  if (!line.empty()) std::fprintf(stderr, "no '%s' port announced in: %s\n", what.c_str(), line.c_str());
  return 0;
}

std::string UniqueName() {
  static std::atomic<int> n{0};
  return std::to_string(n++);
}

}  // namespace

std::string BinDir() { return GT_TEST_BIN_DIR; }

// Removed at exit by the process that made it only: a forked child that
// exits normally must not take its parent's files.
const std::string& TestTempDir() {
  static const pid_t owner = getpid();
  static const std::string* dir = [] {
    std::string pattern = "/tmp/gt-test-" + std::to_string(owner) + "-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("gt tests: mkdtemp");
      std::abort();
    }
    auto* made = new std::string(pattern);
    std::atexit([] {
      if (getpid() != owner) return;
      std::error_code ignored;
      std::filesystem::remove_all(TestTempDir(), ignored);
    });
    return made;
  }();
  return *dir;
}

std::string TempPath(const std::string& name) { return TestTempDir() + "/" + UniqueName() + "-" + name; }

std::string WriteTempFile(const std::string& name, const std::string& contents) {
  std::string path = TempPath(name);
  std::ofstream(path) << contents;
  return path;
}

ClusterOptions ShardingClusterOptions(const std::string& name, int workers) {
  ClusterOptions options;
  options.workers = workers;
  options.dispatcher_manifest =
      WriteTempFile(name + "-dispatcher.yaml", "host: dispatcher\nstages:\n  - name: sharding\n    plugin: sharding\n");
  options.worker_manifest = WriteTempFile(
      name + "-worker.yaml",
      "host: worker\nbackend:\n  plugin: torch\n  options: {intra_op_threads: 1, collective_timeout_ms: 60000}\n");
  return options;
}

// Metrics on port 0, read back from each host's first line: a port probed
// free beforehand can be taken by a parallel test's process first.
ProcessCluster::ProcessCluster(const ClusterOptions& options) {
  const std::string name = TempPath("cluster");
  endpoint_ = "ipc://" + name + ".sock";
  const std::string bin = options.bin_dir.empty() ? BinDir() : options.bin_dir;
  std::vector<std::string> d = {bin + "/gt-dispatcher", "--listen", endpoint_, "--metrics", "127.0.0.1:0"};
  if (!options.dispatcher_manifest.empty()) d.insert(d.end(), {"--manifest", options.dispatcher_manifest});
  logs_.push_back(name + "-dispatcher.log");
  pids_.push_back(Spawn(d, options.env, logs_.back()));
  for (int i = 0; i < options.workers; ++i) {
    std::vector<std::string> w = {bin + "/gt-worker", "--connect", endpoint_, "--id", "worker-" + std::to_string(i),
                                  "--metrics", "127.0.0.1:0"};
    if (!options.worker_manifest.empty()) w.insert(w.end(), {"--manifest", options.worker_manifest});
    logs_.push_back(name + "-worker-" + std::to_string(i) + ".log");
    pids_.push_back(Spawn(w, options.env, logs_.back()));
  }
  const std::string dispatcher = AnnouncementLine(logs_[0], pids_[0], 30000);
  dispatcher_port_ = AnnouncedPort(dispatcher, "metrics on http://");
  if (dispatcher.find("discovery on") != std::string::npos)
    discovery_port_ = AnnouncedPort(dispatcher, "discovery on http://");
  for (size_t i = 1; i < pids_.size(); ++i)
    worker_ports_.push_back(AnnouncedPort(AnnouncementLine(logs_[i], pids_[i], 30000), "metrics on http://"));
}

ProcessCluster::~ProcessCluster() {
  for (size_t i = pids_.size(); i-- > 0;)
    if (pids_[i] > 0) kill(pids_[i], SIGTERM);
  for (pid_t p : pids_)
    if (p > 0) waitpid(p, nullptr, 0);
  // The hosts' output where it went before they wrote to files: the test's.
  for (const std::string& log : logs_) {
    std::ifstream in(log);
    std::fputs(std::string(std::istreambuf_iterator<char>(in), {}).c_str(), stdout);
    std::remove(log.c_str());
  }
  std::fflush(stdout);
}

void ProcessCluster::KillWorkerForTest(int index) {
  pid_t& p = pids_.at(static_cast<size_t>(index) + 1);
  kill(p, SIGKILL);
  waitpid(p, nullptr, 0);
  p = -1;
}

void ProcessCluster::SignalWorkerForTest(int index, int signal) {
  pid_t p = pids_.at(static_cast<size_t>(index) + 1);
  if (p > 0) kill(p, signal);
}

bool ProcessCluster::AllAlive() const {
  for (pid_t p : pids_) {
    if (p <= 0) return false;
    int status = 0;
    if (waitpid(p, &status, WNOHANG) != 0) return false;
  }
  return true;
}

bool ProcessCluster::WaitForWorkers(int n, int timeout_ms) const {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    auto v = MetricValue(HttpGet(dispatcher_port_, "/metrics"), "gt_host_workers_connected");
    if (v && *v >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

namespace {

// A port the kernel says is free now; it may hand the same one out again
// once the probe socket is closed.
int ProbeFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

}  // namespace

// Never the same port twice in one test process: a port handed out but not
// bound yet (a discovery port chosen before its dispatcher starts) looks free
// to the kernel, and two hosts given it cannot both serve.
int FreeTcpPort() {
  static std::mutex mu;
  static std::set<int> given;
  std::lock_guard<std::mutex> lock(mu);
  int port = ProbeFreePort();
  for (int attempt = 0; attempt < 100 && given.count(port); ++attempt) port = ProbeFreePort();
  given.insert(port);
  return port;
}

std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "";
  }
  std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) response.append(buf, static_cast<size_t>(n));
  close(fd);
  size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

std::optional<double> MetricValue(const std::string& text, const std::string& name,
                                  const std::map<std::string, std::string>& labels) {
  std::optional<double> total;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos || line.substr(0, name_end) != name) continue;
    std::string label_text;
    size_t value_start = name_end;
    if (line[name_end] == '{') {
      size_t close = line.find('}', name_end);
      label_text = line.substr(name_end + 1, close - name_end - 1);
      value_start = close + 1;
    }
    bool match = true;
    for (const auto& [k, v] : labels)
      if (label_text.find(k + "=\"" + v + "\"") == std::string::npos) match = false;
    if (!match) continue;
    total = total.value_or(0) + std::stod(line.substr(value_start));
  }
  return total;
}

RawClient::RawClient(zmq::context_t& context, const std::string& endpoint, bool hello)
    : socket_(context, zmq::socket_type::dealer), endpoint_(endpoint) {
  socket_.set(zmq::sockopt::linger, 0);
  if (!hello) return;
  token_ = RandomToken();
  SendToken(wire::Envelope::HELLO, token_);
}

namespace {

// The tokens RawClients registered as workers with, in this process.
std::set<uint64_t>& WorkerTokens() {
  static std::set<uint64_t> tokens;
  return tokens;
}

}  // namespace

// A ProcessCluster's dispatcher authenticates with this user's default key
// set (docs/SECURITY.md), and the key decides the role: a RawClient whose
// first message only a worker sends (REGISTER, ATTACH, a heartbeat with a
// registered worker's token) connects with the workers' key, as gt-worker
// would; any other with the clients' key, as gt::connect would.
void RawClient::ConnectFor(wire::Envelope::Kind kind, uint64_t token) {
  if (connected_) return;
  connected_ = true;
  const bool worker = kind == wire::Envelope::REGISTER || kind == wire::Envelope::ATTACH ||
                      (kind == wire::Envelope::HEARTBEAT && WorkerTokens().count(token) > 0);
  Result<CurveClientKeys> keys = ResolveConnectKeys({}, endpoint_, false, worker ? "worker" : "client");
  const Status applied = !keys.ok() ? keys.status() : keys->enabled() ? ApplyCurveClient(socket_, *keys) : Status::Ok();
  if (!applied.ok()) {
    std::fprintf(stderr, "RawClient: the default key set: %s\n", applied.message().c_str());
    std::abort();
  }
  socket_.connect(endpoint_);
}

void RawClient::SendToken(wire::Envelope::Kind kind, uint64_t token) {
  ConnectFor(kind, token);
  if (kind == wire::Envelope::REGISTER) WorkerTokens().insert(token);
  wire::Envelope env;
  env.set_kind(kind);
  env.set_token(token);
  (void)SendEnvelope(socket_, "", env, {});
}

void RawClient::Send(const std::vector<Instruction>& batch) {
  ConnectFor(wire::Envelope::BATCH, 0);
  if (token_ != 0) SendToken(wire::Envelope::HEARTBEAT, token_);
  wire::Envelope env;
  env.set_kind(wire::Envelope::BATCH);
  std::vector<BlobPtr> payloads;
  for (const Instruction& inst : batch) EncodeInstruction(inst, env.add_instructions(), &payloads);
  (void)SendEnvelope(socket_, "", env, payloads);
}

void RawClient::SendFrames(const std::vector<std::string>& frames) {
  // Raw frames still say who sends them: a REGISTER connects as a worker.
  wire::Envelope first;
  if (!frames.empty() && first.ParseFromString(frames[0])) ConnectFor(first.kind(), first.token());
  else ConnectFor(wire::Envelope::BATCH, 0);
  for (size_t i = 0; i < frames.size(); ++i)
    socket_.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
}

std::optional<wire::Envelope> RawClient::Receive(int timeout_ms) {
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0) return std::nullopt;
  auto frames = ReceiveFrames(socket_, zmq::recv_flags::none);
  if (!frames) return std::nullopt;
  Result<WireMessage> msg = DecodeFrames(std::move(*frames), false);
  if (!msg.ok()) return std::nullopt;
  last_frames_.clear();
  for (const BlobPtr& b : msg->frames) last_frames_.emplace_back(reinterpret_cast<const char*>(b->data()), b->size());
  return msg->envelope;
}

std::optional<wire::Envelope> RawClient::Sync(std::vector<std::pair<wire::Envelope, std::string>>* data, int timeout_ms) {
  const Instruction sync = MakeSync(0, 0, ++next_sync_);
  Send({sync});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    std::optional<wire::Envelope> env = Receive(100);
    if (!env) continue;
    if (env->kind() == wire::Envelope::SYNC_DONE && env->sync_id() == SyncId(sync)) return env;
    if (env->kind() == wire::Envelope::DATA && data) data->emplace_back(*env, last_frames_.empty() ? "" : last_frames_[0]);
  }
  return std::nullopt;
}

void RawClient::Bye() {
  ConnectFor(wire::Envelope::BYE, 0);
  wire::Envelope env;
  env.set_kind(wire::Envelope::BYE);
  (void)SendEnvelope(socket_, "", env, {});
}

Instruction FromFloats(TensorId id, const std::vector<float>& values, Shape shape) {
  Instruction inst;
  inst.op = Op::kFromBytes;
  inst.seq = id;
  inst.results = {id};
  inst.attrs.shape = shape.empty() ? Shape{static_cast<int64_t>(values.size())} : std::move(shape);
  inst.payload = CopyToBlob(values.data(), values.size() * sizeof(float));
  return inst;
}

Instruction MakeInstruction(Op op, uint64_t seq, std::vector<TensorId> results, std::vector<TensorId> operands) {
  Instruction inst;
  inst.op = op;
  inst.seq = seq;
  inst.results = std::move(results);
  inst.operands = std::move(operands);
  return inst;
}

std::vector<float> FetchFloats(RawClient& client, TensorId id, uint64_t seq, wire::Envelope* done) {
  client.Send({MakeInstruction(Op::kFetch, seq, {}, {id})});
  std::vector<std::pair<wire::Envelope, std::string>> data;
  std::optional<wire::Envelope> sync = client.Sync(&data);
  if (done && sync) *done = *sync;
  if (!sync || data.empty()) return {};
  std::vector<float> out(data[0].second.size() / sizeof(float));
  std::memcpy(out.data(), data[0].second.data(), out.size() * sizeof(float));
  return out;
}

}  // namespace gt::testing
