#include "worker/worker_rejoin.h"

#include <algorithm>
#include <unordered_set>

#include <zmq.h>

#include "gt/op_attrs.h"

namespace gt {

void RejoinBook::NoteBatch(const wire::Envelope& batch) {
  for (const wire::ClientSession& s : batch.sessions()) sessions_[s.client()].session = s;
  if (batch.tags_size() > 0) NoteTags(batch);
  // Instructions of one client come in runs: look the session up once a run.
  Session* current = nullptr;
  ClientId current_client = 0;
  for (const wire::Instruction& inst : batch.instructions()) {
    if (inst.client() != current_client || !current) {
      current_client = inst.client();
      auto it = sessions_.find(current_client);
      current = it == sessions_.end() ? nullptr : &it->second;
    }
    if (!current) continue;
    current->received_seq = std::max(current->received_seq, inst.seq());
    if (inst.op() == static_cast<uint32_t>(Op::kDropClient)) {
      sessions_.erase(current_client);
      current = nullptr;
    }
  }
}

void RejoinBook::NoteTags(const wire::Envelope& batch) {
  for (const wire::PieceTag& tag : batch.tags()) {
    auto it = sessions_.find(tag.client());
    if (it == sessions_.end()) continue;  // a session never told: nobody could resume it
    if (tag.placement().empty()) it->second.tags.erase(tag.id());
    else it->second.tags[tag.id()] = tag;
  }
}

void RejoinBook::NoteAck(const wire::Envelope& ack) {
  auto it = sessions_.find(ack.client());
  if (it == sessions_.end()) return;
  it->second.acked_sync = ack.sync_id();
  it->second.errors.assign(ack.errors().begin(), ack.errors().end());
}

void RejoinBook::FillInventory(const std::vector<HeldTensor>& held, wire::Envelope& reg,
                               const std::unordered_set<ClientId>* only,
                               const std::unordered_set<ClientId>& running) const {
  reg.set_rejoining(true);
  std::unordered_map<ClientId, wire::SessionInventory*> by_client;
  for (const auto& [client, s] : sessions_) {
    if (only && !only->count(client)) continue;
    wire::SessionInventory* inv = reg.add_inventory();
    inv->set_running(running.count(client) != 0);
    *inv->mutable_session() = s.session;
    inv->set_received_seq(s.received_seq);
    inv->set_acked_sync(s.acked_sync);
    for (const wire::OpError& e : s.errors) *inv->add_errors() = e;
    by_client[client] = inv;
  }
  for (const HeldTensor& t : held) {
    auto it = by_client.find(t.client);
    if (it == by_client.end()) continue;
    wire::HeldTensor* out = it->second->add_tensors();
    out->set_id(t.id);
    out->set_dtype(static_cast<uint32_t>(t.dtype));
    for (int64_t d : t.shape) out->add_shape(d);
    const Session& session = sessions_.at(t.client);
    if (auto tag = session.tags.find(t.id); tag != session.tags.end()) {
      out->set_placement(tag->second.placement());
      out->set_logical(tag->second.logical());
      out->set_pieces(tag->second.pieces());
    }
  }
}

std::vector<ClientId> RejoinBook::Orphans(const std::vector<HeldTensor>& held) const {
  std::unordered_set<ClientId> orphans;
  for (const HeldTensor& t : held)
    if (!sessions_.count(t.client)) orphans.insert(t.client);
  return {orphans.begin(), orphans.end()};
}

std::vector<ClientId> RejoinBook::Sessions() const {
  std::vector<ClientId> clients;
  for (const auto& [client, s] : sessions_) clients.push_back(client);
  return clients;
}

wire::Envelope Rejoiner::Registration(uint32_t index) const {
  wire::Envelope reg;
  reg.set_kind(wire::Envelope::REGISTER);
  reg.set_worker_index(index);
  return reg;
}

void Rejoiner::Register(uint32_t index) {
  const std::vector<HeldTensor> held = hooks_.held();
  for (ClientId orphan : book_.Orphans(held)) hooks_.push(MakeDropClient(orphan));
  running_.clear();
  for (ClientId client : book_.Sessions())
    if (hooks_.waiting(client) > 0) running_.insert(client);
  wire::Envelope reg = Registration(index);
  book_.FillInventory(held, reg, nullptr, running_);
  hooks_.send(reg);
}

void Rejoiner::Complete(uint32_t index) {
  std::unordered_set<ClientId> done;
  for (ClientId client : running_)
    if (!book_.Knows(client) || hooks_.waiting(client) == 0) done.insert(client);
  if (done.empty()) return;
  for (ClientId client : done) running_.erase(client);
  wire::Envelope reg = Registration(index);
  book_.FillInventory(hooks_.held(), reg, &done);
  if (reg.inventory_size() > 0) hooks_.send(reg);  // none: the dispatcher dropped them meanwhile
}

void DispatcherLink::Observe(uint16_t event, Clock::time_point now) {
  if (event == ZMQ_EVENT_DISCONNECTED && connected_) {
    connected_ = false;
    if (!lost_since_) lost_since_ = now;
  } else if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
    connected_ = true;
    register_due_ = lost_since_.has_value();
  }
}

DispatcherLink::Actions DispatcherLink::Tick(Clock::time_point now, bool welcomed) {
  Actions actions;
  if (welcomed) {
    lost_since_.reset();
    register_due_ = grace_handled_ = false;
    return actions;
  }
  if (!lost_since_) return actions;
  if (!grace_handled_ && now - *lost_since_ > grace_) actions.grace_over = grace_handled_ = true;
  if (connected_ && now - asked_ > std::chrono::milliseconds(2 * kReconnectMaxMs)) register_due_ = true;
  if (register_due_) {
    actions.register_again = true;
    register_due_ = false;
    asked_ = now;
  }
  return actions;
}

}  // namespace gt
