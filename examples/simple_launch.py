"""Launching a cluster by hand, the seed's way: `python -m gt.server` and
`python -m gt.worker`, then a client that connects to them.

    PYTHONPATH=build/python /usr/bin/python3 examples/simple_launch.py [--workers N] [--port P]

The same processes on the command line (separate terminals or machines):

    python3 -m gt.server -p 12345
    python3 -m gt.worker --host localhost -p 12345 --id worker-0
    python3 -m gt.worker --host localhost -p 12345 --id worker-1

gt.server / gt.worker run the gt-dispatcher / gt-worker binaries, found in
$GT_BIN_DIR, else next to the package (build/bin for build/python), else on
PATH. This script starts them as child processes on a free port, connects
with gt.connect, computes something checked against NumPy, and stops them.
"""

import argparse
import socket
import subprocess
import sys
import time

import numpy as np

import gt


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_workers(n, timeout=30.0):
    """The worker ids that registered, once n have (or the timeout passed)."""
    deadline = time.monotonic() + timeout
    while True:
        hosts = gt.debug.get_worker_stats()
        live = sorted(k for k, h in hosts.items() if h is not None and h["host"] == "worker")
        if len(live) >= n or time.monotonic() > deadline:
            return live
        time.sleep(0.1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=0, help="0: a free one")
    args = parser.parse_args()
    port = args.port or free_port()

    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.STDOUT}
    procs = [subprocess.Popen([sys.executable, "-m", "gt.server", "-p", str(port), "--host", "127.0.0.1"], **quiet)]
    try:
        for i in range(args.workers):
            procs.append(subprocess.Popen([sys.executable, "-m", "gt.worker", "--host", "localhost", "-p", str(port),
                                           "--id", f"worker-{i}"], **quiet))
        print(f"started gt.server on port {port} and {args.workers} gt.worker process(es)")

        gt.connect(f"localhost:{port}")
        live = wait_for_workers(args.workers)
        print(f"workers registered with the dispatcher: {', '.join(live)}")

        rng = np.random.default_rng(5)
        a_np = rng.standard_normal((64, 32)).astype(np.float32)
        b_np = rng.standard_normal((32, 16)).astype(np.float32)
        c = (gt.tensor(a_np) @ gt.tensor(b_np)).relu().sum(dim=0)
        want = np.maximum(a_np @ b_np, 0).sum(axis=0)
        ok = np.allclose(c.numpy(), want, rtol=1e-4, atol=1e-4)
        print(f"relu(a @ b).sum(0) over tcp://127.0.0.1:{port}: {'equals' if ok else 'DIFFERS from'} NumPy's"
              f" (first values {np.round(c.numpy()[:3].astype(np.float64), 4).tolist()})")
        gt.shutdown()  # the session ends before its dispatcher does
        return 0 if ok and len(live) == args.workers else 1
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        print("stopped the server and workers")


if __name__ == "__main__":
    raise SystemExit(main())
