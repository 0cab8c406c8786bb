// Test support: real gt-dispatcher and gt-worker processes, HTTP scrapes of
// their /metrics, and a raw wire-protocol client for the tests that must send
// what the C++ client never would (foreign ids, malformed bytes).
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "gt/instruction.h"
#include "wire.pb.h"

namespace gt::testing {

struct ClusterOptions {
  int workers = 1;
  std::string dispatcher_manifest;  // file; empty: the service's default
  std::string worker_manifest;      // file; empty: the service's default
  std::map<std::string, std::string> env;  // the hosts' environment: these values replace the test's own
  std::string bin_dir;                      // where gt-dispatcher and gt-worker are; empty: BinDir()
};

// Starts the processes on a fresh ipc:// endpoint with /metrics on loopback
// ports they bind themselves (port 0, read back from each one's first line;
// their output goes to files in TestTempDir(), copied to stdout and removed
// when the cluster is destroyed); stops them with SIGTERM when destroyed.
class ProcessCluster {
 public:
  explicit ProcessCluster(const ClusterOptions& options);
  ~ProcessCluster();
  ProcessCluster(const ProcessCluster&) = delete;
  ProcessCluster& operator=(const ProcessCluster&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  int dispatcher_metrics_port() const { return dispatcher_port_; }
  // The port of the dispatcher's service discovery, when its manifest asks
  // for one on 127.0.0.1 (port 0 recommended); 0 otherwise.
  int discovery_port() const { return discovery_port_; }
  const std::vector<int>& worker_metrics_ports() const { return worker_ports_; }
  // True while every process is still running.
  bool AllAlive() const;
  // Waits until the dispatcher reports `n` workers connected (or timeout).
  bool WaitForWorkers(int n, int timeout_ms = 20000) const;
  // SIGKILLs worker `index` (no goodbye), to test dead-worker detection.
  void KillWorkerForTest(int index);
  // Sends `signal` to worker `index` (SIGSTOP / SIGCONT: a hung worker).
  void SignalWorkerForTest(int index, int signal);

 private:
  std::string endpoint_;
  int dispatcher_port_ = 0;
  int discovery_port_ = 0;
  std::vector<int> worker_ports_;
  std::vector<pid_t> pids_;
  std::vector<std::string> logs_;  // one per process, in pids_'s order
};

int FreeTcpPort();
// GET http://127.0.0.1:<port><path>; returns the body or "" on failure.
std::string HttpGet(int port, const std::string& path);
// Sum of every sample of `name` whose labels include `labels`; nullopt if none.
std::optional<double> MetricValue(const std::string& exposition, const std::string& name,
                                  const std::map<std::string, std::string>& labels = {});
std::string BinDir();
// This test process's directory under /tmp, made on first use and removed,
// with everything in it, when the process exits.
const std::string& TestTempDir();
// A fresh path in TestTempDir() ending in `name`; nothing is created.
std::string TempPath(const std::string& name);
// Writes `contents` to a fresh TempPath(name) and returns that path.
std::string WriteTempFile(const std::string& name, const std::string& contents);
// `workers` workers (one intra-op thread each, collectives waiting up to 60 s
// for their members) behind a dispatcher with the sharding stage; `name`
// prefixes the manifests' file names.
ClusterOptions ShardingClusterOptions(const std::string& name, int workers);

// A client speaking the wire protocol directly over its own DEALER. It
// connects when it first sends: with the workers' default key when that
// message is one only a worker sends (REGISTER, ATTACH, a heartbeat with a
// token a RawClient registered), else with the clients' (docs/SECURITY.md).
class RawClient {
 public:
  // Opens a session (HELLO with a heartbeat token) unless `hello` is false.
  RawClient(zmq::context_t& context, const std::string& endpoint, bool hello = true);
  // Sends the instructions as one BATCH (payloads as data frames), after a
  // heartbeat that keeps an active session alive.
  void Send(const std::vector<Instruction>& batch);
  // Sends an envelope of `kind` carrying `token` (HELLO, HEARTBEAT).
  void SendToken(wire::Envelope::Kind kind, uint64_t token);
  // Sends arbitrary frames (for malformed-input tests).
  void SendFrames(const std::vector<std::string>& frames);
  // Sends a kSync and waits for its SYNC_DONE (nullopt on timeout). DATA
  // replies received meanwhile are appended to `data`.
  std::optional<wire::Envelope> Sync(std::vector<std::pair<wire::Envelope, std::string>>* data = nullptr,
                                     int timeout_ms = 20000);
  // Waits for any message (nullopt on timeout).
  std::optional<wire::Envelope> Receive(int timeout_ms);
  void Bye();
  // The session's heartbeat token (0: no session). Heartbeats are matched by
  // token, so another socket may send them while this one waits.
  uint64_t token() const { return token_; }

 private:
  void ConnectFor(wire::Envelope::Kind first, uint64_t token);

  zmq::socket_t socket_;
  std::string endpoint_;
  bool connected_ = false;
  uint64_t next_sync_ = 1000;
  uint64_t token_ = 0;  // 0: no session
  std::vector<std::string> last_frames_;  // data frames of the last message received
};

// Instructions for RawClient tests.
// A from_bytes of `values` (float32); `shape` defaults to {values.size()}.
Instruction FromFloats(TensorId id, const std::vector<float>& values, Shape shape = {});
Instruction MakeInstruction(Op op, uint64_t seq, std::vector<TensorId> results, std::vector<TensorId> operands);
// Fetches float32 tensor `id` through `client` (a sync point); empty on
// failure. `done`, when given, receives the SYNC_DONE with its errors.
std::vector<float> FetchFloats(RawClient& client, TensorId id, uint64_t seq, wire::Envelope* done = nullptr);

}  // namespace gt::testing
