// What the fused_wire_test files share: four gt-worker processes with the
// sharding stage and a raw-wire client that lies (FusedWireTest, one run per
// placement of the operands: whole, rows, columns, replicated, a grid), with
// helpers to send, expect a refusal at the next sync, and check that another
// client still works.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cluster.h"
#include "gt/instruction.h"
#include "gt/op.h"
#include "gt/op_attrs.h"

namespace gt::testing::fused_wire_test {

constexpr int kPromptMs = 15000;

class FusedWireTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new ProcessCluster(ShardingClusterOptions("fused", 4));
    ready_ = cluster_->WaitForWorkers(4);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(ready_) << "four workers did not register";
    client_ = std::make_unique<RawClient>(context_, cluster_->endpoint());
    // signals: "rows" cuts axis 0 over 4 workers, "cols" axis 1 over 4, "rep" replicated, "grid" a 2-D mesh.
    std::vector<Instruction> configs;
    ConfigureSpec rows{.signal = "rows", .shard_axis = 0, .workers = {0, 1, 2, 3}};
    ConfigureSpec cols{.signal = "cols", .shard_axis = 1, .workers = {0, 1, 2, 3}};
    ConfigureSpec rep{.signal = "rep", .replicated = true};
    // "grid": [Shard(0), Replicate()] on the 2 x 2 mesh [[0, 1], [2, 3]].
    ConfigureSpec grid{.signal = "grid", .workers = {0, 1, 2, 3}, .mesh = {2, 2, 1, 0, 2, 0}};
    configs.push_back(MakeConfigure(seq_++, rows));
    configs.push_back(MakeConfigure(seq_++, cols));
    configs.push_back(MakeConfigure(seq_++, rep));
    configs.push_back(MakeConfigure(seq_++, grid));
    client_->Send(configs);
    auto done = client_->Sync(nullptr, kPromptMs);
    ASSERT_TRUE(done.has_value());
    ASSERT_EQ(done->errors_size(), 0) << done->DebugString();
  }
  void TearDown() override { EXPECT_TRUE(cluster_->AllAlive()) << "a host died"; }

  std::string Signal() const { return GetParam() == "whole" ? std::string() : GetParam(); }

  Instruction Bytes(TensorId id, DType dtype, Shape shape, const void* data, size_t size) {
    Instruction inst;
    inst.op = Op::kFromBytes;
    inst.seq = seq_++;
    inst.results = {id};
    inst.attrs.shape = std::move(shape);
    inst.attrs.dtype = dtype;
    inst.payload = CopyToBlob(data, size);
    inst.signal = Signal();
    return inst;
  }
  Instruction F32(TensorId id, Shape shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(1.0 + i));
    return Bytes(id, DType::kFloat32, std::move(shape), v.data(), v.size() * 4);
  }
  Instruction F64(TensorId id, Shape shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<double> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(1.0 + i);
    return Bytes(id, DType::kFloat64, std::move(shape), v.data(), v.size() * 8);
  }
  Instruction I64(TensorId id, Shape shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i % 7) - 3;
    return Bytes(id, DType::kInt64, std::move(shape), v.data(), v.size() * 8);
  }
  Instruction B8(TensorId id, Shape shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint8_t> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = i % 2;
    return Bytes(id, DType::kBool, std::move(shape), v.data(), v.size());
  }
  Instruction Op_(Op op, TensorId result, std::vector<TensorId> operands, std::vector<int64_t> axes = {},
                  double eps = 1e-5) {
    Instruction inst = MakeInstruction(op, seq_++, {result}, std::move(operands));
    inst.attrs.axes = std::move(axes);
    inst.attrs.scalar = eps;
    inst.signal = Signal();
    return inst;
  }

  // Sends `batch` and a sync; the sync's errors (fails if it did not come).
  std::vector<std::string> Run(const std::vector<Instruction>& batch) {
    client_->Send(batch);
    std::optional<wire::Envelope> done = client_->Sync(nullptr, kPromptMs);
    EXPECT_TRUE(done.has_value()) << "no answer within " << kPromptMs << " ms";
    std::vector<std::string> errors;
    if (done)
      for (const auto& e : done->errors()) errors.push_back(e.message());
    return errors;
  }
  // Fetches `id`: {envelope of DATA, bytes}; errors into `errors`.
  std::optional<std::pair<wire::Envelope, std::string>> Fetch(TensorId id, std::vector<std::string>* errors) {
    client_->Send({MakeInstruction(Op::kFetch, seq_++, {}, {id})});
    std::vector<std::pair<wire::Envelope, std::string>> data;
    std::optional<wire::Envelope> done = client_->Sync(&data, kPromptMs);
    EXPECT_TRUE(done.has_value());
    if (done)
      for (const auto& e : done->errors()) errors->push_back(e.message());
    if (data.empty()) return std::nullopt;
    return data[0];
  }
  void OtherClientWorks() {
    RawClient other(context_, cluster_->endpoint());
    other.Send({FromFloats(1, {1, 2, 3, 4}), MakeInstruction(Op::kAdd, 2, {2}, {1, 1})});
    EXPECT_EQ(FetchFloats(other, 2, 3), (std::vector<float>{2, 4, 6, 8}));
  }
  // An instruction that must be refused: a clear error (mentioning `what` when given), no crash.
  void ExpectRefused(const std::string& label, std::vector<Instruction> setup, Instruction bad,
                     const std::string& what = "") {
    SCOPED_TRACE(label + " [" + GetParam() + "]");
    setup.push_back(std::move(bad));
    std::vector<std::string> errors = Run(setup);
    EXPECT_FALSE(errors.empty()) << label << ": accepted";
    bool found = what.empty();
    for (const auto& e : errors) found = found || e.find(what) != std::string::npos;
    EXPECT_TRUE(found) << label << ": " << ::testing::PrintToString(errors);
    EXPECT_TRUE(cluster_->AllAlive()) << label << ": a host died";
    // The session still works.
    std::vector<std::string> after = Run({F32(next_id_ + 500, {4, 4})});
    EXPECT_TRUE(after.empty()) << label << ": session broken: " << ::testing::PrintToString(after);
    next_id_ += 1;
  }
  TensorId Id() { return next_id_++; }
  // The `count` float32 elements of `id` (empty, with a failure recorded,
  // when the fetch fails or brings another size).
  std::vector<float> FetchF32(TensorId id, size_t count) {
    std::vector<std::string> errors;
    auto got = Fetch(id, &errors);
    EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
    if (!got.has_value() || got->second.size() != count * 4) {
      ADD_FAILURE() << "fetch of %" << id << ": expected " << count << " float32 elements";
      return {};
    }
    std::vector<float> values(count);
    std::memcpy(values.data(), got->second.data(), count * 4);
    return values;
  }

  static ProcessCluster* cluster_;
  static bool ready_;
  zmq::context_t context_{1};
  std::unique_ptr<RawClient> client_;
  uint64_t seq_ = 1;
  TensorId next_id_ = 10;
};

inline ProcessCluster* FusedWireTest::cluster_ = nullptr;
inline bool FusedWireTest::ready_ = false;

}  // namespace gt::testing::fused_wire_test
