"""gt.distributed.checkpoint save / load of a sharded state on 4 gt-worker processes,
against torch.save / torch.load of the same state held in this process (issue 36), and the
client's and the dispatcher's RSS during the save.

The state is float32 tensors of 16 MiB each, `--mib` in all, each split [Shard(0)] over the
4 workers. dcp.save has each worker write its own pieces (no byte through the client or the
dispatcher); dcp.load reads them back into a state placed the same way (each worker reading
its own byte ranges), through temporaries and a copy in place. torch.save / torch.load write
and read one file. Everything goes to `--dir` (the cluster's checkpoint_root), so the page cache
is warm after the first round: these are not disk speeds. GB/s counts the state's bytes; the
median over `rounds` interleaved rounds. RSS is sampled every 5 ms during each dcp.save (the
client: this process; the dispatcher: its process), growth over the value just before.

    PYTHONPATH=build/python /usr/bin/python3 bench/dcp_bench.py [rounds] [--mib 1024] [--dir /tmp/x]
"""

import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import torch

import gt
import gt.distributed.checkpoint as dcp
from gt.distributed import DeviceMesh, Shard, distribute_tensor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from processes import free_port, stop_processes  # noqa: E402

BIN = pathlib.Path(os.environ.get("GT_BIN_DIR", pathlib.Path(__file__).resolve().parents[1] / "build" / "bin"))
TENSOR_MIB = 16
WORKERS = 4


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class PeakRss:
    """The largest RSS growth of each pid while the block runs, sampled every 5 ms."""

    def __init__(self, pids):
        self.pids, self.growth, self._stop = pids, {}, threading.Event()

    def __enter__(self):
        self.base = {p: rss_mib(p) for p in self.pids}
        self.peak = dict(self.base)
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            for p in self.pids:
                self.peak[p] = max(self.peak[p], rss_mib(p))
            time.sleep(0.005)

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join()
        self.growth = {p: self.peak[p] - self.base[p] for p in self.pids}


def start_cluster(root):
    port = free_port()
    env = {**os.environ, "GT_CHECKPOINT_ROOT": root}
    log = open(os.path.join(tempfile.gettempdir(), f"dcp_bench_{port}.log"), "w")
    procs = [subprocess.Popen([str(BIN / "gt-dispatcher"), "--listen", f"tcp://127.0.0.1:{port}"], env=env,
                              stdout=log, stderr=subprocess.STDOUT)]
    time.sleep(1.0)
    for i in range(WORKERS):
        procs.append(subprocess.Popen([str(BIN / "gt-worker"), "--connect", f"127.0.0.1:{port}", "--id", f"worker-{i}"],
                                      env=env, stdout=log, stderr=subprocess.STDOUT))
    gt.connect(f"127.0.0.1:{port}")
    deadline = time.monotonic() + 60
    while len([h for h in gt.debug.get_worker_stats().values() if h and h["host"] == "worker"]) < WORKERS:
        if time.monotonic() > deadline:
            sys.exit("the workers did not register")
        time.sleep(0.2)
    return procs


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", type=int, nargs="?", default=3)
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="dcp_bench_")
    procs = start_cluster(root)
    try:
        run(args, root, procs[0].pid)
    finally:
        stop_processes(procs)
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


def run(args, root, dispatcher_pid):
    torch.set_num_threads(1)
    mesh = DeviceMesh(list(range(WORKERS)))
    rng = np.random.default_rng(0)
    rows = TENSOR_MIB * 2**20 // 4 // 1024
    arrays = {f"layer{i}.weight": rng.standard_normal((rows, 1024), dtype=np.float32)
              for i in range(max(1, args.mib // TENSOR_MIB))}
    ours = {k: distribute_tensor(gt.from_numpy(a), mesh, [Shard(0)]) for k, a in arrays.items()}
    target = {k: distribute_tensor(gt.zeros(*a.shape), mesh, [Shard(0)]) for k, a in arrays.items()}
    theirs = {k: torch.from_numpy(a) for k, a in arrays.items()}
    del arrays
    gt.sync()
    size_gb = sum(t.numel() * 4 for t in theirs.values()) / 1e9
    torch_path = os.path.join(root, "torch_state.pt")
    times = {"dcp.save": [], "dcp.load": [], "torch.save": [], "torch.load": []}
    growth = {"client": [], "dispatcher": []}
    for r in range(args.rounds):
        with PeakRss([os.getpid(), dispatcher_pid]) as rss:
            times["dcp.save"].append(timed(lambda: dcp.save(ours, checkpoint_id=f"bench/round{r}")))
        growth["client"].append(rss.growth[os.getpid()])
        growth["dispatcher"].append(rss.growth[dispatcher_pid])
        times["torch.save"].append(timed(lambda: torch.save(theirs, torch_path)))
        times["dcp.load"].append(timed(lambda: (dcp.load(target, checkpoint_id=f"bench/round{r}"), gt.sync())))
        times["torch.load"].append(timed(lambda: torch.load(torch_path)))
    check = next(iter(target))
    assert np.array_equal(target[check].numpy(), theirs[check].numpy()), "the loaded state differs"
    print(f"state: {size_gb:.3f} GB in {len(theirs)} tensors of {TENSOR_MIB} MiB, [Shard(0)] over {WORKERS} "
          f"workers; median of {args.rounds} rounds; load average {os.getloadavg()[0]:.1f}")
    for name, values in times.items():
        t = statistics.median(values)
        print(f"  {name:11s} {t * 1e3:9.1f} ms  {size_gb / t:6.2f} GB/s")
    for what in ("save", "load"):
        ratio = statistics.median(times[f"torch.{what}"]) / statistics.median(times[f"dcp.{what}"])
        print(f"  dcp.{what} speed / torch.{what}: {ratio:.2f}x")
    print(f"  RSS growth during dcp.save (max over rounds): client {max(growth['client']):.1f} MiB, "
          f"dispatcher {max(growth['dispatcher']):.1f} MiB")


if __name__ == "__main__":
    main()
