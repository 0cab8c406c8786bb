// How the codec target lays one multipart ZeroMQ message out in a file:
//
//   byte 0            the number of data frames n (taken mod 4)
//   n times           a 2-byte little-endian length L, then L bytes: a data frame
//   the rest          the envelope frame (a serialized gt.wire.Envelope)
//
// An input that ends early gives short or empty frames: every byte string is
// a message. make_seeds.cc writes the seeds with JoinMessage.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gt::fuzz {

struct FuzzMessage {
  std::string envelope;
  std::vector<std::string> data;  // the frames after the envelope
};

inline FuzzMessage SplitMessage(const uint8_t* bytes, size_t size) {
  FuzzMessage m;
  size_t at = 0;
  const size_t frames = size > 0 ? bytes[at++] % 4 : 0;
  for (size_t i = 0; i < frames; ++i) {
    size_t length = 0;
    for (int b = 0; b < 2 && at < size; ++b) length |= size_t{bytes[at++]} << (8 * b);
    length = std::min(length, size - at);
    m.data.emplace_back(reinterpret_cast<const char*>(bytes + at), length);
    at += length;
  }
  m.envelope.assign(reinterpret_cast<const char*>(bytes + at), size - at);
  return m;
}

// REQUIRES: at most 3 data frames, each under 64 KiB.
inline std::string JoinMessage(const FuzzMessage& m) {
  std::string out(1, static_cast<char>(m.data.size()));
  for (const std::string& frame : m.data) {
    out += static_cast<char>(frame.size() & 0xff);
    out += static_cast<char>(frame.size() >> 8);
    out += frame;
  }
  return out + m.envelope;
}

}  // namespace gt::fuzz
