"""What the sharding-strategy tests (test_sharding_strategies*.py) share: the
prelude every test program starts with (helpers to compare, place and scope),
the runner that executes one in a fresh interpreter on four embedded workers,
and the signal configs the indexing tests place operands with.
"""

import textwrap

PRELUDE = """
import contextlib, itertools
import numpy as np
import gt
from gt import ShardConfig, SignalConfig

def close(got, want, what="", tol=1e-4):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)

def shard(name, axis, workers, backward=None):
    gt.register_config(name, SignalConfig(shard=ShardConfig(axis=axis, workers=workers), backward=backward))

def made(arr, signal):
    if signal is None:
        return gt.tensor(arr)
    with gt.signal.context(signal):
        return gt.tensor(arr)

def scope(signal):
    return gt.signal.context(signal) if signal else contextlib.nullcontext()
"""


def run(python, *parts, workers=4, explain=False):
    """Runs PRELUDE and `parts` (each dedented) in a fresh interpreter; asserts it exits 0."""
    env = {"GT_WORKERS": str(workers)}
    if explain:
        env["GT_EXPLAIN"] = "1"
    r = python(PRELUDE + "".join(textwrap.dedent(p) for p in parts), env=env, timeout=90)
    assert r.returncode == 0, f"stdout:\n{r.stdout[-4000:]}\nstderr:\n{r.stderr[-6000:]}"
    return r


INDEX_PLACEMENTS = """
gt.register_config("rep", SignalConfig(replicated=True))
sigs = [None, "rep"]
for r in range(3):
    for ws in ([0, 1, 2], [2, 3], [3, 1, 0, 2]):
        n = f"a{r}_" + "".join(map(str, ws))
        shard(n, r, ws)
        sigs.append(n)
def fits(sig, rank):
    return sig is None or sig == "rep" or int(sig[1]) < rank
"""
