"""A process cluster whose dispatcher can be killed and started again on the
same address (issue 37), and the training client the dispatcher-restart
tests run on it (test_dispatcher_restart*.py).

The cluster: a gt-dispatcher on a tcp port of 127.0.0.1 it bound itself
(port 0, read back from its first line), later ones on that same port; and
gt-worker processes that outlive it (--reconnect-grace), each serving
/metrics, so that gt_worker_live_tensors is read from the workers without
any dispatcher. Every host's output goes to a file in the test's temporary
directory; log_tail() shows them in assertion messages.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

from conftest import (HOST_SWITCHES, bound_endpoints, first_log_line, logs_tail, metric_value, next_output_line,
                      stop_processes)
from conftest import clean_env as scrubbed_env

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN_DIR = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))

# The hosts' switches (conftest.HOST_SWITCHES) and GT_RECONNECT_GRACE: each test
# sets the grace its workers (--reconnect-grace) and clients get.
RESTART_SWITCHES = HOST_SWITCHES + ("GT_RECONNECT_GRACE",)


def clean_env(extra=None):
    """conftest.clean_env without RESTART_SWITCHES, then the dict `extra`."""
    return scrubbed_env(drop=RESTART_SWITCHES, **(extra or {}))


class RestartCluster:
    def __init__(self, log_dir, workers, worker_args=("--reconnect-grace", "30"), dispatcher_args=()):
        self.env = clean_env()
        self.log_dir = pathlib.Path(log_dir)
        self.logs, self.workers, self.metrics = [], {}, {}
        self.dispatcher_args = list(dispatcher_args)
        self.dispatcher = None
        self.port = None
        try:
            self.start_dispatcher()
            for i in range(workers):
                self.add_worker(f"worker-{i}", worker_args)
            self.wait_for_workers(workers)
        except BaseException:
            self.stop()
            raise

    def _spawn(self, name, argv):
        log = open(self.log_dir / f"{name}.{len(self.logs)}.log", "w")
        self.logs.append(log)
        return subprocess.Popen([str(BIN_DIR / argv[0]), *argv[1:]], env=self.env, stdout=log,
                                stderr=subprocess.STDOUT)

    def start_dispatcher(self):
        """Starts a dispatcher (on the first one's port after the first); returns time.time() once it
        announced itself, i.e. listens."""
        listen = f"tcp://127.0.0.1:{self.port or 0}"
        self.dispatcher = self._spawn("dispatcher", ["gt-dispatcher", "--listen", listen, "--metrics", "127.0.0.1:0",
                                                     *self.dispatcher_args])
        endpoint, self.metrics["dispatcher"] = bound_endpoints(first_log_line(self.logs[-1].name, self.dispatcher))
        up = time.time()
        assert endpoint, "gt-dispatcher announced no tcp endpoint"
        self.endpoint = endpoint
        self.port = int(endpoint.rsplit(":", 1)[1])
        return up

    def kill_dispatcher(self):
        self.dispatcher.send_signal(signal.SIGKILL)
        self.dispatcher.wait()

    def add_worker(self, name, args):
        proc = self._spawn(name, ["gt-worker", "--connect", self.endpoint, "--id", name, "--metrics", "127.0.0.1:0",
                                  *args])
        self.workers[name] = proc
        _, self.metrics[name] = bound_endpoints(first_log_line(self.logs[-1].name, proc))

    def gauge(self, host, name):
        """One metric of a host, summed over its series; None when it does not answer."""
        return metric_value(self.metrics[host], name)

    def wait_for_workers(self, n, timeout=30.0):
        deadline = time.monotonic() + timeout
        while self.gauge("dispatcher", "gt_host_workers_connected") != n:
            assert time.monotonic() < deadline, "workers did not register\n" + self.log_tail()
            time.sleep(0.05)

    def live_tensors(self):
        """{worker: gt_worker_live_tensors} read from each worker itself."""
        return {name: self.gauge(name, "gt_worker_live_tensors") for name in self.workers}

    def log_tail(self, chars=2500):
        return logs_tail(self.logs, chars)

    def stop(self):
        procs = list(self.workers.values()) + ([self.dispatcher] if self.dispatcher else [])
        stop_processes([p for p in procs if p.poll() is None])
        for log in self.logs:
            log.close()


# The training client. argv: address, mode (plain | dp | mesh), steps, pause step.
# An MLP trained with SGD, one fresh batch (uploaded from NumPy) per step; prints
# {"step", "loss", "t"} per step, 0.1 s apart after the pause. After the pause step and after the last one it
# syncs and prints {"paused": "before" | "after"}, then waits for a line on stdin
# (the test reads the workers' live tensors then, and kills the dispatcher after
# the first). With SLOW=1 in its environment, the step after the pause first
# fetches a long matmul chain (printing {"syncing": true} before): a sync that is
# in flight when the dispatcher dies. Last line: {"losses": [...], "slow": value}.
CLIENT = textwrap.dedent(r"""
    import contextlib, gc, json, os, sys, time
    import numpy as np
    import gt

    address, mode, steps, pause = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    gt.connect(address)
    D, H, O, B = 16, 32, 4, 16
    rng = np.random.default_rng(5)
    init = {"w1": rng.standard_normal((D, H)) / 4, "b1": rng.standard_normal(H) / 10,
            "w2": rng.standard_normal((H, O)) / 6, "b2": rng.standard_normal(O) / 10}
    xs = rng.standard_normal((steps, B, D)).astype(np.float32)
    ys = np.tanh(xs[:, :, :O] * 2).astype(np.float32)

    def say(**what):
        print(json.dumps(what), flush=True)

    batch = lambda t: t
    if mode == "dp":
        from gt import ShardConfig, SignalConfig
        gt.register_config("data_parallel", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
        gt.register_config("params", SignalConfig(replicated=True))
        with gt.signal.context("params"):
            params = {k: gt.from_numpy(v.astype(np.float32)).requires_grad_() for k, v in init.items()}
    elif mode == "mesh":
        from gt.distributed import DeviceMesh, Replicate, Shard, distribute_tensor
        grid = DeviceMesh([[0, 1], [2, 3]], ("data", "model"))
        where = {"w1": [Replicate(), Shard(1)], "b1": [Replicate(), Shard(0)],
                 "w2": [Replicate(), Shard(0)], "b2": [Replicate(), Replicate()]}
        params = {k: distribute_tensor(gt.from_numpy(v.astype(np.float32)), grid, where[k]).requires_grad_()
                  for k, v in init.items()}
        batch = lambda t: distribute_tensor(t, grid, [Shard(0), Replicate()])
    else:
        params = {k: gt.from_numpy(v.astype(np.float32)).requires_grad_() for k, v in init.items()}
    opt = gt.optim.SGD(list(params.values()), lr=0.1)

    def step(i):
        x, y = batch(gt.from_numpy(xs[i])), batch(gt.from_numpy(ys[i]))
        p = params
        loss = ((((x @ p["w1"] + p["b1"]).relu() @ p["w2"] + p["b2"]) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    def pause_here(where):
        gc.collect()
        gt.sync()
        say(paused=where)
        sys.stdin.readline()

    losses, slow = [], None
    for i in range(steps):
        if os.environ.get("SLOW") == "1" and i == pause + 1:
            a = gt.from_numpy(np.full((600, 600), 1.0 / 600, np.float32))
            m = a
            for _ in range(60):
                m = (m @ a) * 1.0001
            say(syncing=True)
            slow = float(m.sum().item())
            del a, m  # the workers' live tensors at the two pauses count the same tensors
        with gt.signal.context("data_parallel") if mode == "dp" else contextlib.nullcontext():
            losses.append(step(i))
        say(step=i, loss=losses[-1], t=time.time())
        if i == pause:
            pause_here("before")
        if i >= pause:
            time.sleep(0.1)  # a kill lands between steps as well as inside them
    pause_here("after")
    say(losses=losses, slow=slow)
""")


def start_client(address, mode, steps, pause, log, env=None):
    """The training client (CLIENT) as a process; its stderr to the file `log`."""
    err = open(log, "w")
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, address, mode, str(steps), str(pause)],
                            env=clean_env(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    proc.stderr_path = log
    err.close()
    return proc


def read_until(proc, key, timeout=120.0):
    """The JSON lines `proc` prints up to and including the first with `key`."""
    lines, deadline = [], time.monotonic() + timeout
    while True:
        line = next_output_line(proc, max(0.0, deadline - time.monotonic()))
        assert line, f"client ended or said nothing (waiting for {key!r}): " + \
            pathlib.Path(proc.stderr_path).read_text()[-3000:]
        lines.append(json.loads(line))
        if key in lines[-1]:
            return lines


def step_after(proc, when, timeout=120.0):
    """The first step line `proc` prints with a time after `when` (time.time())."""
    deadline = time.monotonic() + timeout
    while True:
        line = read_until(proc, "step", max(0.0, deadline - time.monotonic()))[-1]
        if line["t"] >= when:
            return line


def go_on(proc):
    proc.stdin.write(b"go\n")
    proc.stdin.flush()
