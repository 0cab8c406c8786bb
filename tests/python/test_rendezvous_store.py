"""The collective rendezvous store is no open door (issue 39,
docs/SECURITY.md): the dispatcher's sharding stage serves it only on its own
listen host, answers only requests that carry the store's secret (told only
to registered workers, inside collectives), and bounds what it keeps, so a
stranger who reaches its port reads nothing, writes nothing, and cannot grow
the dispatcher; collectives between real worker processes still work.

Real gt-dispatcher / gt-worker processes; the stranger is raw ZeroMQ
(tests/python/raw_zmq.py).
"""

import struct
import textwrap
import time

import numpy as np

import raw_zmq
from conftest import _free_port
from test_cluster import Cluster, require_services, run_client

MIB = 1 << 20
OK, MISSING, REFUSED, TOO_LARGE = 0, 1, 2, 3


def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def listening_addresses(port):
    """The local addresses of TCP sockets listening on `port` (hex, as /proc/net/tcp has them)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if int(hex_port, 16) == port and fields[3] == "0A":  # LISTEN
                found.append(address)
    return found


class StoreCluster(Cluster):
    def __init__(self, tmp_path, workers=2, host=None):
        self.store_port = _free_port()
        at = f", rendezvous_host: {host}" if host else ""
        manifest = tmp_path / "dispatcher.yaml"
        manifest.write_text(textwrap.dedent(f"""\
            host: dispatcher
            stages:
              - {{name: sharding, plugin: sharding, options: {{rendezvous_port: {self.store_port}, explain: true{at}}}}}
        """))
        super().__init__(["--manifest", str(manifest)])
        for i in range(workers):
            self.add_worker(f"worker-{i}")
            self.wait_for_workers(i + 1)


def request(peer, request_id, secret, op, *args):
    peer.send(struct.pack("<Q", request_id), secret, op, *args)
    frames = [peer.recv() for _ in range(3)]
    assert frames[0] == struct.pack("<Q", request_id), frames
    return frames[1][0], frames[2]


def test_a_stranger_on_the_store_port_gets_nothing_and_cannot_grow_the_dispatcher(tmp_path):
    require_services()
    c = StoreCluster(tmp_path)
    try:
        # Only the dispatcher's listen host (127.0.0.1), not every interface.
        assert listening_addresses(c.store_port) == ["0100007F"], listening_addresses(c.store_port)
        # A collective forms its group there, so the store holds keys now.
        out = run_client(c.endpoint, """
    gt.register_config("rows", gt.SignalConfig(shard=gt.ShardConfig(axis=0, workers=[0, 1])))
    with gt.signal.context("rows"):
        a = gt.from_numpy(np.arange(8, dtype=np.float32).reshape(4, 2))
    say(total=a.sum().item())
""")
        assert out["total"] == 28.0
        assert "all_reduce" in open(c.log.name).read()  # the explain log: a collective ran
        peer = raw_zmq.Dealer(f"tcp://127.0.0.1:{c.store_port}")
        try:
            guess = b"0" * 32
            assert request(peer, 1, guess, b"N") == (REFUSED, b"")
            assert request(peer, 2, guess, b"G", b"gt/" + guess + b"/lost/0") == (REFUSED, b"")
            assert request(peer, 3, b"", b"S", b"k", b"v") == (REFUSED, b"")
            before = rss(c.procs[0].pid)
            big = b"x" * MIB
            for i in range(300):  # past ZMQ_MAXMSGSIZE: each closes its connection unread
                peer.send(struct.pack("<Q", 100 + i), guess, b"S", b"k%d" % i, big)
            near = b"y" * (60 << 10)
            for i in range(2000):  # within the size bound, without the secret: refused, nothing kept
                peer.send(struct.pack("<Q", 10000 + i), guess, b"S", b"n%d" % i, near)
            time.sleep(2)
            grown = rss(c.procs[0].pid) - before
            print(f"dispatcher RSS grew {grown / MIB:.1f} MiB under the stranger's writes")
            # Before issue 39, 300 writes of 1 MiB took it from 157 to 455 MiB.
            assert grown < 32 * MIB, grown / MIB
        finally:
            peer.close()
        # The cluster's collectives still work.
        out = run_client(c.endpoint, """
    gt.register_config("rows", gt.SignalConfig(shard=gt.ShardConfig(axis=0, workers=[0, 1])))
    with gt.signal.context("rows"):
        b = gt.from_numpy(np.ones((6, 3), dtype=np.float32))
    say(total=(b * 2).sum().item())
""")
        assert out["total"] == 36.0
    finally:
        c.stop()


def test_a_store_named_by_host_name_binds_that_names_addresses_only(tmp_path):
    """libzmq binds addresses, not names: `rendezvous_host: localhost` binds
    what localhost resolves to (127.0.0.1), never every interface."""
    require_services()
    c = StoreCluster(tmp_path, host="localhost")
    try:
        assert listening_addresses(c.store_port) == ["0100007F"], listening_addresses(c.store_port)
        out = run_client(c.endpoint, """
    gt.register_config("rows", gt.SignalConfig(shard=gt.ShardConfig(axis=0, workers=[0, 1])))
    with gt.signal.context("rows"):
        a = gt.from_numpy(np.arange(8, dtype=np.float32).reshape(4, 2))
    say(total=a.sum().item())
""")
        assert out["total"] == 28.0
        assert "all_reduce" in open(c.log.name).read()
    finally:
        c.stop()
