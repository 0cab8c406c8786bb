"""Fair sharing of one worker (issue 38): a light client next to a heavy one.

Starts a process cluster (gt-dispatcher and ONE gt-worker, from GT_BIN_DIR or build/bin)
and runs, each client in a fresh interpreter:

  light solo     (a + a).numpy() on 64x64 float32, LIGHT_ITERS times: p50 / p99 latency
  heavy solo     rounds of 40 pipelined 768x768 matmuls, then a fetch of the last one,
                 for HEAVY_SECONDS: matmuls per second
  light + heavy  both at once: the light client's p50 / p99 while the heavy client keeps
                 its queue of matmuls on the worker, and the heavy client's matmuls/s

The worker serves one fair-queue lane per client (core/worker/fair_queue.h), so the light
client waits for at most the heavy op in progress (and what is left of a 2 ms slice), not
for the heavy client's whole queue. Prints one JSON object; docs/performance/fair-sharing.md has the
figures, before and after.

  light + flood  the light client's p50 / p99 while another floods the worker with rounds of
                 20000 dependent 128x128 adds
  pipelined      one client alone: 2000 dependent 64x64 adds, then a fetch (us per op)

  /usr/bin/python3 bench/fair_share_bench.py [--light-iters 200] [--heavy-seconds 6]

GT_BIN_DIR picks the gt-dispatcher / gt-worker to measure (e.g. a build of the commit before).
"""

import argparse
import contextlib
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from processes import stop_processes  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]

LIGHT = r"""
import json, sys, time
import numpy as np
import gt
gt.connect(sys.argv[1])
iters = int(sys.argv[2])
a = gt.from_numpy(np.ones((64, 64), np.float32))
for _ in range(20):
    (a + a).numpy()
ready, go = sys.argv[3], sys.argv[4]
if ready:
    open(ready, "w").close()
    while go and not __import__("os").path.exists(go):
        time.sleep(0.01)
times = []
for _ in range(iters):
    t = time.perf_counter()
    out = (a + a).numpy()
    times.append(time.perf_counter() - t)
assert float(out[0, 0]) == 2.0
times.sort()
print(json.dumps({"p50_ms": 1e3 * times[len(times) // 2], "p99_ms": 1e3 * times[int(len(times) * 0.99) - 1],
                  "max_ms": 1e3 * times[-1]}))
"""

# One client alone: 2000 dependent adds of 64x64, then one fetch (median of 7 runs, per op):
# what fair queueing must not make slower.
PIPELINED = r"""
import json, sys, time
import numpy as np
import gt
gt.connect(sys.argv[1])
a = gt.from_numpy(np.ones((64, 64), np.float32))
runs = []
for _ in range(8):
    t = time.perf_counter()
    x = a
    for _ in range(2000):
        x = x + a
    x.numpy()
    runs.append(time.perf_counter() - t)
runs = sorted(runs[1:])
print(json.dumps({"us_per_op": 1e6 * runs[len(runs) // 2] / 2000}))
"""

HEAVY = r"""
import json, os, sys, time
import numpy as np
import gt
gt.connect(sys.argv[1])
seconds, depth, stop_file = float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(0)
a = gt.from_numpy(rng.standard_normal((768, 768)).astype(np.float32))
b = gt.from_numpy(rng.standard_normal((768, 768)).astype(np.float32))
want = a.numpy() @ b.numpy()
assert np.allclose((a @ b).numpy(), want, rtol=1e-3, atol=1e-2)
start, done, op_ms = time.perf_counter(), 0, []
while time.perf_counter() - start < seconds and not (stop_file and os.path.exists(stop_file)):
    t = time.perf_counter()
    c = [a @ b for _ in range(depth)]
    last = c[-1].numpy()
    op_ms.append(1e3 * (time.perf_counter() - t) / depth)
    done += depth
    del c
elapsed = time.perf_counter() - start
assert np.allclose(last, want, rtol=1e-3, atol=1e-2)
op_ms.sort()
print(json.dumps({"matmuls_per_s": done / elapsed, "op_ms": op_ms[len(op_ms) // 2], "rounds": len(op_ms)}))
"""


# A client that floods the worker with tiny ops: rounds of 20000 dependent 128x128 adds, then
# a fetch, until the file argv[2] exists.
FLOOD = r"""
import json, os, sys, time
import numpy as np
import gt
gt.connect(sys.argv[1])
stop = sys.argv[2]
a = gt.from_numpy(np.ones((128, 128), np.float32) * 1e-3)
rounds, ops, t0 = 0, 0, time.perf_counter()
while not os.path.exists(stop):
    x = a
    for _ in range(20000):
        x = x + a
    got = float(x.numpy()[0, 0])
    assert abs(got - 20001e-3) < 1e-2, got
    rounds, ops = rounds + 1, ops + 20000
print(json.dumps({"rounds": rounds, "us_per_op": 1e6 * (time.perf_counter() - t0) / max(ops, 1)}))
"""


@contextlib.contextmanager
def one_worker_cluster(dispatcher_manifest=None, env=None):
    """A gt-dispatcher on a free port and one gt-worker; yields "127.0.0.1:PORT"."""
    bin_dir = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))
    extra = ["--manifest", str(dispatcher_manifest)] if dispatcher_manifest else []
    full_env = {**os.environ, **(env or {})}
    with tempfile.NamedTemporaryFile("w+", prefix="gt-fair-", suffix=".log") as log:
        procs = [subprocess.Popen([str(bin_dir / "gt-dispatcher"), "--listen", "tcp://127.0.0.1:0"] + extra,
                                  stdout=log, stderr=subprocess.STDOUT, env=full_env)]
        try:
            deadline = time.monotonic() + 30
            while not (m := re.search(r"tcp://127\.0\.0\.1:(\d+)", pathlib.Path(log.name).read_text())):
                assert time.monotonic() < deadline and procs[0].poll() is None, pathlib.Path(log.name).read_text()
                time.sleep(0.05)
            endpoint = f"127.0.0.1:{m.group(1)}"
            procs.append(subprocess.Popen([str(bin_dir / "gt-worker"), "--connect", f"tcp://{endpoint}", "--id",
                                           "worker-0"], stdout=log, stderr=subprocess.STDOUT, env=full_env))
            time.sleep(0.5)
            yield endpoint
        finally:
            stop_processes(procs)


def client(program, *args, env=None):
    return subprocess.Popen([sys.executable, "-c", program, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def result(proc, timeout=600):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def light_next_to_heavy(endpoint, light_iters, heavy_seconds, depth=40, env=None):
    """The light client's latencies while the heavy client runs, and the heavy client's
    throughput meanwhile. The light client starts timing once the heavy one is under way
    and the heavy one stops when the light one is done."""
    with tempfile.TemporaryDirectory() as d:
        ready, stop = os.path.join(d, "ready"), os.path.join(d, "stop")
        light = client(LIGHT, endpoint, light_iters, ready, stop + ".go", env=env)
        while not os.path.exists(ready):
            time.sleep(0.01)
        heavy = client(HEAVY, endpoint, heavy_seconds, depth, stop, env=env)
        time.sleep(1.5)  # the heavy client connected, made its tensors and is queueing
        open(stop + ".go", "w").close()
        light_result = result(light)
        open(stop, "w").close()
        return light_result, result(heavy)


def light_next_to_flood(endpoint, light_iters):
    """The light client's latencies while a flooding client keeps the worker busy with tiny ops."""
    with tempfile.TemporaryDirectory() as d:
        stop = os.path.join(d, "stop")
        flood = client(FLOOD, endpoint, stop)
        time.sleep(3)  # connected and flooding
        light = result(client(LIGHT, endpoint, light_iters, "", ""))
        open(stop, "w").close()
        return light, result(flood)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--light-iters", type=int, default=200)
    parser.add_argument("--heavy-seconds", type=float, default=6.0)
    args = parser.parse_args()
    with one_worker_cluster() as endpoint:
        pipelined = result(client(PIPELINED, endpoint))
        light_solo = result(client(LIGHT, endpoint, args.light_iters, "", ""))
        heavy_solo = result(client(HEAVY, endpoint, args.heavy_seconds, 40, ""))
        light_mixed, heavy_mixed = light_next_to_heavy(endpoint, args.light_iters, 600)
        light_flooded, flood = light_next_to_flood(endpoint, args.light_iters)
    report = {"pipelined_solo": pipelined, "light_solo": light_solo, "heavy_solo": heavy_solo, "light_with_heavy": light_mixed,
              "heavy_with_light": heavy_mixed, "light_with_flood": light_flooded, "flood": flood,
              "p99_bound_ms": light_solo["p99_ms"] + 3 * heavy_solo["op_ms"],
              "heavy_throughput_ratio": heavy_mixed["matmuls_per_s"] / heavy_solo["matmuls_per_s"]}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
