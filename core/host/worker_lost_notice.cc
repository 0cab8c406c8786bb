#include "host/worker_lost_notice.h"

#include "gt/status.h"

namespace gt {

wire::Envelope MakeLostNotice(const std::string& dispatcher_id, const std::string& worker_name, uint64_t token) {
  wire::Envelope notice;
  notice.set_kind(wire::Envelope::ERROR);
  notice.set_token(token);
  wire::OpError* error = notice.add_errors();
  error->set_code(static_cast<uint32_t>(Code::kUnavailable));
  error->set_message("dispatcher " + dispatcher_id + " lost worker " + worker_name +
                     ": start it again, empty (it missed its heartbeats or a connection broke; what it held is gone)");
  error->set_host(dispatcher_id);
  return notice;
}

bool IsLostNotice(const wire::Envelope& env, uint64_t token) {
  return token != 0 && env.kind() == wire::Envelope::ERROR && env.token() == token;
}

std::string LostNoticeMessage(const wire::Envelope& env) {
  return env.errors_size() ? env.errors(0).message() : std::string();
}

}  // namespace gt
