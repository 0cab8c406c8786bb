// Taking a session to a restarted dispatcher (README "When the dispatcher
// restarts"): once the connection to its dispatcher closed, a client of a
// separate dispatcher connects again to the same address, with back-off,
// for up to GT_RECONNECT_GRACE; presents its session (a RESUME: its token,
// last answered sync, live tensors, configs and units, resume_log.h); and
// once the dispatcher took it back, sends again every batch since its last
// answered sync, in order. Workers drop what already ran, so each
// instruction runs once; the sync or fetch the program waits on gets its
// answer from the new dispatcher.
#include <chrono>
#include <cstdio>

#include "gt/log.h"
#include "ir/codec.h"
#include "net/transport.h"
#include "session.h"

namespace gt::client_internal {
namespace {

using Clock = std::chrono::steady_clock;

std::string InSeconds(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g s", std::chrono::duration<double>(d).count());
  return text;
}

// The dispatcher's reason for refusing the session, in words.
std::string Refusal(const wire::Envelope& env) {
  std::string why;
  for (const wire::OpError& e : env.errors()) why += (why.empty() ? "" : "; ") + e.message();
  return why.empty() ? "no reason given" : why;
}

// How long a poll may wait: until `deadline`, or the watch's own timeout.
std::chrono::milliseconds PollFor(Clock::time_point deadline, std::chrono::milliseconds watch) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()) +
              std::chrono::milliseconds(1);
  if (left.count() < 0) left = std::chrono::milliseconds(0);
  return watch.count() < 0 ? left : std::min(left, watch);
}

}  // namespace

void Session::RecoverLocked(const Status& lost) {
  const std::string what = lost.message();  // "lost the dispatcher at X: its connection closed"
  auto fail = [&](const std::string& why) {
    broken_ = Unavailable(what + "; " + why);
    throw Error(broken_.code(), "gt: " + broken_.message());
  };
  if (!resume_->NotResumable().empty()) fail("the session cannot be resumed: " + resume_->NotResumable());
  const Clock::time_point lost_at = Clock::now();
  const Clock::time_point deadline = lost_at + reconnect_grace_;
  log::Warn("client", what + "; resuming the session at " + address_ + " (" + std::to_string(resume_->LiveTensors()) +
                          " live tensors, " + std::to_string(resume_->Kept().size()) + " batches to send again)");
  for (int attempt = 1;; ++attempt) {
    // Nothing the old socket still holds may reach the new dispatcher.
    watch_.reset();
    socket_->set(zmq::sockopt::linger, 0);
    socket_.reset();
    if (Clock::now() >= deadline)
      fail("no dispatcher took the session back within GT_RECONNECT_GRACE (" + InSeconds(reconnect_grace_) +
           "): its tensors and every instruction since its last sync are lost");
    if (ResumeOnceLocked(deadline)) {
      log::Warn("client", "resumed the session at " + address_ + " after " + InSeconds(Clock::now() - lost_at) +
                              " (try " + std::to_string(attempt) + ")");
      return;
    }
  }
}

bool Session::ResumeOnceLocked(Clock::time_point deadline) {
  const std::string endpoint = RemoteEndpointLocked();
  socket_ = NewSocketLocked();
  // libzmq's own back-off while nothing listens at the address yet.
  socket_->set(zmq::sockopt::reconnect_ivl, 50);
  socket_->set(zmq::sockopt::reconnect_ivl_max, 1000);
  // Rounded up and a millisecond more: the grace, not the watch's connect
  // timeout, must end first, so that the error names the grace.
  const auto left = std::max(std::chrono::milliseconds(1),
                             std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()) +
                                 std::chrono::milliseconds(1));
  Result<std::unique_ptr<ConnectionWatch>> watch = WatchLocked(endpoint, left);
  if (!watch.ok()) {
    broken_ = watch.status();
    throw Error(broken_.code(), "gt: cannot resume the session: " + broken_.message());
  }
  watch_ = std::move(*watch);
  socket_->connect(endpoint);
  std::vector<BlobPtr> frames;
  const wire::Envelope resume = resume_->MakeResume(token_, &frames);
  // Queued until the connection is made (the socket is not `immediate`).
  if (!SendEnvelope(*socket_, "", resume, frames).ok()) return false;
  for (;;) {
    auto reply = ReceiveFrames(*socket_, zmq::recv_flags::dontwait);
    if (!reply) {
      zmq::pollitem_t items[] = {{socket_->handle(), 0, ZMQ_POLLIN, 0}, watch_->PollItem()};
      zmq::poll(items, 2, PollFor(deadline, watch_->PollTimeout(Clock::now())));
      watch_->Drain();
      if (watch_->Lost() || Clock::now() >= deadline) return false;  // gone again, or the grace is over
      if (Status s = watch_->Check(Clock::now()); !s.ok()) {         // refused keys: no dispatcher will take it
        broken_ = s;
        throw Error(s.code(), "gt: cannot resume the session: " + s.message());
      }
      continue;
    }
    Result<WireMessage> msg = DecodeFrames(std::move(*reply), false);
    if (!msg.ok()) continue;
    const wire::Envelope& env = msg->envelope;
    if (env.kind() == wire::Envelope::ERROR) {
      // Its words name the dispatcher and what was lost (tensors on no worker, an unknown session ...).
      broken_ = Unavailable("lost the dispatcher at " + address_ + "; " + Refusal(env));
      throw Error(broken_.code(), "gt: " + broken_.message());
    }
    if (env.kind() == wire::Envelope::RESUMED) break;
    GT_LOG(kClient, "before the session was resumed: ignored a " << wire::Envelope::Kind_Name(env.kind()));
  }
  for (const KeptBatch& batch : resume_->Kept())
    if (!SendEnvelope(*socket_, "", batch.envelope, batch.frames).ok()) return false;
  return true;
}

}  // namespace gt::client_internal
