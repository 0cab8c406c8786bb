"""Chaos on a process cluster (issue 20, item 4b): random client kills and a
worker kill during a mixed multi-client workload.

A real gt-dispatcher (a manifest with a short heartbeat timeout, so killed
clients are dropped within seconds) and three gt-worker processes, each
serving /metrics. Six client processes, each its own session, run a mixed
workload (tensors from NumPy, elementwise ops, matmuls, reductions, sharded
matmuls under signal configs, fetches checked against NumPy on the same
inputs, long-lived tensors, frees) until told to stop. Meanwhile the test
SIGKILLs two clients at random times, and SIGKILLs one worker, starting a
replacement under the same id a moment later. Then:

  * every client that was not killed ended within a bounded time, never saw
    a wrong number, and saw no error other than the loss of the killed worker
    (naming it); a client whose tensors could not be on that worker (a config
    placing everything on other workers) saw no error at all; a client that
    lost tensors computed correct numbers again after the replacement came;
  * the dispatcher and the other workers are still running;
  * once every client has ended or been killed, every live worker's
    gt_worker_live_tensors and gt_worker_resident_bytes (scraped over HTTP)
    and the dispatcher's gt_host_clients_connected return to 0 within a
    bounded time: the killed clients' tensors are freed when the dispatcher
    drops them for missed heartbeats, and nothing else leaks.

The schedule (which clients and which worker die, and when) comes from a seed:
GT_TEST_CHAOS_SEED, else a fixed one; it is printed and in every assertion
message. GT_TEST_CHAOS_TRACE=1 gives each worker an instruction-log stage
writing every instruction it ran, with its status and time, next to the
hosts' output in the test's temporary directory (pytest --basetemp=DIR keeps
it). Skipped when the services are not built (GT_BIN_DIR, else build/bin).
"""

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import (bound_endpoints, clean_env, first_log_line, logs_tail, metric_value, next_output_line,
                      stop_processes)

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN_DIR = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))

WORKERS = 3
# Client kinds, one per client: "pinned" places everything on one worker,
# "pair" shards on two, "all" shards over every worker, "none" registers no
# config (the dispatcher places whole tensors where it likes).
KINDS = ["pinned", "pinned", "pair", "all", "all", "none"]
CLIENT_KILLS = 2  # one early, one late
RUN_SECONDS = 14.0  # of workload, once every client is running
# The dispatcher drops a client silent for 2 x heartbeat_timeout_ms (clients
# send a heartbeat every second); workers heartbeat every interval.
HEARTBEAT_TIMEOUT_MS = 2500
DEFAULT_SEED = 11

# ---- the client program ---------------------------------------------------------------

# argv: endpoint, client index, seed, kind, worker list (comma separated, for
# the kind's config). Prints {"state": "running"} after its first checked
# round, then one JSON summary line once stdin says stop (or closes).
CLIENT = textwrap.dedent(r"""
    import contextlib, json, select, sys, time
    import numpy as np
    import gt
    from gt import ShardConfig, SignalConfig

    endpoint, index, seed, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    placed_on = [int(w) for w in sys.argv[5].split(",") if w]
    all_workers = sorted(sys.argv[6].split(","))
    gt.connect(endpoint)
    rng = np.random.default_rng([seed, index])

    def live_workers():
        return sorted(k for k, h in gt.debug.get_worker_stats().items() if h is not None and h["host"] == "worker")

    def wait_for_workers(timeout):
        # Every worker registered (the replacement of a killed one included).
        # A sync point: an error still due to this client may come here.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if live_workers() == all_workers:
                    return True
            except gt.Error as e:
                record(e)
            time.sleep(0.1)
        return False

    errors, wrong, others = [], [], []
    checks, rounds, checks_after_error = 0, 0, 0

    def record(e):
        errors.append(str(e))

    def check(what, got, want):
        global checks, checks_after_error
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-4 * scale):
            wrong.append(f"round {rounds}: {what}: got {got.ravel()[:4].tolist()} want {want.ravel()[:4].tolist()}"
                         f" (shapes {got.shape} {want.shape})")
        checks += 1
        if errors:
            checks_after_error += 1

    if kind != "none":
        gt.register_config("data", SignalConfig(shard=ShardConfig(axis=0, workers=placed_on)))
        # Replicated means on every live worker: only where the data is on all of them.
        gt.register_config("params", SignalConfig(replicated=True) if kind == "all"
                           else SignalConfig(shard=ShardConfig(axis=0, workers=placed_on)))

    def scope(name):
        return gt.signal.context(name) if kind != "none" else contextlib.nullcontext()

    def fresh_state():
        # Long-lived tensors: an accumulator updated every round, a weight.
        acc_np = rng.standard_normal((12, 8)).astype(np.float32)
        w_np = (rng.standard_normal((8, 8)) / 3).astype(np.float32)
        with scope("data"):
            acc = gt.from_numpy(acc_np)
        with scope("params"):
            w = gt.from_numpy(w_np)
        return {"acc": (acc, acc_np), "w": (w, w_np), "pool": []}

    def one_round(state):
        acc, acc_np = state["acc"]
        w, w_np = state["w"]
        m = int(rng.integers(1, 5)) * 6
        a_np = rng.standard_normal((m, 8)).astype(np.float32)
        b_np = rng.standard_normal((8, 8)).astype(np.float32)
        c = float(rng.uniform(-2, 2))
        with scope("data"):
            a = gt.from_numpy(a_np)
            b = gt.from_numpy(b_np)  # sharded on its rows too: a @ b gathers it
            h = ((a @ w) * c + 1.0).relu()
            g = (a @ b).tanh() - h
            row_sums = g.sum(axis=1)
            col_means = h.mean(axis=0)
            total = (h * h).sum()
            acc = acc * 0.5 + col_means
        h_np = np.maximum((a_np @ w_np) * np.float32(c) + 1, 0)
        g_np = np.tanh(a_np @ b_np) - h_np
        acc_np = acc_np * np.float32(0.5) + h_np.mean(axis=0)
        check("row_sums", row_sums.numpy(), g_np.sum(axis=1))
        check("col_means", col_means.numpy(), h_np.mean(axis=0))
        check("total", total.item(), (h_np * h_np).sum())
        if rounds % 3 == 0:
            check("g", g.numpy(), g_np)
        if rounds % 5 == 0:
            check("acc", acc.numpy(), acc_np)
        state["acc"] = (acc, acc_np)
        # Some results live on for a while, then are freed (dropped handles).
        state["pool"].append((g, g_np))
        while len(state["pool"]) > int(rng.integers(0, 6)):
            old, old_np = state["pool"].pop(int(rng.integers(0, len(state["pool"]))))
            if rng.random() < 0.3:
                check("pooled", old.sum(axis=0).numpy(), old_np.sum(axis=0))

    def stop_requested():
        return bool(select.select([sys.stdin], [], [], 0)[0])

    state = None
    announced = False
    while True:
        try:
            if state is None:
                state = fresh_state()
            one_round(state)
            rounds += 1
        except gt.Error as e:
            record(e)
            # Whatever lived on a lost worker is gone: drop every handle, wait
            # for the replacement, and start again from NumPy.
            state = None
            if not wait_for_workers(30):
                others.append("the workers did not all come back within 30 s")
                break
        except Exception as e:  # anything else is a failure of the test
            others.append(f"{type(e).__name__}: {e}")
            break
        if not announced:
            print(json.dumps({"state": "running"}), flush=True)
            announced = True
        if stop_requested():
            break
    state = None
    print(json.dumps({"state": "done", "rounds": rounds, "checks": checks, "checks_after_error": checks_after_error,
                      "errors": errors, "wrong": wrong, "others": others}),
          flush=True)
""")


def read_json_line(proc, timeout):
    """The next JSON line `proc` prints, or None after `timeout` s or at its exit."""
    line = next_output_line(proc, timeout)
    return json.loads(line) if line else None


# ---- the cluster ----------------------------------------------------------------------


class ChaosCluster:
    """A gt-dispatcher and gt-worker processes on ports of 127.0.0.1 they
    bound themselves, each serving /metrics, their output in log_dir; procs
    by host name (a replacement worker takes its predecessor's name)."""

    def __init__(self, manifest, log_dir):
        self.env = clean_env()
        self.log_dir = log_dir
        self.logs = []
        self.procs = {}
        self.metrics = {}
        # Ports 0, read back from each service's first line (conftest.bound_endpoints).
        self.dispatcher = self._spawn("dispatcher", ["gt-dispatcher", "--listen", "tcp://127.0.0.1:0", "--metrics",
                                                     "127.0.0.1:0", "--manifest", str(manifest)])
        self.endpoint, self.metrics["dispatcher"] = self._announced(self.dispatcher)

    def _spawn(self, name, argv):
        log = open(self.log_dir / f"{name}.{len(self.logs)}.log", "w")
        self.logs.append(log)
        proc = subprocess.Popen([str(BIN_DIR / argv[0]), *argv[1:]], env=self.env, stdout=log,
                                stderr=subprocess.STDOUT)
        self.procs[name] = proc
        return proc

    def _announced(self, proc):
        try:
            endpoint, metrics = bound_endpoints(first_log_line(self.logs[-1].name, proc))
            assert metrics, f"{proc.args[0]} announced no metrics address"
            return endpoint, metrics
        except BaseException:
            self.stop()
            raise

    def add_worker(self, name):
        n = len(self.logs)
        manifest = []
        if os.environ.get("GT_TEST_CHAOS_TRACE"):  # every instruction each worker ran, to <name>.<n>.ops
            path = self.log_dir / f"{name}.{n}.yaml"
            path.write_text(f"host: worker\nstages: [{{name: tape, plugin: instruction_log, options: "
                            f"{{path: {self.log_dir / f'{name}.{n}.ops'}}}}}]\nbackend: {{plugin: torch}}\n")
            manifest = ["--manifest", str(path)]
        proc = self._spawn(name, ["gt-worker", "--connect", self.endpoint, "--id", name, "--metrics", "127.0.0.1:0",
                                  *manifest])
        _, self.metrics[name] = self._announced(proc)
        return proc

    def gauge(self, host, name):
        """One gauge of a host (each exports one series of each), None when it does not answer."""
        return metric_value(self.metrics[host], name)

    def wait_for_workers(self, n, timeout=30.0):
        deadline = time.monotonic() + timeout
        while self.gauge("dispatcher", "gt_host_workers_connected") != n:
            assert time.monotonic() < deadline, "workers did not register"
            time.sleep(0.05)

    def log_tail(self, chars=3000):
        return logs_tail(self.logs, chars)

    def stop(self):
        stop_processes([p for p in reversed(list(self.procs.values())) if p.poll() is None])
        for log in self.logs:
            log.close()


# ---- the test -------------------------------------------------------------------------


def test_random_client_and_worker_kills_leave_right_numbers_and_no_leaks(tmp_path):
    if not ((BIN_DIR / "gt-dispatcher").exists() and (BIN_DIR / "gt-worker").exists()):
        pytest.skip(f"gt-dispatcher / gt-worker not built in {BIN_DIR}")
    seed = int(os.environ.get("GT_TEST_CHAOS_SEED", DEFAULT_SEED))
    print(f"chaos seed {seed} (GT_TEST_CHAOS_SEED={seed} repeats this schedule)")
    chaos = random.Random(seed)
    names = [f"worker-{i}" for i in range(WORKERS)]

    # The schedule: which worker dies when, which clients die when, and
    # where each client's config places its tensors.
    killed_index = chaos.randrange(WORKERS)
    killed_worker = names[killed_index]
    worker_kill_at = chaos.uniform(2.0, 5.0)
    replace_after = chaos.uniform(0.3, 1.5)
    # One client dies early, one late: the late one is dropped for missed
    # heartbeats only after the others have ended, so the wait for the gauges
    # below always waits for that.
    victims = chaos.sample(range(len(KINDS)), CLIENT_KILLS)
    client_kill_at = {victims[0]: chaos.uniform(1.0, RUN_SECONDS / 2),
                      victims[1]: chaos.uniform(RUN_SECONDS - 3.0, RUN_SECONDS - 0.5)}
    victims.sort()
    placements = []
    for kind in KINDS:
        if kind == "pinned":
            placements.append([chaos.randrange(WORKERS)])
        elif kind == "pair":
            placements.append(sorted(chaos.sample(range(WORKERS), 2)))
        elif kind == "all":
            placements.append(list(range(WORKERS)))
        else:
            placements.append([])
    plan = (f"seed {seed}: kill {killed_worker} at {worker_kill_at:.1f} s (replaced {replace_after:.1f} s later); "
            f"kill clients {', '.join(f'{v} at {client_kill_at[v]:.1f} s' for v in victims)}; "
            f"clients {list(zip(KINDS, placements))}")
    print(plan)

    manifest = tmp_path / "dispatcher.yaml"
    manifest.write_text("host: dispatcher\nid: dispatcher\nstages: [{name: sharding, plugin: sharding}]\n"
                        f"heartbeat_interval_ms: 250\nheartbeat_timeout_ms: {HEARTBEAT_TIMEOUT_MS}\n")
    c = ChaosCluster(manifest, tmp_path)
    clients, client_logs = [], []

    def stderr_of(i):
        client_logs[i].flush()
        return pathlib.Path(client_logs[i].name).read_text()[-3000:]

    try:
        for i, name in enumerate(names):  # one at a time: worker-i has index i
            c.add_worker(name)
            c.wait_for_workers(i + 1)
        for i, (kind, placed) in enumerate(zip(KINDS, placements)):
            client_logs.append(open(tmp_path / f"client-{i}.stderr", "w"))  # a file: a full pipe would block it
            clients.append(subprocess.Popen(
                [sys.executable, "-c", CLIENT, c.endpoint, str(i), str(seed), kind, ",".join(map(str, placed)),
                 ",".join(names)],
                env=c.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=client_logs[i], text=True))
        for i, p in enumerate(clients):
            got = read_json_line(p, 60)
            assert got == {"state": "running"}, f"{plan}\nclient {i} did not start: {str(got)[:2000]}\n{stderr_of(i)}"

        # The chaos, on the schedule.
        start = time.monotonic()
        events = sorted([(worker_kill_at, "kill-worker", None), (worker_kill_at + replace_after, "replace", None)] +
                        [(at, "kill-client", v) for v, at in client_kill_at.items()])
        for at, what, who in events:
            time.sleep(max(0.0, start + at - time.monotonic()))
            if what == "kill-worker":
                c.procs[killed_worker].send_signal(signal.SIGKILL)
                c.procs[killed_worker].wait()
            elif what == "replace":
                c.add_worker(killed_worker)
            else:
                clients[who].send_signal(signal.SIGKILL)
                clients[who].wait()
        c.wait_for_workers(WORKERS)
        time.sleep(max(0.0, start + RUN_SECONDS - time.monotonic()))

        # The gauges see the clients' tensors (else coming back to zero
        # below would prove nothing).
        held = {name: c.gauge(name, "gt_worker_live_tensors") for name in names}
        assert sum(v or 0 for v in held.values()) > 0, f"{plan}\nno live tensors while clients run: {held}"

        # The survivors stop, each within a bound.
        survivors = [i for i in range(len(clients)) if i not in victims]
        for i in survivors:
            clients[i].stdin.write("stop\n")
            clients[i].stdin.flush()
        summaries, deadline = {}, time.monotonic() + 30
        for i in survivors:
            summaries[i] = read_json_line(clients[i], max(0.1, deadline - time.monotonic()))
            if summaries[i] is None:
                clients[i].kill()
        exited = {}
        for i in survivors:
            try:
                exited[i] = clients[i].wait(timeout=max(0.1, deadline + 10 - time.monotonic()))
            except subprocess.TimeoutExpired:
                clients[i].kill()
                exited[i] = "still running 10 s after its summary"
        all_ended = time.monotonic()

        for i in survivors:
            s = summaries[i]
            print(f"client {i} ({KINDS[i]} on {placements[i]}): " + ("no summary" if s is None else
                  f"{s['rounds']} rounds, {s['checks']} checks ({s['checks_after_error']} after an error), "
                  f"{len(s['errors'])} errors {[e[:120] for e in s['errors'][:5]]}"))
        for i in survivors:
            s = summaries[i]
            where = f"{plan}\nclient {i} ({KINDS[i]} on {placements[i]})"
            assert s is not None, (f"{where} hung: no summary within 30 s of stop (is a worker stuck in a "
                                   f"collective? GT_TEST_CHAOS_TRACE=1 logs what each ran)\n{stderr_of(i)}")
            assert exited[i] == 0, f"{where} exited: {exited[i]}\n{stderr_of(i)}"
            assert s["others"] == [], f"{where}: {s['others']}\n{stderr_of(i)}"
            assert s["wrong"] == [], f"{where} got wrong numbers: {s['wrong'][:5]}"
            assert s["rounds"] >= 5 and s["checks"] >= 15, f"{where} made little progress: {str(s)[:2000]}"
            for e in s["errors"]:
                assert f"worker {killed_worker}" in e and "lost" in e, f"{where}: an error not naming the loss: {e!r}"
            if KINDS[i] != "none" and killed_index not in placements[i]:
                assert s["errors"] == [], f"{where}, nothing on {killed_worker}, saw errors: {s['errors'][:3]}"
            if s["errors"]:
                assert s["checks_after_error"] > 0, f"{where} never computed again after the loss: {str(s)[:2000]}"
        for name in names:
            assert c.procs[name].poll() is None, f"{plan}\n{name} died:\n{c.log_tail()}"
        assert c.dispatcher.poll() is None, f"{plan}\nthe dispatcher died:\n{c.log_tail()}"

        # Every client has ended or been killed: what they held is freed, the
        # killed ones' once the dispatcher drops them for missed heartbeats
        # (2 x 2.5 s of silence), and the gauges come back to zero.
        def leftovers():
            left = {}
            for host in ["dispatcher"] + names:
                for metric in ("gt_worker_live_tensors", "gt_worker_resident_bytes", "gt_host_clients_connected"):
                    value = c.gauge(host, metric)
                    if value != 0:
                        left[f"{host} {metric}"] = value
            return left

        deadline = all_ended + 2 * HEARTBEAT_TIMEOUT_MS / 1000 + 10
        left = leftovers()
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = leftovers()
        assert left == {}, (f"{plan}\n{time.monotonic() - all_ended:.1f} s after the last client ended, "
                            f"still held: {left}\n{c.log_tail()}")
    finally:
        for p in clients:
            if p.poll() is None:
                p.kill()
            p.wait()
        for log in client_logs:
            log.close()
        c.stop()
