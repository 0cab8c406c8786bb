"""Compiled units are bounded (issue 39, docs/SECURITY.md): a worker keeps
them within its torch backend's unit_cache_mib, evicting the least recently
run (rebuilt from the template, with the same numbers, on their next run),
charges each to the client that defined it (max_client_mib), and refuses a
definition that cannot fit, naming the limit.

Real gt-dispatcher / gt-worker processes; the client compiles its own
scopes (GT_COMPILE=1), so each `compile=True` scope with a new constant is
a new unit: define_unit, then run_unit, on the worker.
"""

import subprocess
import textwrap

import pytest

from conftest import bound_endpoints, next_output_line
from test_cluster import Cluster, require_services, run_client

MIB = 1 << 20


class UnitCluster(Cluster):
    """A dispatcher and one worker with the given torch backend options."""

    def __init__(self, tmp_path, options):
        manifest = tmp_path / "worker.yaml"
        manifest.write_text(textwrap.dedent(f"""\
            host: worker
            backend:
              plugin: torch
              options: {options}
        """))
        super().__init__()
        self.worker = self._spawn(["gt-worker", "--connect", self.endpoint, "--id", "w0", "--manifest", str(manifest)],
                                  out=subprocess.PIPE)
        self.workers["w0"] = self.worker
        self.procs.append(self.worker)
        assert next_output_line(self.worker, 30)
        self.wait_for_workers(1)

    def worker_rss(self):
        for line in open(f"/proc/{self.worker.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")


def compile_env():
    return {"GT_COMPILE": "1", "GT_HOTPATH_THRESHOLD": "1000000"}


# Unit i adds 65,536 floats of i (a 256 KiB constant the plan folds) to x.
# Every value is a small integer: exact in float32.
UNITS = """
    x = gt.from_numpy(np.arange(65536, dtype=np.float32))

    def unit(i):
        with gt.signal.context("u", compile=True):
            y = x + gt.ones(65536) * float(i)
        return y
"""


def picks(values):
    return [values[0], values[1], values[65535]]


def test_a_flood_of_units_stays_within_the_budget_and_evicted_units_recompile(tmp_path):
    require_services()
    c = UnitCluster(tmp_path, "{unit_cache_mib: 64, unit_trial_runs: 0, malloc_keep_mib: 0}")
    try:
        before = c.worker_rss()
        out = run_client(c.endpoint, UNITS + """
    def picks(y):
        v = y.numpy()
        return [float(v[0]), float(v[1]), float(v[65535])]

    seen = []
    for i in range(2000):
        y = unit(i)
        if i % 500 == 0:
            seen.append(picks(y))
        del y
    gt.ones(1).sum().item()  # every unit ran
    again = [picks(unit(i)) for i in (0, 1, 1999)]  # 0 and 1 were evicted long ago
    say(seen=seen, again=again)
""", env=compile_env(), timeout=900)
        grown = c.worker_rss() - before
        print(f"worker RSS grew {grown / MIB:.0f} MiB over 2,000 units (budget 64 MiB)")
        want = lambda i: [0.0 + i, 1.0 + i, 65535.0 + i]  # noqa: E731
        assert out["seen"] == [want(i) for i in (0, 500, 1000, 1500)], out
        assert out["again"] == [want(0), want(1), want(1999)], out
        # Unbounded, 2,000 such units held about 1 GiB (issue 39; 1,018 MiB
        # measured here); the budget is 64 MiB, plus what the allocator keeps
        # between trims (every 32 MiB evicted) and the run's own tensors.
        assert grown < 128 * MIB, grown / MIB
        assert c.worker.poll() is None
    finally:
        c.stop()


def test_a_unit_that_cannot_fit_is_refused_naming_the_limit(tmp_path):
    require_services()
    c = UnitCluster(tmp_path, "{unit_cache_mib: 1, unit_trial_runs: 0}")
    try:
        out = run_client(c.endpoint, """
    x = gt.from_numpy(np.zeros(1 << 20, dtype=np.float32))
    try:
        with gt.signal.context("big", compile=True):
            y = x + gt.ones(1 << 20) * 2.0  # a 4 MiB constant
        say(error=None, value=y.sum().item())
    except gt.Error as e:
        error = str(e)
    say(error=error, after=(gt.ones(4) * 2).sum().item())
""", env=compile_env())
        assert out["error"] and "unit_cache_mib" in out["error"], out
        assert "resource" in out["error"].lower(), out
        assert out["after"] == 8.0  # the client goes on
    finally:
        c.stop()


# The unit's folded constants (4 MiB or more) stay charged to the client
# after its run: 20 MiB more of tensors then take it past its 26 MiB, which
# without the unit (GT_COMPILE=0: 4 + 20 MiB) they do not.
CHARGED = """
    x = gt.from_numpy(np.zeros(1 << 20, dtype=np.float32))
    with gt.signal.context("big", compile=True):
        y = x + gt.ones(1 << 20) * 2.0
    first = float(y.numpy()[0])
    del y
    try:
        more = gt.ones(5 << 20)
        say(first=first, error=None, value=more.sum().item())
    except gt.Error as e:
        say(first=first, error=str(e))
"""


def test_units_count_toward_the_clients_max_client_mib(tmp_path):
    require_services()
    c = UnitCluster(tmp_path, "{max_client_mib: 26, unit_trial_runs: 0}")
    try:
        charged = run_client(c.endpoint, CHARGED, env=compile_env())
        assert charged["first"] == 2.0
        assert charged["error"] and "max_client_mib" in charged["error"], charged
        eager = run_client(c.endpoint, CHARGED, env={"GT_COMPILE": "0"})
        assert eager["first"] == 2.0 and eager["error"] is None, eager
    finally:
        c.stop()
