"""Local transport: tcp://127.0.0.1 against ipc:// for a client on the same machine.

Starts two real clusters (one gt-dispatcher and one gt-worker each), one
listening on tcp://127.0.0.1:PORT and one on ipc://PATH, and runs a client
process against each in turn, alternating the two `rounds` times so that a
change in the machine's load falls on both alike. Each client measures:

  round trip   one small add (4 floats) and its fetch, median of 300
  pipelined    2000 dependent small adds, then one fetch, median of 7
  64 MiB       from_numpy of 64 MiB of float32, then its fetch, median of 7

Prints, per measure, the median over the rounds of each transport's medians,
the spread (min..max over the rounds), and the median of the per-round ratios
ipc/tcp with their spread (below 1: ipc is faster). Explicit endpoints are used on both sides (no automatic choice).

    PYTHONPATH=build/python /usr/bin/python3 bench/transport_bench.py [rounds]
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from processes import free_port, stop_processes

REPO = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))

CLIENT = r"""
import json, statistics, sys, time
import numpy as np
import gt
gt.connect(sys.argv[1])
small = gt.from_numpy(np.ones(4, dtype=np.float32))

def median_of(n, body):
    body()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        body()
        times.append(time.perf_counter() - start)
    return statistics.median(times)

def round_trip():
    (small + 1).numpy()

def pipelined():
    x = small
    for _ in range(2000):
        x = x + 1
    x.numpy()

big = np.random.default_rng(0).random(16 << 20, dtype=np.float32)  # 64 MiB
def transfer():
    assert gt.from_numpy(big).numpy().nbytes == big.nbytes

print(json.dumps({"round_trip": median_of(300, round_trip), "pipelined": median_of(7, pipelined),
                  "64MiB": median_of(7, transfer)}))
"""


def start_cluster(endpoint, env):
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.STDOUT, "env": env}
    return [subprocess.Popen([str(BIN / "gt-dispatcher"), "--listen", endpoint], **quiet),
            subprocess.Popen([str(BIN / "gt-worker"), "--connect", endpoint, "--id", "worker-0"], **quiet)]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    env = dict(os.environ, GT_LOCAL_IPC="0")  # the tcp side stays tcp whatever the client does by default
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "build" / "python")] +
                                        [p for p in [os.environ.get("PYTHONPATH")] if p])
    tmp = tempfile.mkdtemp(prefix="gt-transport-bench-")
    endpoints = {"tcp": f"tcp://127.0.0.1:{free_port()}", "ipc": f"ipc://{tmp}/dispatcher.sock"}
    procs = []
    try:
        for endpoint in endpoints.values():
            procs += start_cluster(endpoint, env)
        time.sleep(1.0)
        results = {name: [] for name in endpoints}
        for r in range(rounds):
            for name in (("tcp", "ipc") if r % 2 == 0 else ("ipc", "tcp")):
                out = subprocess.run([sys.executable, "-c", CLIENT, endpoints[name]], env=env, capture_output=True,
                                     text=True, timeout=600)
                if out.returncode != 0:
                    sys.exit(f"client on {endpoints[name]} failed:\n{out.stderr}")
                results[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"round {r} {name}: {results[name][-1]}", file=sys.stderr)
        print(f"{rounds} rounds, load average {os.getloadavg()[0]:.2f} at the end, {os.cpu_count()} CPUs")
        print(f"{'measure':<12} {'tcp median (min..max)':>26} {'ipc median (min..max)':>26} "
              f"{'ipc/tcp, per round (min..max)':>30}")
        for measure, unit, scale in (("round_trip", "us", 1e6), ("pipelined", "ms", 1e3), ("64MiB", "ms", 1e3)):
            cells = []
            for name in ("tcp", "ipc"):
                values = [res[measure] * scale for res in results[name]]
                cells.append((statistics.median(values), min(values), max(values)))
            text = [f"{m:.1f} {unit} ({lo:.1f}..{hi:.1f})" for m, lo, hi in cells]
            # The same round's two clients ran back to back: their ratio is the least noisy figure.
            ratios = [i[measure] / t[measure] for t, i in zip(results["tcp"], results["ipc"])]
            ratio = f"{statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f})"
            print(f"{measure:<12} {text[0]:>26} {text[1]:>26} {ratio:>30}")
    finally:
        stop_processes(procs)


if __name__ == "__main__":
    main()
