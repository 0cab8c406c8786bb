// ZeroMQ CURVE keys for gt's connections (docs/SECURITY.md).
//
// A key pair lives in two text files that `gt keygen NAME` writes:
//   NAME.key  (mode 0600)  public-key: <40 Z85 chars>
//                          secret-key: <40 Z85 chars>
//   NAME.pub               public-key: <40 Z85 chars>
// Lines starting with '#' are comments. The dispatcher is the CURVE server;
// workers and clients are CURVE clients that must know its public key, and
// whose public keys the dispatcher's allow-lists name, one list per role.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <string>
#include <vector>

#include <zmq.hpp>

#include "gt/status.h"

namespace gt {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters; empty when read from a .pub file
};

// A fresh key pair from libzmq (Unavailable when it was built without CURVE).
Result<CurveKeyPair> GenerateCurveKeyPair();
// Writes `base`.key (0600, both keys) and `base`.pub (public key only),
// refusing to overwrite either.
Status WriteCurveKeyFiles(const std::string& base, const CurveKeyPair& keys);
// Reads a .key file (both keys required) or, with `need_secret` false, a
// .key or .pub file (public key required). Errors name the file and line.
Result<CurveKeyPair> ReadCurveKeyFile(const std::string& path, bool need_secret);
// The public keys of an allow-list: every public-key line of the file
// `path` (one per admitted peer, e.g. .pub files concatenated), or of every
// *.pub file of the directory `path`. An empty list is an error (an
// allow-list that admits nobody is a mistake, not a policy).
Result<std::vector<std::string>> ReadCurvePublicKeys(const std::string& path);

// Where a CURVE client finds its keys: its own pair and the server's public key.
struct CurveClientKeys {
  std::string key_file;         // the client's (or worker's) .key
  std::string server_key_file;  // the dispatcher's .pub
  bool enabled() const { return !key_file.empty() || !server_key_file.empty(); }
};

// Sets `socket` up as a CURVE client of the server named in `keys` (both
// files required). Call before connect().
Status ApplyCurveClient(zmq::socket_t& socket, const CurveClientKeys& keys);

}  // namespace gt
