// How the dispatcher's parts reach a peer: a message to the client or worker
// connected under a ZeroMQ routing id. The dispatcher implements it on its
// ROUTER socket; tests implement it by recording.
#pragma once

#include <string>
#include <vector>

#include "gt/instruction.h"
#include "wire.pb.h"

namespace gt {

class PeerSender {
 public:
  virtual ~PeerSender() = default;
  // False when the peer cannot be reached (gone, or its queue refused).
  virtual bool Send(const std::string& route, const wire::Envelope& env, const std::vector<BlobPtr>& frames) = 0;
};

}  // namespace gt
