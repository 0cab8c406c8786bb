"""Process cluster against the embedded default, in one run (issue 15).

Starts real clusters (one gt-dispatcher with the default manifest, so the sharding stage
runs, and gt-worker processes), all on this machine and, except the ipc reference, with
GT_LOCAL_IPC=0 in every service's and client's environment, so they talk over TCP loopback:

  tcp2      2 workers, LibTorch defaults      foundation (tcp), 2-worker matmul, throughput
  ipc2      2 workers, LibTorch defaults      foundation (ipc: GT_LOCAL_IPC left on, the client
                                              connects to 127.0.0.1:P and takes the ipc socket)
  tcp2-1t   2 workers, intra_op_threads: 1    2-worker matmul, one thread per worker
  tcp1      1 worker,  LibTorch defaults      1-worker matmul (all cores)
  tcp1-1t   1 worker,  intra_op_threads: 1    1-worker matmul, one thread

(intra_op_threads: 1 comes from a worker manifest, `backend: {plugin: torch, options:
{intra_op_threads: 1}}`: GT_INTRA_OP_THREADS only reaches the embedded default's workers.
It holds LibTorch's pool and OpenBLAS to one thread.)

Every measurement is a client in a fresh interpreter (`python -c`, JSON on stdout). A first
round warms every cluster up and is not counted (a fresh worker's first 2048x2048 matmuls
were up to 1.5x slower than later clients' on the same worker). The configurations of each
part are run back to back in every round, their order reversed every other round, so that a
change in the machine's load falls on all of them alike; ratios are taken within a round.
Parts:

  foundation  against the embedded default (no gt.connect; GT_WORKERS unset, so 2 workers):
              round trip: one add of 4 floats and its fetch, median of 300;
              pipelined: 2000 dependent adds of a 64x64 float32 tensor, then one fetch,
              median of 7, reported per op
  matmul      2048x2048 float32, A row-sharded over workers [0, 1] (signal config
              shard axis 0), B replicated (signal config replicated: true), both made
              before the timing; (A @ B).sum().item(), median of 7 after a warm-up. The
              same whole on the 1-worker clusters. Checked against numpy (the whole
              product, fetched) once, in the warm-up round.
  throughput  8 concurrent clients against tcp2 vs 1 client: each client, once every client
              is started and warm, runs 20 x (2000 dependent 64x64 adds + fetch); aggregate
              ops/s = all clients' ops / (last end - first start)

Prints per measure the median over the rounds, the min..max over the rounds, and the
median (min..max) of the per-round ratios.

    PYTHONPATH=build/python /usr/bin/python3 bench/cluster_bench.py [rounds]
"""

import glob
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from processes import free_port, stop_processes

REPO = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))

COMMON = r"""
import json, statistics, sys, time
import numpy as np
import gt
if sys.argv[1]:
    gt.connect(sys.argv[1])

def median_of(n, body):
    body()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        body()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
"""

FOUNDATION = COMMON + r"""
small = gt.from_numpy(np.ones(4, dtype=np.float32))
tile = gt.from_numpy(np.ones((64, 64), dtype=np.float32))
OPS = 2000

def round_trip():
    (small + 1).numpy()

def pipelined():
    x = tile
    for _ in range(OPS):
        x = x + 1
    assert x.numpy()[0, 0] == OPS + 1

print(json.dumps({"round_trip": median_of(300, round_trip), "per_op": median_of(7, pipelined) / OPS}))
"""

MATMUL = COMMON + r"""
mode, verify = sys.argv[2], sys.argv[3] == "1"
n = 2048
rng = np.random.default_rng(0)
a = rng.standard_normal((n, n), dtype=np.float32)
b = rng.standard_normal((n, n), dtype=np.float32)
if mode == "rows":
    gt.register_config("rows", gt.SignalConfig(shard=gt.ShardConfig(axis=0, workers=[0, 1])))
    gt.register_config("both", gt.SignalConfig(replicated=True))
    with gt.signal.context("rows"):
        A = gt.from_numpy(a)
    with gt.signal.context("both"):
        B = gt.from_numpy(b)
else:
    A, B = gt.from_numpy(a), gt.from_numpy(b)
err = None
if verify:
    want = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.abs((A @ B).numpy() - want).max() / np.abs(want).max())
gt.sync()
print(json.dumps({"matmul": median_of(7, lambda: (A @ B).sum().item()), "err": err}))
"""

THROUGHPUT = COMMON + r"""
OPS, RUNS = 2000, 20
tile = gt.from_numpy(np.ones((64, 64), dtype=np.float32))

def run():
    x = tile
    for _ in range(OPS):
        x = x + 1
    assert x.numpy()[0, 0] == OPS + 1

run()
print("ready", flush=True)
sys.stdin.readline()
start = time.perf_counter()  # CLOCK_MONOTONIC: comparable between processes
for _ in range(RUNS):
    run()
end = time.perf_counter()
print(json.dumps({"start": start, "end": end, "ops": OPS * RUNS}), flush=True)
"""

CLUSTERS = {  # name: (workers, intra-op threads or None, tcp only)
    "tcp2": (2, None, True),
    "ipc2": (2, None, False),
    "tcp2-1t": (2, 1, True),
    "tcp1": (1, None, True),
    "tcp1-1t": (1, 1, True),
}


def base_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "build" / "python")] +
                                        [p for p in [os.environ.get("PYTHONPATH")] if p])
    for var in ("GT_WORKERS", "GT_INTRA_OP_THREADS", "GT_LOCAL_IPC", "GT_CONFIG", "GT_AUTO_SHARD", "GT_COMPILE",
                "GT_WORKER_BATCH_SIZE", "GT_CLIENT_MANIFEST", "GT_EXPLAIN", "GT_INSTRUCTION_LOG"):
        env.pop(var, None)
    return env


def cluster_env(tcp_only):
    env = base_env()
    if tcp_only:
        env["GT_LOCAL_IPC"] = "0"
    return env


# GT_INTRA_OP_THREADS only reaches the embedded default's workers; a gt-worker process takes
# the torch backend's intra_op_threads from its manifest.
WORKER_MANIFEST = """host: worker
id: worker-0
stages: []
backend:
  plugin: torch
  options: {intra_op_threads: %d}
"""


def start_cluster(workers, threads, tcp_only, procs, tmp):
    port, metrics = free_port(), free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": cluster_env(tcp_only)}
    procs.append(subprocess.Popen([str(BIN / "gt-dispatcher"), "--listen", f"tcp://127.0.0.1:{port}",
                                   "--metrics", f"127.0.0.1:{metrics}"], **quiet))
    manifest = []
    if threads is not None:
        path = pathlib.Path(tmp) / f"worker-{threads}t.yaml"
        path.write_text(WORKER_MANIFEST % threads)
        manifest = ["--manifest", str(path)]
    for k in range(workers):
        procs.append(subprocess.Popen([str(BIN / "gt-worker"), *manifest, "--connect", f"127.0.0.1:{port}",
                                       "--id", f"worker-{k}"], **quiet))
    return port, metrics


def wait_for_workers(metrics, workers, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=2).read().decode()
            for line in text.splitlines():
                if line.startswith("gt_host_workers_connected") and float(line.split()[-1]) >= workers:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"cluster with metrics on {metrics}: {workers} workers did not connect within {timeout} s")


def run_client(code, args, env, label):
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"client {label} failed (rc {out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def throughput(address, clients, env):
    procs = []
    try:
        for _ in range(clients):
            procs.append(subprocess.Popen([sys.executable, "-c", THROUGHPUT, address], env=env, text=True,
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        for p in procs:  # every client is started, connected and warm
            line = p.stdout.readline()
            if line.strip() != "ready":
                sys.exit(f"throughput client failed:\n{line}{p.stderr.read()}")
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=300)
            if p.returncode != 0:
                sys.exit(f"throughput client failed (rc {p.returncode}):\n{err}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    return {"ops_per_s": sum(r["ops"] for r in results) / span, "span": span}


def ordered(names, r):
    return names if r % 2 == 0 else names[::-1]


def stats(values):
    return statistics.median(values), min(values), max(values)


def fmt(triple, spec, unit=""):
    m, lo, hi = triple
    return f"{m:{spec}}{unit} ({lo:{spec}}..{hi:{spec}})"


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("cluster_bench: terminated"))  # so that `finally` runs
    load_start = os.getloadavg()
    procs, addresses = [], {}
    tmp = tempfile.TemporaryDirectory(prefix="gt-cluster-bench-")
    try:
        metrics = {}
        for name, (workers, threads, tcp_only) in CLUSTERS.items():
            port, metrics[name] = start_cluster(workers, threads, tcp_only, procs, tmp.name)
            addresses[name] = f"127.0.0.1:{port}"
        for name, (workers, _, _) in CLUSTERS.items():
            wait_for_workers(metrics[name], workers)
        for name, (_, _, tcp_only) in CLUSTERS.items():  # only ipc2's dispatcher binds the local ipc socket
            port = addresses[name].rsplit(":", 1)[1]
            if bool(glob.glob(f"/tmp/gt-dispatcher-*-{port}.sock")) == tcp_only:
                sys.exit(f"{name}: expected {'no ' if tcp_only else ''}ipc socket for port {port}")
        tcp_env, ipc_env = cluster_env(True), cluster_env(False)

        found = {name: [] for name in ("embedded", "tcp", "ipc")}
        mm = {name: [] for name in ("2w x 2t", "2w x 1t", "1w x 2t", "1w x 1t")}
        thr = {name: [] for name in ("1 client", "8 clients")}
        errors = []
        for r in range(-1, rounds):  # round -1 warms every cluster up (and checks the matmul); not counted
            keep = (lambda store, value: store.append(value)) if r >= 0 else (lambda store, value: None)
            t0 = time.monotonic()
            for name in ordered(["embedded", "tcp", "ipc"], r):
                address = {"embedded": "", "tcp": addresses["tcp2"], "ipc": addresses["ipc2"]}[name]
                keep(found[name], run_client(FOUNDATION, [address], ipc_env if name == "ipc" else tcp_env,
                                             f"foundation {name}"))
            for name in ordered(list(mm), r):
                cluster, mode = {"2w x 2t": ("tcp2", "rows"), "2w x 1t": ("tcp2-1t", "rows"),
                                 "1w x 2t": ("tcp1", "whole"), "1w x 1t": ("tcp1-1t", "whole")}[name]
                res = run_client(MATMUL, [addresses[cluster], mode, "1" if r < 0 else "0"], tcp_env,
                                 f"matmul {name}")
                if res["err"] is not None:
                    errors.append((name, res["err"]))
                    if res["err"] > 1e-4:
                        sys.exit(f"matmul {name}: relative error {res['err']:.2e} against numpy")
                keep(mm[name], res["matmul"])
            for name in ordered(list(thr), r):
                keep(thr[name], throughput(addresses["tcp2"], 1 if name == "1 client" else 8, tcp_env))
            if r >= 0:
                print(f"round {r} ({time.monotonic() - t0:.0f} s): "
                      f"{json.dumps({k: v[-1] for k, v in found.items()})} "
                      f"{json.dumps({k: v[-1] for k, v in mm.items()})} "
                      f"{json.dumps({k: v[-1] for k, v in thr.items()})}", file=sys.stderr)
            else:
                print(f"warm-up round ({time.monotonic() - t0:.0f} s)", file=sys.stderr)

        load_end = os.getloadavg()
        print(f"{rounds} rounds; {os.cpu_count()} CPUs; load average (1/5/15 min) "
              f"{'/'.join(f'{x:.2f}' for x in load_start)} at the start, "
              f"{'/'.join(f'{x:.2f}' for x in load_end)} at the end")
        print("matmul checked against numpy (float64), max relative error: " +
              ", ".join(f"{n} {e:.1e}" for n, e in errors))
        print("\nfoundation (tcp, ipc: 2-worker process clusters; embedded: the embedded default, 2 workers)")
        print(f"{'measure':<22} {'embedded':>24} {'tcp':>24} {'ipc':>24} {'tcp/embedded':>20} {'ipc/embedded':>20}")
        for measure, label, scale in (("round_trip", "round trip (us)", 1e6), ("per_op", "pipelined, per op (us)", 1e6)):
            cells = [fmt(stats([x[measure] * scale for x in found[n]]), ".1f") for n in ("embedded", "tcp", "ipc")]
            ratios = [fmt(stats([t[measure] / e[measure] for t, e in zip(found[n], found["embedded"])]), ".2f")
                      for n in ("tcp", "ipc")]
            print(f"{label:<22} {cells[0]:>24} {cells[1]:>24} {cells[2]:>24} {ratios[0]:>20} {ratios[1]:>20}")

        print("\n2048x2048 float32 matmul + sum + item (ms); w = worker processes, t = intra-op threads per worker")
        for name, values in mm.items():
            print(f"  {name:<10} {fmt(stats([v * 1e3 for v in values]), '.1f')}")
        for label, one, two in (("speedup 1w x 2t / 2w x 2t (defaults)", "1w x 2t", "2w x 2t"),
                                ("speedup 1w x 2t / 2w x 1t (2 threads each side)", "1w x 2t", "2w x 1t"),
                                ("speedup 1w x 1t / 2w x 1t (1 thread per worker)", "1w x 1t", "2w x 1t")):
            print(f"  {label:<48} {fmt(stats([o / t for o, t in zip(mm[one], mm[two])]), '.2f')}")

        print("\nthroughput against tcp2: each client 20 x (2000 dependent 64x64 adds + fetch)")
        for name, values in thr.items():
            print(f"  {name:<10} {fmt(stats([v['ops_per_s'] / 1e3 for v in values]), '.1f', ' kops/s')}")
        print(f"  ratio 8 clients / 1 client  "
              f"{fmt(stats([e['ops_per_s'] / o['ops_per_s'] for e, o in zip(thr['8 clients'], thr['1 client'])]), '.2f')}")
    finally:
        stop_processes(procs)
        tmp.cleanup()


if __name__ == "__main__":
    main()
