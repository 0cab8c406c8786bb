"""Process helpers the Python benchmarks share: a free TCP port, and
stopping the clusters they start."""

import socket
import subprocess


def free_port():
    """A TCP port of 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_processes(procs, timeout=10):
    """SIGTERM to every process (in the given order), then waits, killing
    one that has not stopped within `timeout` seconds."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
