// The parts of gt-bench-compile (compile_bench.cc: the parent, which pairs the
// runs and reports): the child that runs one program and prints seconds per
// step (compile_bench_child.cc), and the bare ZeroMQ floor
// (compile_bench_floor.cc).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace compile_bench {

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs `program` ("mlp", "chain" or "sync") as a client of `endpoint` (an
// address, or "embedded" for the embedded default), driven over stdin and
// stdout by the parent (DrivenChild); returns the exit status.
int Child(const std::string& endpoint, const std::string& program);

// How the floor's three processes wait for a message: in zmq_poll (as gt's
// hosts do, asleep until ZeroMQ's I/O thread wakes them) or spinning on a
// non-blocking receive with a sched_yield between tries (no thread of theirs
// ever sleeps: what busy waiting could save at most).
enum class FloorWait { kSleep, kSpin };

// Seconds per round trip of a 100-byte message client (DEALER) -> broker
// (ROUTER in front, ROUTER behind) -> worker (DEALER) and back, three
// processes over ipc:// as the benchmark's clusters are (or tcp on
// loopback): what a gt sync point costs before gt does any work of its own;
// 0 when it could not be measured. Runs in a child process of its own
// (forks; no ZeroMQ context may exist before a fork).
double BareRoundTrip(int rounds, bool tcp, FloorWait wait);

}  // namespace compile_bench
