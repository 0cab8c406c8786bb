"""Soak: a long MLP training loop on a process cluster, with every process's
memory sampled (issue 20, item 5).

Starts a real cluster (gt-dispatcher with the default manifest, so the sharding
stage runs, and two gt-worker processes, each serving /metrics), connects this
process to it and trains a 784-256-10 MLP (gt.nn.Linear, gt.optim.SGD with
momentum, MSE loss) data-parallel: the parameters replicated on both workers
(SignalConfig(replicated=True)), each step's batch of 128 rows made from NumPy
and sharded on its rows over workers 0 and 1, so every step sends a new batch,
runs the forward and backward passes on both workers, all-reduces the
gradients over Gloo, updates the parameters in place and frees the step's
tensors; loss.item() every step (the sync point). The batches cycle through 16
fixed ones, so the loss must fall.

Every --every steps it samples VmRSS (/proc/PID/status) of the dispatcher, each
worker and this client, and each worker's gt_worker_live_tensors and
gt_worker_resident_bytes (scraped over HTTP). The first --warmup steps are
warm-up. It prints the samples, then per process the RSS at the end of warm-up,
at the end, the growth between them and the least-squares slope over the
post-warm-up samples, and exits 1 when

  * any process's RSS at the end exceeds its RSS at the end of warm-up by more
    than --threshold-mib (default 8 MiB: over the default 9,000 steps after
    warm-up, a leak of 1 KiB a step fails), or
  * a worker holds more tensors or tensor bytes at the end than at the end of
    warm-up (the gauges are exact counts: any growth is a leak), or
  * the loss did not fall.

    PYTHONPATH=build/python /usr/bin/python3 bench/soak.py [--steps 10000] [--every 250] [--warmup 1000]
        [--threshold-mib 8] [--json FILE]
"""

import argparse
import datetime
import json
import os
import pathlib
import platform
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

import gt
from gt import ShardConfig, SignalConfig
from gt.nn import Linear, Module
from gt.optim import SGD
from processes import free_port, stop_processes

REPO = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))
WORKERS = 2
BATCH, BATCHES = 128, 16


class MLP(Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Linear(784, 256, seed=1)
        self.fc2 = Linear(256, 10, seed=2)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def gauges(address):
    text = urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode()
    values = {}
    for line in text.splitlines():
        if line.startswith(("gt_worker_live_tensors", "gt_worker_resident_bytes", "gt_host_workers_connected")):
            values[line.split("{", 1)[0].split(" ", 1)[0]] = float(line.rsplit(" ", 1)[1])
    return values


def start_cluster(procs, log_dir):
    env = dict(os.environ)
    for var in ("GT_WORKERS", "GT_INTRA_OP_THREADS", "GT_CONFIG", "GT_AUTO_SHARD", "GT_COMPILE",
                "GT_WORKER_BATCH_SIZE", "GT_CLIENT_MANIFEST", "GT_EXPLAIN", "GT_INSTRUCTION_LOG"):
        env.pop(var, None)
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    metrics = {"dispatcher": f"127.0.0.1:{free_port()}"}
    pids = {}

    def spawn(name, argv):
        log = open(pathlib.Path(log_dir) / f"{name}.log", "w")
        p = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        procs.append(p)
        pids[name] = p.pid

    spawn("dispatcher", [str(BIN / "gt-dispatcher"), "--listen", endpoint, "--metrics", metrics["dispatcher"]])
    for k in range(WORKERS):
        name = f"worker-{k}"
        metrics[name] = f"127.0.0.1:{free_port()}"
        spawn(name, [str(BIN / "gt-worker"), "--connect", endpoint, "--id", name, "--metrics", metrics[name]])
        deadline = time.monotonic() + 30
        while True:  # one at a time: worker-k has index k
            try:
                if gauges(metrics["dispatcher"]).get("gt_host_workers_connected") == k + 1:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit(f"soak: {name} did not register within 30 s (logs in {log_dir})")
            time.sleep(0.1)
    return endpoint, metrics, pids


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


def commit():
    try:
        out = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def slope_kib_per_kstep(points):
    steps = np.array([s for s, _ in points], np.float64)
    values = np.array([v for _, v in points], np.float64)
    if len(points) < 2 or np.ptp(steps) == 0:
        return 0.0
    return float(np.polyfit(steps, values, 1)[0] * 1000)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--every", type=int, default=250, help="sample every N steps")
    parser.add_argument("--warmup", type=int, default=1000, help="steps of warm-up")
    parser.add_argument("--threshold-mib", type=float, default=8.0,
                        help="largest allowed RSS growth of a process after warm-up")
    parser.add_argument("--json", help="write the samples and the summary to this file")
    args = parser.parse_args()
    if not (0 < args.warmup < args.steps and args.warmup % args.every == 0 and args.steps % args.every == 0):
        parser.error("need 0 < --warmup < --steps, both multiples of --every")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit("soak: terminated"))  # so that `finally` runs
    procs = []
    logs = tempfile.TemporaryDirectory(prefix="gt-soak-")
    started = datetime.datetime.now(datetime.timezone.utc)
    load_start = os.getloadavg()
    try:
        endpoint, metrics, pids = start_cluster(procs, logs.name)
        pids["client"] = os.getpid()
        gt.connect(endpoint)
        gt.register_config("data", SignalConfig(shard=ShardConfig(axis=0, workers=list(range(WORKERS)))))
        gt.register_config("params", SignalConfig(replicated=True))

        rng = np.random.default_rng(0)
        true_map = (rng.standard_normal((784, 10)) / np.sqrt(784)).astype(np.float32)
        batches = []
        for _ in range(BATCHES):
            x = rng.standard_normal((BATCH, 784)).astype(np.float32)
            batches.append((x, (x @ true_map + 0.1 * rng.standard_normal((BATCH, 10))).astype(np.float32)))
        with gt.signal.context("params"):
            model = MLP()
        optimizer = SGD(model.parameters(), lr=0.01, momentum=0.9)

        samples = []
        losses = np.empty(args.steps)  # preallocated: the client's RSS is gt's, not a growing list's
        t0 = time.perf_counter()

        def sample(step):
            row = {"step": step, "seconds": round(time.perf_counter() - t0, 2)}
            for name, pid in pids.items():
                row[f"{name}_rss_kib"] = rss_kib(pid)
            for name in pids:
                if name.startswith("worker-"):
                    g = gauges(metrics[name])
                    row[f"{name}_live_tensors"] = int(g["gt_worker_live_tensors"])
                    row[f"{name}_resident_bytes"] = int(g["gt_worker_resident_bytes"])
            samples.append(row)
            print(json.dumps(row), flush=True)

        sample(0)
        for step in range(1, args.steps + 1):
            x_np, y_np = batches[step % BATCHES]
            with gt.signal.context("data"):
                x, y = gt.from_numpy(x_np), gt.from_numpy(y_np)
                loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses[step - 1] = loss.item()
            del x, y, loss
            if step % args.every == 0:
                gt.sync()  # the step's frees have reached the workers
                sample(step)
        elapsed = time.perf_counter() - t0
    finally:
        stop_processes(list(reversed(procs)))

    warm = next(s for s in samples if s["step"] == args.warmup)
    end = samples[-1]
    # Half way from the end of warm-up to the end: growth after it says
    # whether what grew after warm-up is still growing.
    middle = min((s for s in samples if s["step"] >= (args.warmup + args.steps) / 2), key=lambda s: s["step"])
    post = [s for s in samples if s["step"] >= args.warmup]
    failures, summary = [], {}
    print(f"\nsoak: {args.steps} steps in {elapsed:.1f} s ({1000 * elapsed / args.steps:.2f} ms/step), "
          f"loss {np.mean(losses[:BATCHES]):.6f} (first {BATCHES} steps) -> {np.mean(losses[-BATCHES:]):.6f} "
          f"(last {BATCHES})")
    print(f"RSS: at step 0, at the end of warm-up (step {args.warmup}), at the end; growth from the end of "
          f"warm-up to the end, and from step {middle['step']} to the end; least-squares slope from step "
          f"{args.warmup} on")
    print(f"{'process':<12} {'start MiB':>10} {'warm MiB':>10} {'end MiB':>10} {'growth MiB':>11} "
          f"{'2nd half MiB':>13} {'max MiB':>9} {'slope KiB/1000 steps':>21}")
    for name in pids:
        key = f"{name}_rss_kib"
        growth = (end[key] - warm[key]) / 1024
        late = (end[key] - middle[key]) / 1024
        slope = slope_kib_per_kstep([(s["step"], s[key]) for s in post])
        peak = max(s[key] for s in post) / 1024
        summary[name] = {"start_kib": samples[0][key], "warm_kib": warm[key], "end_kib": end[key],
                         "max_after_warmup_kib": max(s[key] for s in post), "growth_mib": round(growth, 2),
                         "second_half_growth_mib": round(late, 2),
                         "slope_kib_per_1000_steps": round(slope, 1)}
        print(f"{name:<12} {samples[0][key] / 1024:>10.1f} {warm[key] / 1024:>10.1f} {end[key] / 1024:>10.1f} "
              f"{growth:>+11.2f} {late:>+13.2f} {peak:>9.1f} {slope:>+21.1f}")
        if growth > args.threshold_mib:
            failures.append(f"{name}: RSS grew {growth:.2f} MiB after warm-up (threshold {args.threshold_mib} MiB)")
    for name in pids:
        if name.startswith("worker-"):
            for what in ("live_tensors", "resident_bytes"):
                key = f"{name}_{what}"
                values = sorted({s[key] for s in post})
                print(f"{name} {what} after warm-up: {values[0]}..{values[-1]} (end {end[key]})")
                summary[name][what] = [values[0], values[-1]]
                if end[key] > warm[key]:
                    failures.append(f"{name}: {what} {warm[key]} at the end of warm-up, {end[key]} at the end")
    if not np.mean(losses[-BATCHES:]) < 0.5 * np.mean(losses[:BATCHES]):
        failures.append("the loss did not fall")

    load_end = os.getloadavg()
    print(f"\n{started:%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} CPUs ({cpu_model()}), "
          f"commit {commit()}, load average {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "started": started.isoformat(), "elapsed_s": elapsed,
                       "loss_first": float(np.mean(losses[:BATCHES])), "loss_last": float(np.mean(losses[-BATCHES:])),
                       "summary": summary, "samples": samples, "failures": failures}, f, indent=1)
    if failures:
        print("soak: FAILED\n  " + "\n  ".join(failures))
        return 1
    print(f"soak: flat after warm-up (every process within {args.threshold_mib} MiB, worker tensors not growing)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
