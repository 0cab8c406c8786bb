#include "dispatcher/peer_outbox.h"

#include <iterator>
#include <utility>

#include "ir/codec.h"
#include "net/transport.h"

namespace gt {

bool PeerOutbox::Send(const std::string& route, const wire::Envelope& env, const std::vector<BlobPtr>& frames) {
  if (auto held = held_.find(route); held != held_.end()) {  // after those held before it, in order
    held->second.push_back({env, frames});
    return true;
  }
  Result<size_t> sent = SendEnvelope(socket_, route, env, frames);
  if (sent.ok()) {
    CountSent(route, env, *sent);
    return true;
  }
  return sent.status().code() == Code::kResourceExhausted && QueueFull(route, env, frames);
}

void PeerOutbox::SendError(const std::string& route, const Status& status) {
  if (route.empty()) return;
  wire::Envelope reply;
  reply.set_kind(wire::Envelope::ERROR);
  wire::OpError* e = reply.add_errors();
  e->set_code(static_cast<uint32_t>(status.code()));
  e->set_message(WireText(status.message()));
  e->set_host(host_id_);
  Send(route, reply, {});
}

void PeerOutbox::Reject(const std::string& route, const Status& status) {
  metrics_.malformed_messages.Increment();
  SendError(route, Status(status.code(), "dispatcher " + host_id_ + " rejected a message: " + status.message()));
}

void PeerOutbox::SendHeld() {
  for (auto it = held_.begin(); it != held_.end();) {
    std::deque<HeldMessage>& queue = it->second;
    while (!queue.empty()) {
      Result<size_t> sent = SendEnvelope(socket_, it->first, queue.front().env, queue.front().frames);
      if (!sent.ok() && sent.status().code() == Code::kResourceExhausted) break;
      if (sent.ok()) CountSent(it->first, queue.front().env, *sent);  // else its worker is gone
      queue.pop_front();
    }
    it = queue.empty() ? held_.erase(it) : std::next(it);
  }
}

void PeerOutbox::CountSent(const std::string& route, const wire::Envelope& env, size_t bytes) {
  if (events_.enabled()) events_.RecordReply(route, env, bytes);
  metrics_.messages_sent.Increment();
  metrics_.bytes_sent.Increment(static_cast<double>(bytes));
}

// Returns whether the message will still go.
bool PeerOutbox::QueueFull(const std::string& route, const wire::Envelope& env, const std::vector<BlobPtr>& frames) {
  if (workers_.FindByRoute(route)) {
    held_[route].push_back({env, frames});
    return true;
  }
  if (ClientState* c = clients_.FindByRoute(route)) unread_.insert(c->id);
  return false;
}

}  // namespace gt
