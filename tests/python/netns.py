"""Linux network namespaces as stand-in hosts, for tests of gt across machines.

    from netns import namespaces, skip_reason

    if skip_reason():
        pytest.skip(skip_reason())
    with namespaces(3) as hosts:            # [Host(name, address), ...]
        subprocess.run(hosts[0].cmd("ip", "-br", "addr"))   # ip netns exec NAME ...

Each namespace is a host of its own: its `lo` is up, and one veth interface
(`gt0`) carries its own address, 10.77.0.1/24, .2, .3, ... in the order
given. The other ends of the veths are enslaved to one bridge that lives in
a further "switch" namespace, not in the root namespace: nothing is added to
the machine's own interfaces, its firewall (iptables, br_netfilter) never
sees the traffic, and since every namespace has its own routing table the
subnet cannot clash with anything the machine routes (nor with another run,
which has its own namespaces). The namespaces are named
`gtns<pid>-<run>-<i>` (and `...-sw`), so parallel runs do not clash.

Teardown, on exit from the `with` block however it comes: every process still
inside one of these namespaces (ip netns pids; they can only be processes
the caller started there) is killed, then every namespace is deleted, which
deletes the veths and the bridge with them. Namespaces left by a run that
was killed before its teardown (`gtns<pid>-...` whose pid is gone) are
removed by the next `namespaces()`.

Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2's `ip`;
skip_reason() says in one line why it cannot run here, else returns None.
"""

import contextlib
import dataclasses
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import time

SUBNET = "10.77.0"  # /24; host i (0-based) is SUBNET.(i+1)
PREFIX = "gtns"
_run_counter = itertools.count()
_skip_reason = ...  # not probed yet


@dataclasses.dataclass(frozen=True)
class Host:
    name: str     # the namespace
    address: str  # its address on the shared bridge, e.g. 10.77.0.2

    def cmd(self, *argv):
        """argv run inside this namespace: ['ip', 'netns', 'exec', NAME, *argv]."""
        return ["ip", "netns", "exec", self.name, *map(str, argv)]


def _ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: exit status {r.returncode}: {r.stderr.strip()}")
    return r


def list_namespaces():
    """Names of every network namespace `ip netns` knows."""
    r = _ip("netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def skip_reason():
    """None when namespaces with veths and a bridge can be made here; else
    why not, in one line (for pytest.skip). Probes once per process by
    making and deleting a namespace holding a bridge and a veth pair."""
    global _skip_reason
    if _skip_reason is ...:
        _skip_reason = _probe()
    return _skip_reason


def _probe():
    if os.name != "posix" or not os.path.exists("/proc/self/ns/net"):
        return "network namespaces need Linux (/proc/self/ns/net is missing)"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not on PATH: cannot make network namespaces"
    if os.geteuid() != 0:
        return f"making network namespaces needs root (running as uid {os.geteuid()})"
    name = f"{PREFIX}{os.getpid()}-probe"
    try:
        r = _ip("netns", "add", name, check=False)
        if r.returncode != 0:
            return (f"`ip netns add` fails here ({r.stderr.strip() or 'exit status ' + str(r.returncode)}): "
                    "an unprivileged container or no CAP_SYS_ADMIN")
        for args, what in [(("link", "add", "gtbr", "type", "bridge"), "a bridge"),
                           (("link", "add", "gtv0", "type", "veth", "peer", "name", "gtv1"), "a veth pair")]:
            r = _ip("-n", name, *args, check=False)
            if r.returncode != 0:
                return f"cannot make {what} in a network namespace: ip {' '.join(args)}: {r.stderr.strip()}"
        r = subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 0:
            return f"`ip netns exec` fails here: {r.stderr.strip() or 'exit status ' + str(r.returncode)}"
        return None
    finally:
        _ip("netns", "del", name, check=False)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_inside(name):
    """SIGKILLs every process still in namespace `name`; waits (up to 5 s) until none is."""
    deadline = time.monotonic() + 5
    while True:
        r = _ip("netns", "pids", name, check=False)
        pids = [int(p) for p in r.stdout.split() if p.isdigit() and int(p) != os.getpid()]
        if not pids or time.monotonic() > deadline:
            return pids
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _delete(names):
    """Kills what runs in each namespace, then deletes it; returns the problems."""
    problems = []
    for name in names:
        left = _kill_inside(name)
        if left:
            problems.append(f"{name}: processes {left} did not die")
        r = _ip("netns", "del", name, check=False)
        if r.returncode != 0 and name in list_namespaces():
            problems.append(f"{name}: ip netns del: {r.stderr.strip()}")
    return problems


def remove_stale():
    """Deletes namespaces named by this module for a process that is gone."""
    stale = [n for n in list_namespaces()
             if (m := re.fullmatch(rf"{PREFIX}(\d+)-.*", n)) and not _pid_alive(int(m.group(1)))]
    _delete(stale)
    return stale


@contextlib.contextmanager
def namespaces(n):
    """Makes `n` namespaces on one bridge; yields [Host(name, address)] in
    order (addresses SUBNET.1 .. SUBNET.n). Always tears everything down."""
    if not 1 <= n <= 250:
        raise ValueError(f"namespaces: n must be 1..250, got {n}")
    remove_stale()
    base = f"{PREFIX}{os.getpid()}-{next(_run_counter)}"
    switch = f"{base}-sw"
    hosts = [Host(f"{base}-{i}", f"{SUBNET}.{i + 1}") for i in range(n)]
    made = []
    try:
        for name in [switch] + [h.name for h in hosts]:
            _ip("netns", "add", name)
            made.append(name)
        _ip("-n", switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", switch, "link", "set", "br0", "up")
        for i, h in enumerate(hosts):
            # Both ends made inside their namespaces: no interface ever
            # appears in the root namespace, even for a moment.
            _ip("-n", switch, "link", "add", f"p{i}", "type", "veth", "peer", "name", "gt0", "netns", h.name)
            _ip("-n", switch, "link", "set", f"p{i}", "master", "br0")
            _ip("-n", switch, "link", "set", f"p{i}", "up")
            _ip("-n", h.name, "link", "set", "lo", "up")
            _ip("-n", h.name, "addr", "add", f"{h.address}/24", "dev", "gt0")
            _ip("-n", h.name, "link", "set", "gt0", "up")
        _wait_reachable(hosts)
        yield hosts
    finally:
        problems = _delete(list(reversed(made)))
        if problems:
            raise RuntimeError("network namespace teardown: " + "; ".join(problems))


def _wait_reachable(hosts, timeout=10.0):
    """Waits until the first host's address answers a TCP connect attempt
    (refused counts: the packet got there) from every other host; a new
    veth can take a moment (duplicate address detection, bridge learning)."""
    if len(hosts) < 2:
        return
    target = hosts[0].address
    probe = ("import socket,sys\n"
             "s=socket.socket(); s.settimeout(1)\n"
             "try: s.connect((sys.argv[1], 9))\n"
             "except ConnectionRefusedError: sys.exit(0)\n"
             "except OSError: sys.exit(1)\n")
    deadline = time.monotonic() + timeout
    for h in hosts[1:]:
        while True:
            r = subprocess.run(h.cmd(sys.executable, "-c", probe, target), capture_output=True, timeout=30)
            if r.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{h.name} ({h.address}) cannot reach {target} within {timeout}s")
            time.sleep(0.1)
