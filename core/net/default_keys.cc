#include "net/default_keys.h"

#include <pwd.h>
#include <stdlib.h>  // mkdtemp
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "gt/settings.h"
#include "net/peer_address.h"

namespace gt {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPairs[] = {"dispatcher", "worker", "client"};

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// `path` is a `directory` (else a regular file, never a symbolic link) of
// this user that no one else may read or write (dir) or read (file).
Status CheckPrivate(const std::string& path, bool directory, const std::string& fix) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return NotFound("the default key set lacks " + path + ": " + fix);
  const bool kind_ok = directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
  if (!kind_ok)
    return FailedPrecondition(path + " is not a " + (directory ? "directory" : "regular file") +
                              " (a symbolic link?): the default key set must be a plain one; " + fix);
  if (st.st_uid != ::geteuid())
    return FailedPrecondition(path + " belongs to user id " + std::to_string(st.st_uid) +
                              ", not to this user: another user could have chosen these keys; " + fix);
  if ((st.st_mode & 077) != 0)
    return FailedPrecondition(path + " has mode " + Octal(st.st_mode) + ": other users can read it, so they " +
                              "could connect as this user's clients and workers; chmod " +
                              (directory ? "700 " : "600 ") + path + ", or " + fix);
  return Status::Ok();
}

Status CheckKeySet(const std::string& dir) {
  const std::string fix = "remove " + dir + " to have a new key set made (restart this user's gt processes)";
  if (Status s = CheckPrivate(dir, true, fix); !s.ok()) return s;
  for (const char* pair : kPairs)
    for (const char* ext : {".key", ".pub"})
      if (Status s = CheckPrivate(dir + "/" + pair + ext, false, fix); !s.ok()) return s;
  return Status::Ok();
}

// Makes every missing directory of `path` with mode 0700, then checks that
// no other user may write to `path` itself (they could swap the key set).
Status MakeParent(const std::string& path) {
  fs::path built;
  for (const fs::path& part : fs::path(path)) {
    built /= part;
    if (::mkdir(built.c_str(), 0700) != 0 && errno != EEXIST)
      return Unavailable("cannot make " + built.string() + " for the default key set: " + std::strerror(errno));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Unavailable(path + " is not a directory; the default key set goes in it");
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0)
    return FailedPrecondition(path + " (mode " + Octal(st.st_mode) + ", user id " + std::to_string(st.st_uid) +
                              ") may be written by another user, who could replace the default key set in it; "
                              "make it this user's and chmod go-w it");
  return Status::Ok();
}

// A complete key set in a fresh directory beside `dir`, renamed to `dir`.
// False in `won` when another process renamed its own there first.
Status MakeKeySet(const std::string& dir, bool* won) {
  const std::string parent = fs::path(dir).parent_path().string();
  if (Status s = MakeParent(parent); !s.ok()) return s;
  std::string staging = parent + "/.keys-XXXXXX";
  if (::mkdtemp(staging.data()) == nullptr)  // mode 0700
    return Unavailable("cannot make a directory in " + parent + ": " + std::strerror(errno));
  Status made = Status::Ok();
  for (const char* pair : kPairs) {
    Result<CurveKeyPair> keys = GenerateCurveKeyPair();
    made = keys.ok() ? WriteCurveKeyFiles(staging + "/" + pair, *keys) : keys.status();
    if (!made.ok()) break;
    ::chmod((staging + "/" + pair + ".pub").c_str(), 0600);  // private too: the whole set is one user's
  }
  *won = made.ok() && ::rename(staging.c_str(), dir.c_str()) == 0;
  if (made.ok() && !*won && errno != EEXIST && errno != ENOTEMPTY)
    made = Unavailable("cannot move the new key set to " + dir + ": " + std::strerror(errno));
  if (!*won) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
  }
  return made;
}

}  // namespace

Result<std::string> DefaultKeyDir() {
  // Read through gt/settings.h, the one place that calls getenv.
  const std::string config = EnvironmentText("XDG_CONFIG_HOME").value_or("");
  if (config.starts_with('/')) return config + "/gt/keys";
  std::string home = EnvironmentText("HOME").value_or("");
  if (!home.starts_with('/')) {
    const passwd* entry = ::getpwuid(::geteuid());
    home = entry && entry->pw_dir ? entry->pw_dir : "";
  }
  if (!home.starts_with('/'))
    return FailedPrecondition("no home directory for the default key set (set HOME or XDG_CONFIG_HOME, or give keys)");
  return home + "/.config/gt/keys";
}

Result<DefaultKeySet> EnsureDefaultKeySet() {
  Result<std::string> dir = DefaultKeyDir();
  if (!dir.ok()) return dir.status();
  struct stat st {};
  if (::lstat(dir->c_str(), &st) != 0) {
    if (errno != ENOENT)  // another user's directory, most likely: never make one beside it
      return FailedPrecondition("cannot read the default key set " + *dir + ": " + std::strerror(errno));
    bool won = false;
    if (Status s = MakeKeySet(*dir, &won); !s.ok()) return s;
  }
  if (Status s = CheckKeySet(*dir); !s.ok()) return s;
  return DefaultKeySet{*dir};
}

bool IsThisMachineEndpoint(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0) return true;
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  const std::string host = TcpEndpointHost(endpoint);
  return IsLoopbackAddress(host) || IsWildcardAddress(host);
}

Result<CurveClientKeys> ResolveConnectKeys(const CurveClientKeys& given, const std::string& endpoint, bool insecure,
                                           const std::string& role, std::string* note) {
  if (given.enabled() || insecure || !IsThisMachineEndpoint(endpoint)) return given;
  Result<DefaultKeySet> set = EnsureDefaultKeySet();
  if (!set.ok()) return set.status();
  if (note) *note = ", keys in " + set->dir;
  return role == "worker" ? set->ForWorker() : set->ForClient();
}

}  // namespace gt
