// Compiled units from a client over the wire protocol, against real
// gt-dispatcher and gt-worker processes (host_test_fixture.h): a client's own
// unit is never replaced by another's, host-only kinds are refused also
// inside a unit, and a refused RUN_UNIT still frees the inputs it consumes.
// Part of host_test.
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "cluster.h"
#include "gt/instruction.h"
#include "gt/op_attrs.h"
#include "gt/unit.h"
#include "net/peer_address.h"
#include "host_test_fixture.h"

namespace gt::testing {
namespace {
using namespace host_test;

// A unit of one input: `op` on placeholder 1 into 2, then (when `consume`)
// a free of the input.
UnitTemplate OneOpUnit(Op op, bool consume) {
  UnitTemplate unit;
  unit.inputs = 1;
  unit.body.push_back(MakeInstruction(op, 0, {2}, {1}));
  if (consume) unit.body.push_back(MakeInstruction(Op::kFree, 0, {}, {1}));
  return unit;
}

Instruction DefineUnit(uint64_t seq, uint64_t key, const UnitTemplate& unit) {
  Instruction define = MakeInstruction(Op::kDefineUnit, seq, {}, {});
  define.attrs.seed = key;
  define.payload = EncodeUnit(unit);
  return define;
}

Instruction RunUnit(uint64_t seq, uint64_t key, TensorId input, TensorId output, std::vector<int64_t> consumed = {}) {
  Instruction run = MakeInstruction(Op::kRunUnit, seq, {output}, {input});
  run.attrs.seed = key;
  run.attrs.axes = std::move(consumed);
  return run;
}

// Workers keep units by key for every client; a unit a client defined itself
// (GT_COMPILE=1 compiles in the client) must stay its own whatever key
// another client defines.
TEST_F(HostTest, AClientsOwnUnitIsNeverReplacedByAnothersUnderTheSameKey) {
  RawClient a(context_, cluster_->endpoint());
  RawClient b(context_, cluster_->endpoint());
  a.Send({FromFloats(1, {3}, {1}), DefineUnit(2, 7, OneOpUnit(Op::kNeg, false)), RunUnit(3, 7, 1, 2)});
  EXPECT_EQ(FetchFloats(a, 2, 4), (std::vector<float>{-3}));
  b.Send({FromFloats(1, {-5}, {1}), DefineUnit(2, 7, OneOpUnit(Op::kAbs, false)), RunUnit(3, 7, 1, 2)});
  EXPECT_EQ(FetchFloats(b, 2, 4), (std::vector<float>{5}));
  a.Send({RunUnit(5, 7, 1, 3)});
  EXPECT_EQ(FetchFloats(a, 3, 6), (std::vector<float>{-3})) << "client a ran client b's unit";
}

// Every op the op table marks host-only, sent by a client on its own, in a
// unit's body, or with a worker chosen, is refused by name; nothing reaches
// a worker and the client's stream goes on.
TEST_F(HostTest, EveryHostOnlyKindIsRefusedFromAClientAlsoInsideAUnit) {
  RawClient client(context_, cluster_->endpoint());
  client.Send({FromFloats(1, {3}, {1})});
  ASSERT_TRUE(client.Sync());
  const double backend_errors = Scrape(wport(), "gt_stage_errors_total", {{"stage", "backend"}});
  uint64_t seq = 10;
  int refused = 0;
  for (uint16_t code = 0; code < static_cast<uint16_t>(Op::kCount); ++code) {
    const Op op = static_cast<Op>(code);
    if (ClientMaySend(op)) continue;
    ++refused;
    const TensorId result = ProducesTensor(op) ? 100 + code : 0;
    Instruction direct = MakeInstruction(op, ++seq, result ? std::vector<TensorId>{result} : std::vector<TensorId>{}, {1});
    UnitTemplate unit;
    unit.inputs = 1;
    unit.body.push_back(MakeInstruction(op, 0, {2}, {1}));
    client.Send({direct, DefineUnit(++seq, 50 + code, unit)});
    std::optional<wire::Envelope> done = client.Sync();
    ASSERT_TRUE(done);
    ASSERT_EQ(done->errors_size(), 2) << OpName(op);
    const std::string name(OpName(op));
    EXPECT_NE(done->errors(0).message().find(name + " is reserved for the dispatcher"), std::string::npos)
        << done->errors(0).message();
    EXPECT_NE(done->errors(1).message().find("its body holds " + name), std::string::npos) << done->errors(1).message();
  }
  EXPECT_EQ(refused, 6);  // drop_client, membership, broadcast, all_reduce, all_gather, reduce_scatter
  // A unit whose body picks a worker is refused too.
  UnitTemplate placed;
  placed.inputs = 1;
  placed.body.push_back(MakeInstruction(Op::kNeg, 0, {2}, {1}));
  placed.body.back().worker = 0;
  client.Send({DefineUnit(++seq, 99, placed), MakeInstruction(Op::kNeg, ++seq, {3}, {1})});
  std::optional<wire::Envelope> done = client.Sync();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->errors_size(), 1);
  EXPECT_NE(FirstError(*done).find("which a client may not send"), std::string::npos) << FirstError(*done);
  EXPECT_EQ(FetchFloats(client, 3, ++seq), (std::vector<float>{-3}));
  // Nothing refused reached the worker: no result of one exists there (only
  // %1 and the neg's %3), and its backend reported no error.
  EXPECT_EQ(Scrape(wport(), "gt_worker_live_tensors"), 2);
  EXPECT_EQ(Scrape(wport(), "gt_stage_errors_total", {{"stage", "backend"}}), backend_errors);
}

// The client forgets the inputs a run_unit consumes when it sends it; when
// the dispatcher refuses the run, it must still free them.
TEST_F(HostTest, ARefusedRunUnitStillFreesTheInputsItConsumes) {
  RawClient client(context_, cluster_->endpoint());
  client.Send({FromFloats(1, {3}, {1}), FromFloats(2, {4}, {1})});
  ASSERT_TRUE(client.Sync());
  EXPECT_EQ(Scrape(wport(), "gt_worker_live_tensors"), 2);
  client.Send({RunUnit(3, 9, 1, 5, {0})});  // no unit was defined under key 9
  std::optional<wire::Envelope> done = client.Sync();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->errors_size(), 1);
  EXPECT_NE(FirstError(*done).find("no unit was defined"), std::string::npos) << FirstError(*done);
  EXPECT_TRUE(WaitFor([&] { return Scrape(wport(), "gt_worker_live_tensors") == 1; }));
  wire::Envelope fetched;
  EXPECT_TRUE(FetchFloats(client, 1, 6, &fetched).empty());
  EXPECT_EQ(FetchFloats(client, 2, 7), (std::vector<float>{4}));
}

// A run the worker refuses (here: it says it consumes an input the unit does
// not free) still frees what it said it consumes there too: the client and
// the dispatcher have forgotten it, and kept, it would escape the client's
// quotas for good.
TEST_F(HostTest, ARunUnitTheWorkerRefusesStillFreesTheInputsItConsumes) {
  RawClient client(context_, cluster_->endpoint());
  client.Send({FromFloats(1, {3}, {1}), FromFloats(2, {4}, {1}), DefineUnit(3, 7, OneOpUnit(Op::kNeg, false))});
  ASSERT_TRUE(client.Sync());
  EXPECT_EQ(Scrape(wport(), "gt_worker_live_tensors"), 2);
  client.Send({RunUnit(4, 7, 1, 5, {0})});
  std::optional<wire::Envelope> done = client.Sync();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->errors_size(), 1);
  EXPECT_NE(FirstError(*done).find("freed operands do not match the unit's"), std::string::npos) << FirstError(*done);
  EXPECT_TRUE(WaitFor([&] { return Scrape(wport(), "gt_worker_live_tensors") == 1; }))
      << Scrape(wport(), "gt_worker_live_tensors") << " tensors live";
  EXPECT_EQ(FetchFloats(client, 2, 7), (std::vector<float>{4}));
}

}  // namespace
}  // namespace gt::testing
