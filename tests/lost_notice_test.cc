// The lost notice (core/host/worker_lost_notice.h) on its own: it names its
// worker's registration by token, and nothing else the dispatcher sends a
// worker passes for it. The real-process check (SIGSTOP, SIGCONT, the worker
// registering again empty) is tests/python/test_hung_worker.py.
#include "host/worker_lost_notice.h"

#include <gtest/gtest.h>

#include "gt/status.h"

namespace gt {
namespace {

constexpr uint64_t kToken = 0x1234abcd5678ef90ULL;

TEST(LostNotice, NamesTheWorkersRegistrationByItsToken) {
  const wire::Envelope notice = MakeLostNotice("dispatcher-a", "worker-3", kToken);
  EXPECT_EQ(notice.kind(), wire::Envelope::ERROR);
  EXPECT_EQ(notice.token(), kToken);
  ASSERT_EQ(notice.errors_size(), 1);
  EXPECT_EQ(notice.errors(0).code(), static_cast<uint32_t>(Code::kUnavailable));
  EXPECT_EQ(notice.errors(0).host(), "dispatcher-a");
  EXPECT_TRUE(IsLostNotice(notice, kToken));
  // The words older tooling looked for stay; the worker logs the whole message.
  EXPECT_NE(LostNoticeMessage(notice).find("dispatcher dispatcher-a lost worker worker-3: start it again, empty"),
            std::string::npos)
      << LostNoticeMessage(notice);
}

TEST(LostNotice, IsNotAnotherRegistrationsOrAPlainRefusal) {
  const wire::Envelope notice = MakeLostNotice("d", "w", kToken);
  EXPECT_FALSE(IsLostNotice(notice, kToken + 1)) << "another registration's notice";
  EXPECT_FALSE(IsLostNotice(notice, 0)) << "a worker without a token has no registration to lose";

  wire::Envelope refusal;  // what PeerOutbox::SendError sends: no token
  refusal.set_kind(wire::Envelope::ERROR);
  refusal.add_errors()->set_message("dispatcher d rejected a message: ...");
  EXPECT_FALSE(IsLostNotice(refusal, kToken));

  wire::Envelope stats = notice;  // the token on another kind of message
  stats.set_kind(wire::Envelope::STATS);
  EXPECT_FALSE(IsLostNotice(stats, kToken));
  EXPECT_EQ(LostNoticeMessage(wire::Envelope()), "");
}

}  // namespace
}  // namespace gt
