// gt-bench-compile's floor (compile_bench.h): the bare ZeroMQ round trip over
// the benchmark's three processes, over ipc or tcp loopback, asleep in
// zmq_poll or spinning on non-blocking receives.
#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <memory>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "compile_bench.h"

namespace compile_bench {
namespace {

using Clock = std::chrono::steady_clock;


// Receives one message part on `socket`, waiting as `wait` says; false when
// nothing came within about a second.
bool FloorRecv(zmq::socket_t& socket, zmq::message_t& message, FloorWait wait) {
  if (wait == FloorWait::kSleep) return socket.recv(message).has_value();
  const auto give_up = Clock::now() + std::chrono::seconds(1);
  while (Clock::now() < give_up) {
    if (socket.recv(message, zmq::recv_flags::dontwait)) return true;
    sched_yield();
  }
  return false;
}

// The broker of BareRoundTrip: relays client -> worker and back, until
// `parent` is gone or it is killed.
[[noreturn]] void RunBroker(const std::string& front, const std::string& back, pid_t parent, FloorWait wait) {
  zmq::context_t context;
  zmq::socket_t clients(context, zmq::socket_type::router), workers(context, zmq::socket_type::router);
  clients.bind(front);
  workers.bind(back);
  zmq::message_t worker_id, client_id, body;
  while (getppid() == parent) {
    zmq::pollitem_t items[] = {{clients.handle(), 0, ZMQ_POLLIN, 0}, {workers.handle(), 0, ZMQ_POLLIN, 0}};
    const auto timeout = std::chrono::milliseconds(wait == FloorWait::kSpin ? 0 : 1000);
    if (zmq::poll(items, 2, timeout) == 0) {
      if (wait == FloorWait::kSpin) sched_yield();
      continue;
    }
    if (items[1].revents & ZMQ_POLLIN) {  // the worker's hello, or a reply
      (void)workers.recv(worker_id);
      (void)workers.recv(body);
      if (client_id.size() == 0) continue;
      zmq::message_t to(client_id.data(), client_id.size());
      clients.send(to, zmq::send_flags::sndmore);
      clients.send(body, zmq::send_flags::none);
    }
    if (items[0].revents & ZMQ_POLLIN) {
      (void)clients.recv(client_id);
      (void)clients.recv(body);
      zmq::message_t to(worker_id.data(), worker_id.size());
      workers.send(to, zmq::send_flags::sndmore);
      workers.send(body, zmq::send_flags::none);
    }
  }
  _exit(0);
}

// The worker of BareRoundTrip: sends every message back.
[[noreturn]] void RunEcho(const std::string& back, pid_t parent, FloorWait wait) {
  zmq::context_t context;
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 1000);
  dealer.connect(back);
  dealer.send(zmq::str_buffer("hello"));
  while (getppid() == parent)
    if (zmq::message_t m; FloorRecv(dealer, m, wait)) dealer.send(m, zmq::send_flags::none);
  _exit(0);
}

}  // namespace

double BareRoundTrip(int rounds, bool tcp, FloorWait wait) {
  const pid_t self = getpid();
  const std::string prefix = "ipc:///tmp/gt-bench-floor-" + std::to_string(self);
  const int port = 20000 + self % 20000;  // two ports; a clash fails the bind, and the run reports 0
  const std::string front = tcp ? "tcp://127.0.0.1:" + std::to_string(port) : prefix + "-front.sock";
  const std::string back = tcp ? "tcp://127.0.0.1:" + std::to_string(port + 1) : prefix + "-back.sock";
  const pid_t broker = fork();
  if (broker == 0) RunBroker(front, back, self, wait);
  const pid_t worker = broker < 0 ? -1 : fork();
  if (worker == 0) RunEcho(back, self, wait);
  double seconds = 0;
  if (worker > 0) {
    zmq::context_t context;
    zmq::socket_t dealer(context, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::rcvtimeo, 10000);
    dealer.connect(front);
    const std::string payload(100, 'x');
    auto round_trip = [&] {
      dealer.send(zmq::buffer(payload));
      zmq::message_t reply;
      return FloorRecv(dealer, reply, wait);
    };
    bool ok = true;
    for (int i = 0; ok && i < 500; ++i) ok = round_trip();
    const auto start = Clock::now();
    for (int i = 0; ok && i < rounds; ++i) ok = round_trip();
    if (ok) seconds = std::chrono::duration<double>(Clock::now() - start).count() / rounds;
  }
  for (pid_t child : {broker, worker}) {
    if (child <= 0) continue;
    kill(child, SIGTERM);
    waitpid(child, nullptr, 0);
  }
  if (!tcp)
    for (const std::string& endpoint : {front, back}) std::remove(endpoint.substr(6).c_str());  // past "ipc://"
  return seconds;
}

}  // namespace compile_bench
