#include "dispatcher/stats_fanout.h"

#include <algorithm>
#include <iterator>

namespace gt {

void StatsFanout::Begin(const std::string& client_route, const wire::Envelope& request) {
  const uint64_t id = next_id_++;
  Pending& p = pending_[id];
  p.client_route = client_route;
  const uint32_t timeout = request.timeout_ms() == 0 ? kDefaultTimeoutMs : std::min(request.timeout_ms(), kMaxTimeoutMs);
  p.deadline = Clock::now() + std::chrono::milliseconds(timeout);
  p.reply.set_kind(wire::Envelope::STATS_REPLY);
  p.reply.set_request_id(request.request_id());
  *p.reply.add_snapshots() = own_();
  wire::Envelope ask;
  ask.set_kind(wire::Envelope::STATS);
  ask.set_request_id(id);
  for (size_t w = 0; w < workers_.size(); ++w) {
    if (!workers_.IsAlive(w)) continue;
    if (sender_.Send(workers_.at(w).ControlRoute(), ask, {})) p.waiting.insert(w);
    else p.reply.add_missing(workers_.at(w).name);
  }
  if (p.waiting.empty()) Answer(pending_.find(id));
}

void StatsFanout::OnReply(size_t w, const wire::Envelope& reply) {
  auto it = pending_.find(reply.request_id());
  if (it == pending_.end() || !it->second.waiting.erase(w)) return;  // late (after the deadline) or unasked
  if (reply.snapshots_size() == 1) it->second.answers[w] = reply.snapshots(0);
  else it->second.reply.add_missing(workers_.at(w).name);  // a malformed answer is no answer
  if (it->second.waiting.empty()) Answer(it);
}

void StatsFanout::OnWorkerLost(size_t w) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.waiting.erase(w)) it->second.reply.add_missing(workers_.at(w).name);
    it = it->second.waiting.empty() ? Answer(it) : std::next(it);
  }
}

void StatsFanout::Expire(Clock::time_point now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now < it->second.deadline) {
      ++it;
      continue;
    }
    for (size_t w : it->second.waiting) it->second.reply.add_missing(workers_.at(w).name);
    it = Answer(it);
  }
}

// Sends the reply (a client that left meanwhile is not there to get it).
StatsFanout::Iterator StatsFanout::Answer(Iterator it) {
  for (auto& [w, snapshot] : it->second.answers) *it->second.reply.add_snapshots() = std::move(snapshot);
  (void)sender_.Send(it->second.client_route, it->second.reply, {});
  return pending_.erase(it);
}

}  // namespace gt
