// The IR's wire encoding, without any process: instruction round trips
// through wire::Envelope and ZeroMQ frames, decoder rejections, and the
// transport's busy-wait poll. Part of ir_test (with ir_shape_test.cc).
#include <chrono>
#include <cmath>
#include <limits>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <zmq.hpp>

#include "ir/codec.h"
#include "gt/dtype.h"
#include "gt/instruction.h"
#include "gt/op.h"
#include "gt/op_attrs.h"
#include "gt/status.h"
#include "ir/shape_inference.h"
#include "net/transport.h"
#include "wire.pb.h"
#include "expect_contains.h"

namespace gt {
namespace {

// ---- helpers ---------------------------------------------------------------

BlobPtr BytesBlob(const std::string& bytes) { return CopyToBlob(bytes.data(), bytes.size()); }

std::string BlobString(const BlobPtr& blob) {
  return std::string(reinterpret_cast<const char*>(blob->data()), blob->size());
}

// Every field set, none to its default.
Instruction FullInstruction() {
  Instruction inst;
  inst.op = Op::kSub;
  inst.client = 0x1234567890ULL;
  inst.seq = 77;
  inst.results = {9, 1ULL << 40};
  inst.operands = {3, 4, 5};
  inst.attrs.shape = {2, -1, 0, 1LL << 35};
  inst.attrs.dtype = DType::kInt64;
  inst.attrs.axes = {-1, 0, 2};
  inst.attrs.keepdims = true;
  inst.attrs.scalar = -2.5;
  inst.attrs.scalar_side = ScalarSide::kLeft;
  inst.attrs.seed = 0xdeadbeefcafeULL;
  inst.attrs.sync_id = 4242;
  inst.signal = "forward/layer1";
  return inst;
}

void ExpectSameInstruction(const Instruction& want, const Instruction& got) {
  EXPECT_EQ(got.op, want.op);
  EXPECT_EQ(got.client, want.client);
  EXPECT_EQ(got.seq, want.seq);
  EXPECT_EQ(got.results, want.results);
  EXPECT_EQ(got.operands, want.operands);
  EXPECT_EQ(got.attrs.shape, want.attrs.shape);
  EXPECT_EQ(got.attrs.dtype, want.attrs.dtype);
  EXPECT_EQ(got.attrs.axes, want.attrs.axes);
  EXPECT_EQ(got.attrs.keepdims, want.attrs.keepdims);
  EXPECT_EQ(got.attrs.scalar_side, want.attrs.scalar_side);
  if (want.attrs.scalar_side != ScalarSide::kNone) {
    EXPECT_EQ(got.attrs.scalar, want.attrs.scalar);
  }
  EXPECT_EQ(got.attrs.seed, want.attrs.seed);
  EXPECT_EQ(got.attrs.sync_id, want.attrs.sync_id);
  EXPECT_EQ(got.signal, want.signal);
  EXPECT_EQ(got.payload == nullptr, want.payload == nullptr);
  EXPECT_EQ(got.Describe(), want.Describe());
}

// Encodes `batch` into a BATCH envelope, serializes and re-parses it, and
// decodes every instruction against `payloads` as they were appended.
std::vector<Instruction> RoundTrip(const std::vector<Instruction>& batch, std::vector<BlobPtr>* payloads_out = nullptr) {
  wire::Envelope env;
  env.set_kind(wire::Envelope::BATCH);
  std::vector<BlobPtr> payloads;
  for (const Instruction& inst : batch) EncodeInstruction(inst, env.add_instructions(), &payloads);
  std::string bytes;
  EXPECT_TRUE(env.SerializeToString(&bytes));
  wire::Envelope parsed;
  EXPECT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.kind(), wire::Envelope::BATCH);
  EXPECT_EQ(parsed.instructions_size(), static_cast<int>(batch.size()));
  std::vector<Instruction> out;
  for (const wire::Instruction& w : parsed.instructions()) {
    Result<Instruction> decoded = DecodeInstruction(w, payloads);
    EXPECT_TRUE(decoded.ok()) << decoded.status().ToString();
    if (decoded.ok()) out.push_back(std::move(decoded).value());
  }
  if (payloads_out) *payloads_out = payloads;
  return out;
}

// ---- codec -----------------------------------------------------------------

TEST(CodecTest, EveryFieldSurvivesTheEnvelope) {
  Instruction left = FullInstruction();
  Instruction right = FullInstruction();
  right.op = Op::kDiv;
  right.seq = 78;
  right.attrs.scalar = 1e-300;
  right.attrs.scalar_side = ScalarSide::kRight;
  right.signal = "";
  Instruction plain = FullInstruction();
  plain.op = Op::kSync;
  plain.attrs.scalar_side = ScalarSide::kNone;
  plain.attrs.keepdims = false;

  std::vector<Instruction> batch = {left, right, plain};
  std::vector<Instruction> got = RoundTrip(batch);
  ASSERT_EQ(got.size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    SCOPED_TRACE("instruction " + std::to_string(i) + ": " + batch[i].Describe());
    ExpectSameInstruction(batch[i], got[i]);
  }
  EXPECT_EQ(got[0].attrs.scalar_side, ScalarSide::kLeft);
  EXPECT_EQ(got[1].attrs.scalar_side, ScalarSide::kRight);
  EXPECT_EQ(got[2].attrs.scalar_side, ScalarSide::kNone);
}

TEST(CodecTest, DefaultInstructionRoundTrips) {
  std::vector<Instruction> got = RoundTrip({Instruction{}});
  ASSERT_EQ(got.size(), 1u);
  ExpectSameInstruction(Instruction{}, got[0]);
}

TEST(CodecTest, EveryOpAndDTypeRoundTrips) {
  std::vector<Instruction> batch;
  for (size_t op = 0; op < static_cast<size_t>(Op::kCount); ++op) {
    for (size_t dt = 0; dt < static_cast<size_t>(DType::kCount); ++dt) {
      Instruction inst;
      inst.op = static_cast<Op>(op);
      inst.attrs.dtype = static_cast<DType>(dt);
      inst.seq = op * 100 + dt;
      batch.push_back(inst);
    }
  }
  std::vector<Instruction> got = RoundTrip(batch);
  ASSERT_EQ(got.size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(got[i].op, batch[i].op);
    EXPECT_EQ(got[i].attrs.dtype, batch[i].attrs.dtype);
  }
}

TEST(CodecTest, PayloadTravelsAsItsOwnFrameWithoutACopy) {
  Instruction first;
  first.op = Op::kFromBytes;
  first.seq = 1;
  first.results = {1};
  first.attrs.shape = {2, 2};
  first.attrs.dtype = DType::kFloat32;
  const float values[4] = {1.5f, -2.0f, 3.25f, 0.0f};
  first.payload = CopyToBlob(values, sizeof values);
  Instruction second = first;
  second.seq = 2;
  second.results = {2};
  second.attrs.shape = {3};
  second.attrs.dtype = DType::kBool;
  second.payload = BytesBlob(std::string("\x01\x00\x01", 3));

  // Envelope only: the payload is referenced by position, not encoded.
  std::vector<BlobPtr> payloads;
  std::vector<Instruction> got = RoundTrip({first, second}, &payloads);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(payloads.size(), 2u);
  EXPECT_EQ(payloads[0].get(), first.payload.get());
  EXPECT_EQ(payloads[1].get(), second.payload.get());
  ExpectSameInstruction(first, got[0]);
  ExpectSameInstruction(second, got[1]);
  EXPECT_EQ(got[0].payload.get(), first.payload.get()) << "decode must reuse the frame's Blob";
  EXPECT_EQ(got[1].payload.get(), second.payload.get());
  EXPECT_EQ(BlobString(got[0].payload), BlobString(first.payload));
  EXPECT_EQ(BlobString(got[1].payload), BlobString(second.payload));

  wire::Envelope env;
  env.set_kind(wire::Envelope::BATCH);
  std::vector<BlobPtr> frames;
  EncodeInstruction(first, env.add_instructions(), &frames);
  std::string encoded;
  ASSERT_TRUE(env.SerializeToString(&encoded));
  EXPECT_EQ(encoded.find(BlobString(first.payload)), std::string::npos) << "tensor bytes entered the envelope";
  EXPECT_EQ(env.instructions(0).payload_frame(), 1u);
}

TEST(CodecTest, PayloadSurvivesZeroMqFramesWithoutACopy) {
  Instruction inst;
  inst.op = Op::kFromBytes;
  inst.seq = 5;
  inst.results = {11};
  inst.attrs.shape = {64};
  inst.attrs.dtype = DType::kInt64;
  std::vector<int64_t> values(64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(i * i) - 100;
  inst.payload = CopyToBlob(values.data(), values.size() * sizeof(int64_t));

  wire::Envelope env;
  env.set_kind(wire::Envelope::BATCH);
  std::vector<BlobPtr> payloads;
  EncodeInstruction(inst, env.add_instructions(), &payloads);
  std::string head;
  ASSERT_TRUE(env.SerializeToString(&head));

  // What SendEnvelope puts on the socket: the envelope, then each payload as
  // a message sharing the Blob's bytes.
  std::vector<zmq::message_t> frames;
  frames.emplace_back(head.data(), head.size());
  for (const BlobPtr& p : payloads) frames.push_back(BlobToMessage(p));
  EXPECT_EQ(frames[1].data(), static_cast<const void*>(inst.payload->data())) << "sending copied the payload";

  Result<WireMessage> msg = DecodeFrames(std::move(frames), false);
  ASSERT_TRUE(msg.ok()) << msg.status().ToString();
  ASSERT_EQ(msg->frames.size(), 1u);
  ASSERT_EQ(msg->envelope.instructions_size(), 1);
  EXPECT_EQ(msg->frames[0]->data(), inst.payload->data()) << "receiving copied the payload";

  Result<Instruction> got = DecodeInstruction(msg->envelope.instructions(0), msg->frames);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameInstruction(inst, *got);
  EXPECT_EQ(got->payload.get(), msg->frames[0].get()) << "decode must reuse the frame's Blob";
  ASSERT_EQ(got->payload->size(), inst.payload->size());
  EXPECT_EQ(std::memcmp(got->payload->data(), values.data(), got->payload->size()), 0);
}

// The worker decodes every message into one WireMessage it keeps: a smaller
// message after a larger one must leave nothing of the first behind.
TEST(CodecTest, DecodeFramesIntoAReusedMessageHoldsOnlyTheNewOne) {
  auto frames_of = [](const std::vector<Instruction>& insts) {
    wire::Envelope env;
    env.set_kind(wire::Envelope::BATCH);
    std::vector<BlobPtr> payloads;
    for (const Instruction& inst : insts) EncodeInstruction(inst, env.add_instructions(), &payloads);
    std::vector<zmq::message_t> frames;
    frames.emplace_back(env.SerializeAsString());
    for (const BlobPtr& p : payloads) frames.push_back(BlobToMessage(p));
    return frames;
  };
  Instruction add;
  add.op = Op::kAdd;
  add.seq = 7;
  add.results = {3};
  add.operands = {1, 2};
  Instruction bytes;
  bytes.op = Op::kFromBytes;
  bytes.seq = 8;
  bytes.results = {4};
  bytes.attrs.shape = {2};
  bytes.attrs.dtype = DType::kFloat32;
  bytes.payload = CopyToBlob("12345678", 8);
  Instruction free_op;
  free_op.op = Op::kFree;
  free_op.seq = 9;
  free_op.operands = {5};

  WireMessage reused;
  ASSERT_TRUE(DecodeFramesInto(frames_of({add, bytes, add}), false, reused).ok());
  ASSERT_EQ(reused.envelope.instructions_size(), 3);
  ASSERT_EQ(reused.frames.size(), 1u);
  ASSERT_TRUE(DecodeFramesInto(frames_of({free_op}), false, reused).ok());
  ASSERT_EQ(reused.envelope.instructions_size(), 1);
  EXPECT_TRUE(reused.frames.empty()) << "a frame of the earlier message was kept";
  Result<Instruction> got = DecodeInstruction(reused.envelope.instructions(0), reused.frames);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameInstruction(free_op, *got);

  std::vector<zmq::message_t> garbage;
  garbage.emplace_back(std::string("\xff\xff\xff"));
  EXPECT_EQ(DecodeFramesInto(std::move(garbage), false, reused).code(), Code::kInvalidArgument);
}

// The busy phase finds a message that comes while it polls (the sleeping
// poll after it, with timeout 0, would not wait for one); with nothing
// coming it lasts its full length, and a zero busy wait is a plain poll.
TEST(TransportTest, PollWithBusyWaitFindsWhatComesWhileItPolls) {
  zmq::context_t context(1);
  zmq::socket_t receiver(context, zmq::socket_type::pair), sender(context, zmq::socket_type::pair);
  const std::string endpoint = UniqueInprocEndpoint("busy-wait-test");
  receiver.bind(endpoint);
  sender.connect(endpoint);
  zmq::pollitem_t item{receiver.handle(), 0, ZMQ_POLLIN, 0};
  EXPECT_EQ(PollWithBusyWait(&item, 1, std::chrono::milliseconds(0), std::chrono::microseconds(0)), 0);

  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(PollWithBusyWait(&item, 1, std::chrono::milliseconds(0), std::chrono::milliseconds(20)), 0);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(20));

  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    sender.send(zmq::str_buffer("x"), zmq::send_flags::none);
  });
  EXPECT_EQ(PollWithBusyWait(&item, 1, std::chrono::milliseconds(0), std::chrono::seconds(10)), 1);
  later.join();
  EXPECT_TRUE(item.revents & ZMQ_POLLIN);
}

TEST(CodecTest, RejectsUnknownOpCode) {
  wire::Instruction w;
  w.set_op(static_cast<uint32_t>(Op::kCount));
  w.set_seq(31);
  Result<Instruction> got = DecodeInstruction(w, {});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kInvalidArgument);
  EXPECT_CONTAINS(got.status().message(), "unknown op code " + std::to_string(static_cast<int>(Op::kCount)));
  EXPECT_CONTAINS(got.status().message(), "31");

  w.set_op(0xffffffffu);
  got = DecodeInstruction(w, {});
  ASSERT_FALSE(got.ok());
  EXPECT_CONTAINS(got.status().message(), "unknown op code 4294967295");
}

TEST(CodecTest, RejectsUnknownDType) {
  wire::Instruction w;
  w.set_op(static_cast<uint32_t>(Op::kZeros));
  w.set_dtype(static_cast<uint32_t>(DType::kCount));
  w.set_seq(32);
  Result<Instruction> got = DecodeInstruction(w, {});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kInvalidArgument);
  EXPECT_CONTAINS(got.status().message(), "unknown dtype code " + std::to_string(static_cast<int>(DType::kCount)));
}

TEST(CodecTest, RejectsUnknownScalarSide) {
  wire::Instruction w;
  w.set_op(static_cast<uint32_t>(Op::kAdd));
  w.set_scalar_side(3);
  Result<Instruction> got = DecodeInstruction(w, {});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kInvalidArgument);
  EXPECT_CONTAINS(got.status().message(), "scalar_side 3");
}

TEST(CodecTest, RejectsMissingPayloadFrame) {
  Instruction inst;
  inst.op = Op::kFromBytes;
  inst.seq = 12;
  inst.results = {3};
  inst.attrs.shape = {1};
  inst.payload = BytesBlob("abcd");
  wire::Instruction w;
  std::vector<BlobPtr> payloads;
  EncodeInstruction(inst, &w, &payloads);
  ASSERT_EQ(w.payload_frame(), 1u);

  // The message arrived without its data frame.
  Result<Instruction> got = DecodeInstruction(w, {});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kInvalidArgument);
  EXPECT_CONTAINS(got.status().message(), "payload frame 1");
  EXPECT_CONTAINS(got.status().message(), "missing");
  EXPECT_CONTAINS(got.status().message(), "from_bytes #12");

  // A frame index past the end, as a hostile peer could send.
  w.set_payload_frame(7);
  got = DecodeInstruction(w, payloads);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kInvalidArgument);
  EXPECT_CONTAINS(got.status().message(), "payload frame 7");
  EXPECT_CONTAINS(got.status().message(), "has 1");
}

TEST(CodecTest, OpErrorRoundTrips) {
  Instruction inst = FullInstruction();
  wire::OpError e = MakeOpError(RefOf(inst), NotFound("unknown tensor %3"), "worker-1");
  std::string bytes;
  ASSERT_TRUE(e.SerializeToString(&bytes));
  wire::OpError parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.client(), inst.client);
  EXPECT_EQ(parsed.seq(), inst.seq);
  EXPECT_EQ(parsed.op(), static_cast<uint32_t>(inst.op));
  EXPECT_EQ(parsed.host(), "worker-1");
  Status s = OpErrorToStatus(parsed);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "unknown tensor %3");

  parsed.set_code(999);  // out of range: never trusted
  EXPECT_EQ(OpErrorToStatus(parsed).code(), Code::kInternal);
  parsed.set_code(0);  // "ok" cannot describe a failure
  EXPECT_EQ(OpErrorToStatus(parsed).code(), Code::kInternal);
}

// An error message quoting a peer's bytes (the dispatcher fuzzer found one:
// a proto3 string that is not UTF-8 made the whole envelope unparsable).
TEST(CodecTest, AnErrorMessageIsValidUtf8WhateverItQuotes) {
  const std::string quoted = std::string("name '") + "\xbd\xbd" + "' \xc3\xa9 \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf";
  wire::OpError e = MakeOpError(OpRef{}, InvalidArgument(quoted), "dispatcher");
  EXPECT_EQ(e.message(), "name '\\xbd\\xbd' \xc3\xa9 \\xe2\\x82 \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80 \\xc0\\xaf");
  std::string bytes;
  ASSERT_TRUE(e.SerializeToString(&bytes));
  wire::OpError parsed;
  EXPECT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(WireText("plain text, caf\xc3\xa9, \xf0\x9f\x98\x80"), "plain text, caf\xc3\xa9, \xf0\x9f\x98\x80");
}

}  // namespace
}  // namespace gt
