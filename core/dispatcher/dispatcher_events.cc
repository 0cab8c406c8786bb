#include "dispatcher/dispatcher_events.h"

namespace gt {

void DispatcherEvents::Record(HostEventKind kind, const std::string& peer, std::string_view command,
                              std::string_view detail) const {
  HostEvent event{kind, peer};
  event.command = command;
  event.detail = detail;
  sinks_->Emit(event);
}

void DispatcherEvents::RecordReply(const std::string& route, const wire::Envelope& env, size_t bytes) const {
  if (env.kind() != wire::Envelope::DATA && env.kind() != wire::Envelope::SYNC_DONE &&
      env.kind() != wire::Envelope::ERROR)
    return;
  const ClientState* c = clients_.FindByRoute(route);
  if (c == nullptr) return;  // a worker, or a peer that never said hello
  HostEvent event{HostEventKind::kSend, {}};
  std::string detail;
  if (env.kind() == wire::Envelope::DATA) {
    event.command = "fetch";
    detail = "fetch #" + std::to_string(env.seq()) + " tensor=%" + std::to_string(env.tensor());
  } else if (env.kind() == wire::Envelope::SYNC_DONE) {
    event.command = "sync";
    detail = "sync_id=" + std::to_string(env.sync_id()) + " errors=" + std::to_string(env.errors_size());
  } else {
    event.command = "error";
    detail = "errors=" + std::to_string(env.errors_size());
  }
  const std::string peer = "client " + std::to_string(c->id);
  event.peer = peer;
  event.bytes = bytes;
  event.detail = detail;
  sinks_->Emit(event);
}

}  // namespace gt
