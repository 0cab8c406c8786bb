// The per-user default CURVE key set (docs/SECURITY.md, "Keys by default").
//
// A dispatcher, worker or client started without keys and without an
// explicit opt-out (--insecure, GT_INSECURE) uses one key set per user of
// the machine, so that everything one user starts agrees without any
// configuration and every other local user is refused in the handshake:
//
//   $XDG_CONFIG_HOME/gt/keys/   (else ~/.config/gt/keys/), mode 0700
//     dispatcher.key  dispatcher.pub   the dispatcher's pair (the CURVE server)
//     worker.key      worker.pub       every worker's pair (the workers list)
//     client.key      client.pub       every client's pair (the clients list)
//   every file mode 0600, owned by the user.
//
// The first process that needs it makes it: in a fresh directory beside
// it, renamed into place, so that concurrent first starts agree on one set
// (the loser of the rename removes its own and reads the winner's). A set
// that others could read or replace is refused, naming the fix.
//
// Thread-safety: free functions; concurrent callers (threads or processes)
// get the same set.
#pragma once

#include <string>

#include "gt/status.h"
#include "net/curve_keys.h"

namespace gt {

struct DefaultKeySet {
  std::string dir;
  std::string File(const std::string& name) const { return dir + "/" + name; }
  // The dispatcher's security settings and a worker's or client's keys.
  std::string DispatcherKey() const { return File("dispatcher.key"); }
  std::string ClientKeys() const { return File("client.pub"); }
  std::string WorkerKeys() const { return File("worker.pub"); }
  CurveClientKeys ForWorker() const { return {File("worker.key"), File("dispatcher.pub")}; }
  CurveClientKeys ForClient() const { return {File("client.key"), File("dispatcher.pub")}; }
};

// Where this user's set lives (it need not exist): $XDG_CONFIG_HOME/gt/keys
// when that is an absolute path, else $HOME/.config/gt/keys, else the same
// under the password database's home directory.
Result<std::string> DefaultKeyDir();

// This user's set, made when it does not exist yet. An error names the
// directory and what is wrong with it (made by another user, readable by
// others, a file missing) and how to fix it.
Result<DefaultKeySet> EnsureDefaultKeySet();

// True where the default set applies to a connection: an ipc:// endpoint or
// a tcp one to a loopback or wildcard host (this machine). Not inproc (the
// embedded default stays without keys) and not another machine's address
// (its dispatcher's keys are given explicitly).
bool IsThisMachineEndpoint(const std::string& endpoint);

// The keys a client or worker connects to `endpoint` with: `given` when it
// names any file; none when `insecure` or when `endpoint` is not this
// machine's; else this user's default set's (made if absent) for `role`
// ("worker" or "client"). `note` (when not null) is set to ", keys in DIR"
// when the default set was taken, for the process's first line.
Result<CurveClientKeys> ResolveConnectKeys(const CurveClientKeys& given, const std::string& endpoint, bool insecure,
                                           const std::string& role, std::string* note = nullptr);

}  // namespace gt
