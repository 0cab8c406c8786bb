"""Where a per-op loop's CPU goes, by thread: gt's embedded default in this process (issue 41).

per_op_bench.py gives the wall-clock ratio to PyTorch; on a 2-vCPU machine that ratio is set by
three threads sharing two cores (the client's, the dispatcher's and the worker's pipeline
thread), so the pace is the busier of max(one thread) and (sum of threads) / 2. This runs one
measure of per_op_bench.py for a few seconds and prints each thread's CPU time per op (from
/proc, so another process's load changes it little), with PyTorch's own CPU per op beside it.

    PYTHONPATH=build/python /usr/bin/python3 bench/per_op_threads.py [tensor|scalar|matmul|mlp_sync] [seconds]

A thread of the worker's BLAS (matmul) shows as one more thread; the busy waits around a sync
(GT_BUSY_WAIT_US) count in the dispatcher's and the worker's figures.
"""

import os
import pathlib
import sys
import threading
import time

import numpy as np
import torch

import gt

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from mlp_pair import mlp_steps  # noqa: E402

OPS = 2000


def bodies(what):
    """(gt body, PyTorch body, ops per call) of measure `what`."""
    rng = np.random.default_rng(0)
    if what in ("tensor", "scalar"):
        tile, step = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
        pairs = [(gt.from_numpy(tile), gt.from_numpy(step)), (torch.from_numpy(tile), torch.from_numpy(step))]

        def loop(x, y):
            def run():
                z = x
                for _ in range(OPS):
                    z = z + y if what == "tensor" else z + 1.0
                z.numpy()
            return run
        return loop(*pairs[0]), loop(*pairs[1]), OPS
    if what == "matmul":
        a, b = (rng.standard_normal((512, 512)).astype(np.float32) for _ in range(2))
        ga, gb, ta, tb = gt.from_numpy(a), gt.from_numpy(b), torch.from_numpy(a), torch.from_numpy(b)
        return (lambda: (ga @ gb).numpy()), (lambda: (ta @ tb).numpy()), 1
    if what == "mlp_sync":
        gt_step, torch_step = mlp_steps(seed=2)
        return (lambda: gt_step().item()), (lambda: torch_step().item()), 1
    raise SystemExit(f"unknown measure {what!r}: tensor, scalar, matmul or mlp_sync")


def thread_cpu_seconds():
    """{thread id: CPU seconds (user + system)} of this process's threads."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        out[tid] = (int(fields[11]) + int(fields[12])) / tick
    return out


def run_for(body, seconds):
    """(calls, wall seconds, {thread: CPU seconds}) of calling body for about `seconds`."""
    body()
    before, start = thread_cpu_seconds(), time.perf_counter()
    calls = 0
    while time.perf_counter() - start < seconds:
        body()
        calls += 1
    wall, after = time.perf_counter() - start, thread_cpu_seconds()
    return calls, wall, {t: cpu - before.get(t, 0.0) for t, cpu in after.items()}


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "tensor"
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
    gt_body, torch_body, per = bodies(what)
    main_thread = str(threading.get_native_id())
    for side, body in (("PyTorch", torch_body), ("gt", gt_body)):
        calls, wall, cpu = run_for(body, seconds)
        ops = calls * per
        print(f"{side} {what}: {1e6 * wall / ops:.2f} us/op wall, load average {os.getloadavg()[0]:.1f}")
        busy = sorted(((c, t) for t, c in cpu.items() if c > 0.005), reverse=True)
        for c, t in busy:
            name = "client (Python)" if t == main_thread else "thread"
            print(f"  {name:16s} {t:>8s} {1e6 * c / ops:9.2f} us/op CPU")
        print(f"  {'sum':16s} {'':>8s} {1e6 * sum(c for c, _ in busy) / ops:9.2f} us/op CPU")
    gt.shutdown()


if __name__ == "__main__":
    main()
