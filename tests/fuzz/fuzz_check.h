// What the fuzz targets assert beyond "no crash": a failed check prints
// what differs and aborts, so that libFuzzer saves the input as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "gt/instruction.h"

namespace gt::fuzz {

[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz check failed: %s\n", what.c_str());
  std::abort();
}

// Protobuf logs every string field that is not UTF-8 as an error: on fuzzed
// bytes that is most inputs, and the printing would dominate the run.
inline void QuietProtobuf() { google::protobuf::SetLogHandler(nullptr); }

inline void Check(bool ok, const std::string& what) {
  if (!ok) Fail(what);
}

// Bitwise, so that a NaN equals itself and -0.0 differs from 0.0: the
// codec must carry a double exactly.
inline bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The first field in which `a` and `b` differ, or "" when they are equal.
// Payloads compare by content (a re-encoded payload is the same Blob or a
// copy of it).
inline std::string Difference(const Instruction& a, const Instruction& b) {
  const Attributes& x = a.attrs;
  const Attributes& y = b.attrs;
  if (a.op != b.op) return "op";
  if (a.client != b.client || a.seq != b.seq) return "client or seq";
  if (a.results != b.results || a.operands != b.operands) return "results or operands";
  if (x.shape != y.shape || x.dtype != y.dtype || x.axes != y.axes) return "shape, dtype or axes";
  if (x.keepdims != y.keepdims || x.scalar_side != y.scalar_side || !SameBits(x.scalar, y.scalar)) return "scalar";
  if (x.seed != y.seed || x.sync_id != y.sync_id) return "seed or sync_id";
  if (x.numbers.size() != y.numbers.size()) return "numbers";
  for (size_t i = 0; i < x.numbers.size(); ++i)
    if (!SameBits(x.numbers[i], y.numbers[i])) return "numbers";
  if (a.signal != b.signal || a.worker != b.worker) return "signal or worker";
  if (!a.payload != !b.payload) return "payload presence";
  if (a.payload && a.payload->size() != b.payload->size()) return "payload size";
  // An empty frame may have no data pointer at all: memcmp wants one.
  if (a.payload && a.payload->size() != 0 &&
      std::memcmp(a.payload->data(), b.payload->data(), a.payload->size()) != 0)
    return "payload bytes";
  return "";
}

}  // namespace gt::fuzz
