// The collective rendezvous store's wire (issue 39): a key/value store the
// dispatcher's sharding stage serves (modifiers/sharding/rendezvous.cc) and
// the workers' collectives use through c10d's Store interface
// (plugins/torch/rendezvous_store.cc), replacing c10d::TCPStore, which
// listened on every interface and took anyone's keys.
//
// Over ZeroMQ (a DEALER to the store's ROUTER). A request is the frames
//   [request id: 8 bytes][secret][op: 1 byte][argument]...
// and its answer
//   [request id][status: 1 byte][value]
// The secret is the store's random 128-bit key (CollectiveSpec::store_key),
// told only to registered workers inside the collectives the dispatcher
// sends them; a request without it is answered kRefused and changes
// nothing. The store bounds what it keeps (below); a request past a bound
// is answered kTooLarge, and a frame larger than kMaxMessageBytes closes
// its connection unread (ZMQ_MAXMSGSIZE).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gt::rendezvous_wire {

// The arguments of each, and what an kOk answer carries.
enum Op : char {
  kSet = 'S',         // key, value
  kGet = 'G',         // key -> value; kMissing when absent (the client polls)
  kAdd = 'A',         // key, decimal int64 -> the new decimal value
  kCheck = 'C',       // key... -> "1" when every one is set, else "0"
  kDelete = 'D',      // key -> "1" when it was set, else "0"
  kNumKeys = 'N',     // -> decimal count
  kCompareSet = 'X',  // key, expected, desired -> the value now (desired when set; absent key and
                      // empty expected: set)
};

enum Status : char { kOk = 0, kMissing = 1, kRefused = 2, kTooLarge = 3, kBadRequest = 4 };

inline constexpr size_t kMaxKeyBytes = 1024;
inline constexpr size_t kMaxValueBytes = 64 << 10;
inline constexpr size_t kMaxKeys = 65536;
inline constexpr size_t kMaxStoredBytes = 64 << 20;
inline constexpr int64_t kMaxMessageBytes = kMaxValueBytes + kMaxKeyBytes + 1024;

}  // namespace gt::rendezvous_wire
