"""GT_WORKER_BATCH_SIZE alone (the seed's "Enable batching": no GT_COMPILE)
turns on hot-sequence detection and compiled units: in the client's own
stages (configs/client-compile.yaml), so it works on the embedded default and
against a cluster started the seed's way (python -m gt.server / gt.worker)
alike. A repeated training step then runs as compiled units on the workers,
and gives the numbers eager execution gives. `1` (the seed's default) stays
eager, and GT_COMPILE=0 wins over it. Each run is a fresh interpreter: the
variables are read when the session starts.
"""

import json
import textwrap

from conftest import run_python
from test_launch import WAIT_FOR_WORKERS, python_cluster

# A small MLP trained for a few steps: the same step repeats, so the hotpath
# stage finds it and the compile stage replays it as units.
PROGRAM = "import json, gt\n" + WAIT_FOR_WORKERS + textwrap.dedent("""
    import os, sys
    if len(sys.argv) > 1:
        gt.connect(sys.argv[1])
        wait_for_workers(2)
    w1 = gt.randn(16, 32, seed=1, requires_grad=True)
    w2 = gt.randn(32, 4, seed=2, requires_grad=True)
    x = gt.randn(8, 16, seed=3)
    y = gt.randn(8, 4, seed=4)
    losses = []
    for step in range(8):
        loss = (((x @ w1).relu() @ w2 - y) ** 2).mean()
        loss.backward()
        with gt.no_grad():
            w1 -= w1.grad * 0.01
            w2 -= w2.grad * 0.01
        w1.grad = None
        w2.grad = None
        losses.append(loss.item())
    hosts = gt.debug.get_worker_stats()
    client = [h for h in hosts.values() if h and h["host"] == "client"]
    workers = [h for h in hosts.values() if h and h["host"] == "worker"]
    print(json.dumps({"losses": losses, "w2": w2.sum().item(), "client_hosts": len(client),
                      "compiled": sum(h["compiled"] for h in client),
                      "units_run": sum(h["units_run"] for h in client),
                      "worker_unit_runs": sum(h["unit_runs"] for h in workers),
                      "workers": len(workers)}))
""")

# Variables that would change which stages run: each run sets them all, ""
# (which gt reads as unset) where it wants none, since run_python starts from
# this process's environment.
_STAGE_VARS = ("GT_COMPILE", "GT_WORKER_BATCH_SIZE", "GT_CLIENT_MANIFEST", "GT_HOTPATH_WINDOW", "GT_HOTPATH_THRESHOLD",
               "GT_HOTPATH_MIN_SEQ", "GT_HOTPATH_MAX_EXPAND")


def run(env, address=None):
    code = PROGRAM if address is None else f"import sys; sys.argv[1:] = [{address!r}]\n" + PROGRAM
    out = run_python(code, env=env, timeout=180)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _unset_env():
    return {k: "" for k in _STAGE_VARS}


def assert_same_numbers(got, want):
    assert len(got["losses"]) == len(want["losses"]) == 8
    for g, w in zip(got["losses"] + [got["w2"]], want["losses"] + [want["w2"]]):
        assert abs(g - w) <= 1e-5 * max(1.0, abs(w)), (got, want)


def assert_batched(got):
    assert got["client_hosts"] == 1, got
    assert got["compiled"] > 0 and got["units_run"] > 0, got
    assert got["worker_unit_runs"] > 0, got


def assert_eager(got):
    assert got["client_hosts"] == 0 and got["worker_unit_runs"] == 0, got


def test_batch_size_alone_compiles_on_the_embedded_default():
    eager = run(_unset_env())
    assert_eager(eager)
    batched = run(dict(_unset_env(), GT_WORKER_BATCH_SIZE="10"))
    assert_batched(batched)
    assert_same_numbers(batched, eager)


def test_batch_size_one_and_compile_zero_stay_eager():
    assert_eager(run(dict(_unset_env(), GT_WORKER_BATCH_SIZE="1")))
    assert_eager(run(dict(_unset_env(), GT_WORKER_BATCH_SIZE="10", GT_COMPILE="0")))


def test_bad_batch_size_is_an_error_naming_the_variable():
    out = run_python("import gt; gt.randn(2, 2).sum().item()", env=dict(_unset_env(), GT_WORKER_BATCH_SIZE="ten"))
    assert out.returncode != 0
    assert "GT_WORKER_BATCH_SIZE" in out.stderr, out.stderr


def test_batch_size_alone_compiles_against_a_python_launched_cluster():
    with python_cluster(workers=2) as port:
        eager = run(_unset_env(), address=f"localhost:{port}")
        batched = run(dict(_unset_env(), GT_WORKER_BATCH_SIZE="10"), address=f"localhost:{port}")
    assert eager["workers"] == batched["workers"] == 2
    assert_eager(eager)
    assert_batched(batched)
    assert_same_numbers(batched, eager)
