#include "net/curve_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <zmq.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace gt {
namespace {

constexpr size_t kZ85KeyLength = 40;
constexpr std::string_view kPublicField = "public-key:";
constexpr std::string_view kSecretField = "secret-key:";

bool IsZ85Key(const std::string& text) {
  if (text.size() != kZ85KeyLength) return false;
  uint8_t decoded[32];
  return zmq_z85_decode(decoded, text.c_str()) != nullptr;
}

std::string Trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

Status WriteNewFile(const std::string& path, const std::string& text, mode_t mode) {
  if (std::filesystem::exists(path)) return InvalidArgument(path + " exists; gt keygen never overwrites a key");
  // Created with its final mode, so a secret is never readable by others.
  FILE* f = nullptr;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, mode);
  if (fd >= 0) f = ::fdopen(fd, "w");
  if (!f) return Unavailable("cannot create " + path + ": " + std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !written) return Unavailable("cannot write " + path);
  return Status::Ok();
}

}  // namespace

Result<CurveKeyPair> GenerateCurveKeyPair() {
  if (!zmq_has("curve")) return Unavailable("this libzmq was built without CURVE support");
  char public_key[kZ85KeyLength + 1];
  char secret_key[kZ85KeyLength + 1];
  if (zmq_curve_keypair(public_key, secret_key) != 0)
    return Unavailable(std::string("zmq_curve_keypair failed: ") + zmq_strerror(zmq_errno()));
  return CurveKeyPair{public_key, secret_key};
}

Status WriteCurveKeyFiles(const std::string& base, const CurveKeyPair& keys) {
  const std::string pub = "# gt CURVE public key: give it to the peers that must accept this one\n" +
                          std::string(kPublicField) + " " + keys.public_key + "\n";
  const std::string secret = "# gt CURVE key pair: keep this file private\n" + std::string(kPublicField) + " " +
                             keys.public_key + "\n" + std::string(kSecretField) + " " + keys.secret_key + "\n";
  if (Status s = WriteNewFile(base + ".key", secret, 0600); !s.ok()) return s;
  return WriteNewFile(base + ".pub", pub, 0644);
}

namespace {

// Every key line of a key file, in order: {"public-key" or "secret-key", key}.
Result<std::vector<std::pair<std::string, std::string>>> ReadKeyLines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read key file " + path + ": " + std::strerror(errno));
  std::vector<std::pair<std::string, std::string>> lines;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    const std::string where = path + ":" + std::to_string(number) + ": ";
    const bool is_public = line.starts_with(kPublicField);
    if (!is_public && !line.starts_with(kSecretField))
      return InvalidArgument(where + "expected 'public-key: KEY' or 'secret-key: KEY'");
    std::string key = Trim(line.substr(line.find(':') + 1));
    if (!IsZ85Key(key)) return InvalidArgument(where + "not a 40-character Z85 CURVE key");
    lines.emplace_back(is_public ? "public-key" : "secret-key", std::move(key));
  }
  return lines;
}

}  // namespace

Result<CurveKeyPair> ReadCurveKeyFile(const std::string& path, bool need_secret) {
  Result<std::vector<std::pair<std::string, std::string>>> lines = ReadKeyLines(path);
  if (!lines.ok()) return lines.status();
  CurveKeyPair keys;
  for (const auto& [field, key] : *lines) {
    std::string& slot = field == "public-key" ? keys.public_key : keys.secret_key;
    if (!slot.empty()) return InvalidArgument(path + ": more than one " + field + " line: not a key pair file");
    slot = key;
  }
  if (keys.public_key.empty()) return InvalidArgument(path + ": no public-key line (written by gt keygen?)");
  if (need_secret && keys.secret_key.empty())
    return InvalidArgument(path + ": no secret-key line: give the .key file gt keygen wrote, not the .pub");
  return keys;
}

Result<std::vector<std::string>> ReadCurvePublicKeys(const std::string& path) {
  std::vector<std::string> files;
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    for (const auto& entry : std::filesystem::directory_iterator(path, error))
      if (entry.is_regular_file() && entry.path().extension() == ".pub") files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  std::vector<std::string> keys;
  for (const std::string& file : files) {
    Result<std::vector<std::pair<std::string, std::string>>> lines = ReadKeyLines(file);
    if (!lines.ok()) return lines.status();
    for (const auto& [field, key] : *lines)
      if (field == "public-key") keys.push_back(key);
  }
  if (keys.empty()) return InvalidArgument(path + " holds no public keys (public-key lines; gt keygen writes *.pub)");
  return keys;
}

Status ApplyCurveClient(zmq::socket_t& socket, const CurveClientKeys& keys) {
  if (keys.key_file.empty() || keys.server_key_file.empty())
    return InvalidArgument("CURVE needs both the own key pair (.key) and the dispatcher's public key (.pub)");
  Result<CurveKeyPair> own = ReadCurveKeyFile(keys.key_file, true);
  if (!own.ok()) return own.status();
  Result<CurveKeyPair> server = ReadCurveKeyFile(keys.server_key_file, false);
  if (!server.ok()) return server.status();
  if (!zmq_has("curve")) return Unavailable("this libzmq was built without CURVE support");
  socket.set(zmq::sockopt::curve_serverkey, server->public_key);
  socket.set(zmq::sockopt::curve_publickey, own->public_key);
  socket.set(zmq::sockopt::curve_secretkey, own->secret_key);
  return Status::Ok();
}

}  // namespace gt
