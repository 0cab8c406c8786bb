"""Compile scopes from Python on the embedded default with GT_COMPILE=1 (the
hotpath and compile stages in the client's own pipeline, and in its
dispatcher for clients that place tensors): a `compile=True` scope and a
signal whose config says `compile: true` are each replayed as one unit from
their first use, and give the values the same program gives without the
stages. Each run is a fresh interpreter, since GT_COMPILE is read when the
session starts.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

REPO = pathlib.Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent("""
    import json, gt
    gt.register_config("by_config", gt.SignalConfig(compile=True))
    w = gt.randn(8, 8, seed=1) * 0.3
    x = gt.randn(4, 8, seed=2)
    values = []
    for step in range(3):
        with gt.signal.context("by_option", compile=True):
            h = (x @ w).tanh() * 0.5 + 1
        with gt.signal.context("by_config"):
            y = (h @ w).relu().sum(1)
        values.extend(y.tolist())
        del h, y  # freed here, outside the scopes: every step's scopes are the same sequences
    hosts = gt.debug.get_worker_stats()
    client = [h for h in hosts.values() if h["host"] == "client"]
    dispatcher = next(h for h in hosts.values() if h["host"] == "dispatcher")
    print(json.dumps({"values": values, "client_hosts": len(client),
                      "units_run": client[0]["units_run"] if client else 0,
                      "cache_misses": client[0]["cache_misses"] if client else 0,
                      "dispatcher_units_run": dispatcher["units_run"]}))
""")


def run(compile_flag):
    # A threshold no sequence reaches: only the scopes make units.
    env = dict(os.environ, GT_COMPILE=compile_flag, GT_WORKERS="1", GT_HOTPATH_THRESHOLD="1000")
    env["PYTHONPATH"] = str(REPO / "build" / "python") + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_compile_scopes_are_units_from_first_use_and_match_eager():
    eager = run("0")
    compiled = run("1")
    assert eager["client_hosts"] == 0 and eager["units_run"] == 0
    # Two scopes, three steps each: six replays of two units, each defined once,
    # by the client's own compile stage (the dispatcher's gets units, not scopes).
    assert compiled["client_hosts"] == 1
    assert compiled["units_run"] == 6
    assert compiled["cache_misses"] == 2
    assert compiled["dispatcher_units_run"] == 0
    assert len(compiled["values"]) == len(eager["values"]) == 12
    for got, want in zip(compiled["values"], eager["values"]):
        assert abs(got - want) <= 1e-6 * max(1.0, abs(want))
