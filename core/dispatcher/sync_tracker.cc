#include "dispatcher/sync_tracker.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "gt/op_attrs.h"

namespace gt {
namespace {

// How many of the client's instructions Admission let in before its sync
// `seq`; a sync it did not see (none of the client's) answers no more than
// is answered already.
uint64_t AdmittedBefore(ClientState& c, uint64_t seq) {
  auto& marks = c.admitted_before_sync;
  const auto mark = std::find_if(marks.begin(), marks.end(), [&](const auto& m) { return m.first == seq; });
  if (mark == marks.end()) return c.answered;
  const uint64_t admitted = mark->second;
  marks.erase(marks.begin(), mark + 1);
  return admitted;
}

}  // namespace

void SyncTracker::Begin(ClientState& c, const Instruction& sync) {
  PendingSync pending;
  pending.sync_id = SyncId(sync);
  pending.admitted_before = AdmittedBefore(c, sync.seq);
  for (size_t w : c.touched) {
    if (!workers_.IsAlive(w)) continue;
    pending.waiting.insert(w);
    workers_.Enqueue(w, sync);
  }
  c.touched.clear();
  c.syncs.push_back(std::move(pending));
  active_ = true;
  CompleteReady(c);
}

void SyncTracker::OnAck(ClientState& c, size_t w, const wire::Envelope& ack) {
  for (PendingSync& s : c.syncs) {
    if (s.sync_id != ack.sync_id() || !s.waiting.erase(w)) continue;
    s.errors.insert(s.errors.end(), ack.errors().begin(), ack.errors().end());
    break;
  }
  CompleteReady(c);
}

void SyncTracker::OnWorkerLost(ClientState& c, size_t w, const std::string& message, bool report_anyway) {
  auto error = [&](const std::string& text) {
    wire::OpError e;
    e.set_client(c.id);
    e.set_code(static_cast<uint32_t>(Code::kUnavailable));
    e.set_message(text);
    e.set_host(host_id_);
    return e;
  };
  bool reported = false;
  for (PendingSync& s : c.syncs) {
    if (!s.waiting.erase(w)) continue;
    s.errors.push_back(error(reported ? "worker " + workers_.at(w).name + " was lost before it answered" : message));
    reported = true;
  }
  if (!reported && report_anyway) c.errors.push_back(error(message));
  CompleteReady(c);
}

void SyncTracker::CompleteReady(ClientState& c) {
  while (!c.syncs.empty() && c.syncs.front().waiting.empty()) {
    PendingSync& s = c.syncs.front();
    wire::Envelope done;
    done.set_kind(wire::Envelope::SYNC_DONE);
    done.set_sync_id(s.sync_id);
    std::vector<wire::OpError> errors = std::move(c.errors);
    errors.insert(errors.end(), std::make_move_iterator(s.errors.begin()), std::make_move_iterator(s.errors.end()));
    // The client raises the first error, so: a host's own (seq 0: a lost
    // worker) first, the ops it broke on other workers (a collective with the
    // dead one) after it; then the ops in the order the client issued them,
    // wherever they failed (the dispatcher's own errors are gathered apart
    // from the workers', and a later op's must not hide an earlier one's).
    std::stable_sort(errors.begin(), errors.end(), [](const wire::OpError& a, const wire::OpError& b) {
      if ((a.seq() == 0) != (b.seq() == 0)) return a.seq() == 0;
      return a.seq() < b.seq();
    });
    for (auto& e : errors) *done.add_errors() = std::move(e);
    c.errors.clear();
    (void)sender_.Send(c.route, done, {});
    active_ = true;
    c.answered = std::max(c.answered, s.admitted_before);
    c.syncs.pop_front();
  }
}

}  // namespace gt
