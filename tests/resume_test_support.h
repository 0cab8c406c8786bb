// What the resume tests without sockets share (resume_book_test.cc,
// rejoin_busy_test.cc): a rejoining worker's inventory of one session and a
// client's RESUME claim, built from plain values.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dispatcher/session_resume.h"
#include "ir/codec.h"

namespace gt::resume_test {

// One session's inventory: `tensors` whole, shape [2], float32.
inline wire::SessionInventory Inventory(ClientId client, uint64_t token, const std::vector<TensorId>& tensors,
                                        uint64_t received_seq, const std::string& key = "") {
  wire::SessionInventory inv;
  inv.mutable_session()->set_client(client);
  inv.mutable_session()->set_digest(SessionDigest(token));
  inv.mutable_session()->set_key(key);
  inv.set_received_seq(received_seq);
  for (TensorId id : tensors) {
    wire::HeldTensor* t = inv.add_tensors();
    t->set_id(id);
    t->add_shape(2);
    t->set_dtype(0);
  }
  return inv;
}

// A RESUME claiming `live` (tensor id, seq of the instruction that made it).
inline ResumeClaim Claim(uint64_t token, const std::vector<std::pair<TensorId, uint64_t>>& live,
                         uint64_t answered_seq, const std::string& key = "") {
  ResumeClaim claim;
  claim.token = token;
  claim.key = key;
  claim.answered_seq = answered_seq;
  for (auto [id, seq] : live) {
    wire::ResumeTensor t;
    t.set_id(id);
    t.set_seq(seq);
    claim.live.push_back(t);
  }
  return claim;
}

}  // namespace gt::resume_test
