#include "dispatcher/worker_registry.h"

#include "ir/codec.h"

namespace gt {

size_t WorkerRegistry::Register(const std::string& route, const std::string& name,
                                const std::string& metrics_endpoint, const std::string& peer_ip, int fd,
                                uint64_t token, const std::string& key, std::optional<size_t> at, bool claimed) {
  size_t index = workers_.size();
  for (size_t i = 0; i < workers_.size() && !name.empty() && !at; ++i)
    if (!workers_[i].alive && workers_[i].name == name) index = i;  // a replacement
  if (at) {
    index = *at;
    while (workers_.size() < index) {  // slots of workers still to rejoin
      WorkerState waiting;
      waiting.alive = false;
      waiting.name = "(worker #" + std::to_string(workers_.size()) + ", not back yet)";
      workers_.push_back(std::move(waiting));
    }
  }
  WorkerState w;
  w.route = route;
  w.name = name.empty() ? "worker-" + std::to_string(index) : name;
  w.metrics_endpoint = metrics_endpoint;
  w.peer_ip = peer_ip;
  w.fd = fd;
  w.token = token;
  w.key = key;
  w.claimed_index = at.has_value() && claimed;
  w.last_seen = Clock::now();
  if (index == workers_.size()) workers_.push_back(std::move(w));
  else workers_[index] = std::move(w);
  by_route_[route] = index;
  Publish();
  return index;
}

std::optional<size_t> WorkerRegistry::FindLiveByName(const std::string& name) const {
  for (size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i].alive && workers_[i].name == name) return i;
  return std::nullopt;
}

std::optional<size_t> WorkerRegistry::FindByFd(int fd) const {
  if (fd < 0) return std::nullopt;
  for (size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i].alive && workers_[i].fd == fd) return i;
  return std::nullopt;
}

std::optional<size_t> WorkerRegistry::FindByControlFd(int fd) const {
  if (fd < 0) return std::nullopt;
  for (size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i].alive && workers_[i].control_fd == fd) return i;
  return std::nullopt;
}

std::optional<size_t> WorkerRegistry::FindByToken(uint64_t token) const {
  if (token == 0) return std::nullopt;
  for (size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i].token == token) return i;
  return std::nullopt;
}

void WorkerRegistry::AttachControl(size_t w, const std::string& route, int fd) {
  DetachControl(w);
  workers_[w].control_route = route;
  workers_[w].control_fd = fd;
  by_route_[route] = w;
}

void WorkerRegistry::DetachControl(size_t w) {
  WorkerState& worker = workers_[w];
  if (!worker.control_route.empty()) by_route_.erase(worker.control_route);
  worker.control_route.clear();
  worker.control_fd = -1;
}

std::optional<size_t> WorkerRegistry::FindByRoute(const std::string& route) const {
  auto it = by_route_.find(route);
  if (it == by_route_.end()) return std::nullopt;
  return it->second;
}

bool WorkerRegistry::MarkLost(size_t w) {
  WorkerState& worker = workers_[w];
  if (!worker.alive) return false;
  worker.alive = false;
  by_route_.erase(worker.route);
  DetachControl(w);
  Publish();
  return true;
}

size_t WorkerRegistry::LiveCount() const {
  size_t n = 0;
  for (const WorkerState& w : workers_) n += w.alive ? 1 : 0;
  return n;
}

std::vector<int64_t> WorkerRegistry::LiveIndexes() const {
  std::vector<int64_t> live;
  for (size_t w = 0; w < workers_.size(); ++w)
    if (workers_[w].alive) live.push_back(static_cast<int64_t>(w));
  return live;
}

std::vector<size_t> WorkerRegistry::Silent(Clock::time_point now, Clock::duration timeout) const {
  std::vector<size_t> silent;
  for (size_t w = 0; w < workers_.size(); ++w)
    if (workers_[w].alive && now - workers_[w].last_seen > timeout) silent.push_back(w);
  return silent;
}

uint64_t WorkerRegistry::LoadScore(size_t w) const {
  const WorkerState& worker = workers_[w];
  return worker.queued + worker.placed_since_report + worker.resident_bytes / kBytesPerQueuedUnit;
}

std::optional<size_t> WorkerRegistry::NextPlacement() {
  std::optional<size_t> best;
  for (size_t k = 0; k < workers_.size(); ++k) {
    const size_t w = (next_placement_ + k) % workers_.size();
    if (workers_[w].alive && (!best || LoadScore(w) < LoadScore(*best))) best = w;
  }
  if (!best) return std::nullopt;
  next_placement_ = *best + 1;
  ++workers_[*best].placed_since_report;
  return best;
}

void WorkerRegistry::ReportLoad(size_t w, uint64_t queued, uint64_t resident_bytes) {
  WorkerState& worker = workers_[w];
  worker.queued = queued;
  worker.resident_bytes = resident_bytes;
  worker.placed_since_report = 0;
}

void WorkerRegistry::Enqueue(size_t w, const Instruction& inst) {
  WorkerState& worker = workers_[w];
  if (worker.outgoing.instructions_size() == 0) worker.outgoing.set_kind(wire::Envelope::BATCH);
  if (inst.client != worker.last_told && inst.client != 0 && share_source_) {
    if (worker.told.insert(inst.client).second) {
      AddShare(share_source_(inst.client), worker.outgoing);
      if (session_source_)
        if (std::optional<wire::ClientSession> session = session_source_(inst.client))
          *worker.outgoing.add_sessions() = std::move(*session);
    }
    worker.last_told = inst.client;
  }
  if (inst.op == Op::kDropClient) {
    worker.told.erase(inst.client);
    worker.last_told = 0;
  }
  EncodeInstruction(inst, worker.outgoing.add_instructions(), &worker.payloads);
  dirty_.insert(w);
}

void WorkerRegistry::AddTag(PieceTag&& tag) {
  if (tag.worker < 0 || static_cast<size_t>(tag.worker) >= workers_.size()) return;
  const size_t w = static_cast<size_t>(tag.worker);
  WorkerState& worker = workers_[w];
  if (!worker.alive) return;
  if (worker.outgoing.instructions_size() == 0) worker.outgoing.set_kind(wire::Envelope::BATCH);
  wire::PieceTag* out = worker.outgoing.add_tags();
  out->set_client(tag.client);
  out->set_id(tag.id);
  out->set_logical(tag.logical);
  out->set_pieces(tag.pieces);
  out->set_placement(std::move(tag.placement));
  dirty_.insert(w);
}

std::vector<size_t> WorkerRegistry::Flush(const std::function<bool(const WorkerState&)>& send) {
  std::vector<size_t> unreachable;
  for (size_t w : dirty_) {
    WorkerState& worker = workers_[w];
    if (worker.alive && !send(worker)) unreachable.push_back(w);
    worker.outgoing.Clear();
    worker.payloads.clear();
  }
  dirty_.clear();
  return unreachable;
}

std::vector<WorkerEndpoint> WorkerRegistry::LiveEndpoints() const {
  std::lock_guard<std::mutex> lock(endpoints_mutex_);
  return endpoints_;
}

void WorkerRegistry::Publish() {
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

}  // namespace gt
