#include "worker/client_meter.h"

namespace gt {
namespace {

std::string SessionLabel(ClientId client) { return "session-" + std::to_string(client); }

}  // namespace

ClientMeter::ClientMeter(prometheus::Registry& registry, const std::string& instance)
    : host_labels_{{"host", "worker"}, {"instance", instance}},
      seconds_(prometheus::BuildCounter()
                   .Name("gt_worker_client_compute_seconds_total")
                   .Help("Execution time of a client's instructions on this worker")
                   .Register(registry)),
      instructions_(prometheus::BuildCounter()
                        .Name("gt_worker_client_instructions_total")
                        .Help("Instructions of a client run on this worker")
                        .Register(registry)),
      bytes_(prometheus::BuildCounter()
                 .Name("gt_worker_client_bytes_moved_total")
                 .Help("Tensor bytes a client moved in (from_bytes payloads) and out (fetches) of this worker")
                 .Register(registry)),
      queued_(prometheus::BuildGauge()
                  .Name("gt_worker_client_queued_instructions")
                  .Help("Instructions waiting in a client's lane of this worker's fair queue")
                  .Register(registry)),
      weight_(prometheus::BuildGauge()
                  .Name("gt_worker_client_weight")
                  .Help("A client's fair-share weight (the dispatcher manifest's clients[].weight)")
                  .Register(registry)),
      held_(prometheus::BuildGauge()
                .Name("gt_worker_client_bytes_held")
                .Help("Memory this worker's backend holds for a client: its tensors, kept freed storage, units")
                .Register(registry)),
      total_queued_(prometheus::BuildGauge()
                        .Name("gt_worker_queued_instructions")
                        .Help("Instructions waiting in this worker's fair queue, all clients")
                        .Register(registry)
                        .Add(host_labels_)),
      active_clients_(prometheus::BuildGauge()
                          .Name("gt_worker_active_clients")
                          .Help("Clients with instructions waiting on this worker")
                          .Register(registry)
                          .Add(host_labels_)) {}

ClientMeter::Series& ClientMeter::Label(const std::string& wanted, bool keyed) {
  auto found = labels_.find(wanted);
  if (found != labels_.end()) return found->second;
  const std::string label = labels_.size() < kMaxLabels ? wanted : std::string(kOverflowLabel);
  auto [it, made] = labels_.try_emplace(label);
  Series& s = it->second;
  if (made) {
    prometheus::Labels l = host_labels_;
    l["client"] = label;
    s.seconds = &seconds_.Add(l);
    s.instructions = &instructions_.Add(l);
    s.bytes = &bytes_.Add(l);
    s.queued = &queued_.Add(l);
    s.weight = &weight_.Add(l);
    s.held = &held_.Add(l);
    s.keyed = keyed || label == kOverflowLabel;
  }
  return s;
}

void ClientMeter::Name(ClientId client, const std::string& label, double weight) {
  if (clients_.count(client)) return;
  const std::string name = label.empty() ? SessionLabel(client) : label;
  Series& s = Label(name, name != SessionLabel(client));
  ++s.sessions;
  s.weight->Set(weight);
  clients_[client] = Client{name, &s, 0};
}

ClientMeter::Client& ClientMeter::ClientOf(ClientId client) {
  if (last_ && last_client_ == client) return *last_;
  auto it = clients_.find(client);
  if (it == clients_.end()) {
    Name(client, client == 0 ? "dispatcher" : SessionLabel(client), 1.0);  // 0: the dispatcher's own
    it = clients_.find(client);
  }
  last_client_ = client;
  last_ = &it->second;
  return *last_;
}

ClientMeter::Series& ClientMeter::SeriesOf(ClientId client) { return *ClientOf(client).series; }

void ClientMeter::AddTurn(ClientId client, double seconds, uint64_t instructions) {
  Series& s = SeriesOf(client);
  s.seconds->Increment(seconds);
  s.instructions->Increment(static_cast<double>(instructions));
}

void ClientMeter::AddBytesMoved(ClientId client, uint64_t bytes) { SeriesOf(client).bytes->Increment(static_cast<double>(bytes)); }

void ClientMeter::SetBytesHeld(ClientId client, uint64_t bytes) {
  Client& c = ClientOf(client);
  if (c.bytes_held == bytes) return;
  c.series->held->Increment(static_cast<double>(bytes) - static_cast<double>(c.bytes_held));
  c.bytes_held = bytes;
}

void ClientMeter::SetQueued(ClientId client, size_t instructions) {
  SeriesOf(client).queued->Set(static_cast<double>(instructions));
}

void ClientMeter::SetTotals(size_t queued, size_t active_clients) {
  total_queued_.Set(static_cast<double>(queued));
  active_clients_.Set(static_cast<double>(active_clients));
}

void ClientMeter::Remove(const std::string& label, Series& s) {
  seconds_.Remove(s.seconds);
  instructions_.Remove(s.instructions);
  bytes_.Remove(s.bytes);
  queued_.Remove(s.queued);
  weight_.Remove(s.weight);
  held_.Remove(s.held);
  labels_.erase(label);
}

void ClientMeter::Forget(ClientId client) {
  auto it = clients_.find(client);
  if (it == clients_.end()) return;
  Series* s = it->second.series;
  s->queued->Set(0);
  s->held->Decrement(static_cast<double>(it->second.bytes_held));
  clients_.erase(it);
  last_ = nullptr;
  if (--s->sessions > 0 || s->keyed) return;
  for (auto& [label, series] : labels_)
    if (&series == s) return Remove(std::string(label), series);
}

}  // namespace gt
