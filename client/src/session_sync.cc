// The session's sync points and what answers them: fetches, syncs, stats
// requests, and the replies (data, errors, SYNC_DONE) read from the
// dispatcher while waiting. The stream they wait on is session_issue.cc's.
#include "session.h"

#include <algorithm>
#include <chrono>

#include "gt/log.h"
#include "gt/op_attrs.h"
#include "ir/codec.h"
#include "net/transport.h"

namespace gt::client_internal {
namespace {

Error RemoteError(const std::vector<wire::OpError>& errors) {
  // A host's own error (seq 0, e.g. a lost worker) is the cause of the op
  // errors beside it: raise that one.
  auto host_error = std::find_if(errors.begin(), errors.end(), [](const wire::OpError& e) { return e.seq() == 0; });
  const wire::OpError& first = host_error != errors.end() ? *host_error : errors.front();
  std::string op = first.op() < static_cast<uint32_t>(Op::kCount) ? std::string(OpName(static_cast<Op>(first.op())))
                                                                   : "op " + std::to_string(first.op());
  Status status = OpErrorToStatus(first);
  // Sequence numbers start at 1: seq 0 is an error of the host itself (a lost
  // worker), which no one instruction caused.
  std::string message = first.seq() == 0 ? "gt: " + first.host() + ": " + status.ToString()
                                          : "gt: " + op + " #" + std::to_string(first.seq()) + " failed on " +
                                                first.host() + ": " + status.ToString();
  if (errors.size() > 1) message += " (and " + std::to_string(errors.size() - 1) + " more failed ops)";
  return Error(status.code(), message);
}

}  // namespace

void Session::Fetch(const TensorRecord& tensor, const std::function<void(FetchedData&)>& read) {
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  Instruction fetch = MakeFetch(0, next_seq_++, tensor.id);
  const uint64_t fetch_seq = fetch.seq;
  // Whatever the client's stages hold goes before the fetch and its sync,
  // whatever the stages do with them.
  if (pipeline_) pipeline_->Drain();
  QueueLocked(std::move(fetch));
  FetchedData data;
  SyncLocked(fetch_seq, &data);
  read(data);
}

void Session::Sync() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_) return;
  EnsureStartedLocked();
  SyncLocked(0, nullptr);
}

void Session::SyncLocked(uint64_t fetch_seq, FetchedData* data, bool keep_errors) {
  // Its dispatcher is gone: nothing queued will ever be answered.
  if (!broken_.ok()) throw Error(broken_.code(), "gt: " + broken_.message());
  unsynced_ = 0;
  sent_early_ = false;
  const uint64_t sync_id = next_sync_++;
  Instruction sync = MakeSync(0, next_seq_++, sync_id);
  const uint64_t sync_seq = sync.seq;
  if (pipeline_) pipeline_->Drain();
  QueueLocked(std::move(sync));
  FlushLocked();
  const auto waited_from = std::chrono::steady_clock::now();
  bool have_data = false;
  std::vector<wire::OpError> errors;
  errors.swap(stray_errors_);
  if (pipeline_)
    for (wire::OpError& e : pipeline_->TakeErrors()) errors.push_back(std::move(e));
  for (;;) {
    Result<WireMessage> msg = DecodeFrames(ReceiveLocked(), false);
    if (!msg.ok()) throw Error(Code::kInternal, "gt: undecodable reply from the dispatcher: " + msg.status().message());
    const wire::Envelope& env = msg->envelope;
    if (env.kind() == wire::Envelope::ERROR) {
      // The dispatcher refused a whole message (this sync's, or one before
      // it): no SYNC_DONE may come, so the sync fails with the reason.
      errors.insert(errors.end(), env.errors().begin(), env.errors().end());
      if (resume_) resume_->Answered(sync_seq, sync_id);  // the refused message will not be sent again
      break;
    } else if (env.kind() == wire::Envelope::DATA && data && env.seq() == fetch_seq && msg->frames.size() == 1) {
      data->dtype = static_cast<DType>(std::min<uint32_t>(env.dtype(), static_cast<uint32_t>(DType::kCount) - 1));
      data->shape.assign(env.shape().begin(), env.shape().end());
      data->bytes = msg->frames[0];
      data->shares_worker_memory = inproc_;
      have_data = true;
    } else if (env.kind() == wire::Envelope::SYNC_DONE && env.sync_id() == sync_id) {
      errors.insert(errors.end(), env.errors().begin(), env.errors().end());
      if (resume_) resume_->Answered(sync_seq, sync_id);
      break;
    }
  }
  GT_LOG(kClient, "sync " << sync_id << (data ? " (fetch #" + std::to_string(fetch_seq) + ")" : std::string())
                          << " waited "
                          << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - waited_from).count()
                          << " ms, " << errors.size() << " errors");
  for (const wire::OpError& e : errors) {
    GT_LOG(kClient, "error from " << e.host() << ": op #" << e.seq() << ": " << e.message());
    if (resume_ && e.seq() != 0) resume_->Failed(e.seq());
  }
  if (!errors.empty() && keep_errors) {
    stray_errors_ = std::move(errors);
    return;
  }
  if (!errors.empty()) throw RemoteError(errors);
  if (data && !have_data) throw Error(Code::kInternal, "gt: fetch #" + std::to_string(fetch_seq) + " got no data");
}

std::vector<zmq::message_t> Session::ReceiveLocked() {
  for (;;) {
    // The message that is there already costs no poll.
    auto frames = ReceiveFrames(*socket_, watch_ ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
    if (frames && !resume_) return std::move(*frames);
    if (!watch_) throw Error(Code::kUnavailable, "gt: connection closed while waiting for the dispatcher");
    if (!frames) {
      zmq::pollitem_t items[] = {{socket_->handle(), 0, ZMQ_POLLIN, 0}, watch_->PollItem()};
      PollWithBusyWait(items, 2, watch_->PollTimeout(ConnectionWatch::Clock::now()), busy_wait_);
    }
    // A resumable session reads the watch before a message, too: once its
    // connection closed, the socket may have reconnected on its own to a
    // new dispatcher, whose answers (no session here) are not the session's.
    watch_->Drain();
    if (Status s = watch_->Check(ConnectionWatch::Clock::now()); !s.ok()) {
      ConnectionLostLocked(s);
      continue;  // resumed: the kept batches went out again, their answers come
    }
    if (frames) return std::move(*frames);
  }
}

void Session::ConnectionLostLocked(const Status& s) {
  if (!resume_ || !watch_ || !watch_->Lost()) {
    broken_ = s;
    throw Error(s.code(), "gt: " + s.message());
  }
  RecoverLocked(s);
}

wire::Envelope Session::Stats(uint32_t timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  EnsureStartedLocked();
  SyncLocked(0, nullptr);  // the figures then include every op issued before
  wire::Envelope request;
  request.set_kind(wire::Envelope::STATS);
  request.set_request_id(next_stats_++);
  request.set_timeout_ms(timeout_ms);
  Result<size_t> sent = SendEnvelope(*socket_, "", request, {});
  if (!sent.ok()) throw Error(sent.status().code(), "gt: cannot reach the dispatcher: " + sent.status().message());
  // The dispatcher answers by its deadline; the grace covers a busy one.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms) + std::chrono::seconds(5);
  wire::Envelope reply = AwaitStatsReplyLocked(request.request_id(), deadline);
  if (pipeline_) *reply.add_snapshots() = pipeline_->Snapshot();  // the client's own stages, after the hosts
  return reply;
}

wire::Envelope Session::AwaitStatsReplyLocked(uint64_t request_id, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    zmq::pollitem_t item{socket_->handle(), 0, ZMQ_POLLIN, 0};
    if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0)
      throw Error(Code::kUnavailable, "gt: the dispatcher did not answer a stats request");
    auto frames = ReceiveFrames(*socket_, zmq::recv_flags::dontwait);
    if (!frames) continue;
    Result<WireMessage> msg = DecodeFrames(std::move(*frames), false);
    if (!msg.ok()) throw Error(Code::kInternal, "gt: undecodable reply from the dispatcher: " + msg.status().message());
    wire::Envelope& env = msg->envelope;
    if (env.kind() == wire::Envelope::ERROR) {  // reported at the next sync point, as elsewhere
      stray_errors_.insert(stray_errors_.end(), env.errors().begin(), env.errors().end());
    } else if (env.kind() == wire::Envelope::STATS_REPLY && env.request_id() == request_id) {
      return std::move(env);
    }
  }
}

}  // namespace gt::client_internal
