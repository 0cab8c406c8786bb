"""Moving data in and out (issue 19): `from_numpy` copies the array once and
`numpy()` hands over the fetched bytes, so the two sides never share memory
afterwards however either is changed. On the embedded default a fetched
frame is the worker's own tensor memory and `numpy()` gets a copy; from a
process cluster the received frame itself becomes the array (its base is the
capsule that owns it). Every dtype, empty and large tensors, both kinds of
cluster; each scenario in a fresh client process."""

import json

import pytest

PROGRAM = r"""
import json
import numpy as np
import gt

if ADDRESS:
    gt.connect(ADDRESS)
out = {}

# Every dtype round-trips bit for bit, empty tensors and scalars included.
rng = np.random.default_rng(7)
arrays = {
    "float32": rng.standard_normal((3, 5)).astype(np.float32),
    "float64": rng.standard_normal(7),
    "int32": rng.integers(-2**31, 2**31 - 1, size=(2, 2, 3), dtype=np.int32),
    "int64": rng.integers(-2**62, 2**62, size=9, dtype=np.int64),
    "bool": rng.random((4, 3)) < 0.5,
    "empty": np.zeros((0, 4), np.float32),
    "scalar": np.array(2.5, np.float64),
}
for name, a in arrays.items():
    back = gt.from_numpy(a).numpy()
    out[name] = bool(back.dtype == a.dtype and back.shape == a.shape and np.array_equal(back, a))

# 64 MiB: the array's changes after from_numpy do not reach the tensor; the
# fetched array is writable, and neither it nor the tensor sees the other's
# later changes.
big = rng.random(16 << 20, dtype=np.float32)
expected = big.copy()
x = gt.from_numpy(big)
big[:3] = -1.0                      # after the call, before any sync
y = x.numpy()
out["big_equal"] = bool(np.array_equal(y, expected))
out["writable"] = bool(y.flags.writeable and y.flags.c_contiguous)
y[0] = 1000.0
x += 1.0
z = x.numpy()
out["tensor_kept"] = bool(np.array_equal(z[:5], expected[:5] + 1))
out["array_kept"] = bool(y[0] == 1000.0 and np.array_equal(y[1:5], expected[1:5]))
out["fresh_each_fetch"] = bool(not np.shares_memory(y, z))
# Arrays outlive their tensors and the next fetches.
del x
w = (gt.from_numpy(expected) * 2).numpy()
out["outlives"] = bool(np.array_equal(z[1:5], expected[1:5] + 1) and np.array_equal(w[:5], expected[:5] * 2))
# Who owns the memory: a capsule (the received frame, or the one copy).
out["base"] = type(y.base).__name__
print(json.dumps(out))
"""

CHECKS = ["float32", "float64", "int32", "int64", "bool", "empty", "scalar", "big_equal", "writable", "tensor_kept",
          "array_kept", "fresh_each_fetch", "outlives"]


def run(python, address=None, env=None):
    r = python(f"ADDRESS = {address!r}\n" + PROGRAM, env=env, timeout=180)
    assert r.returncode == 0, r.stderr[-4000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    failed = [name for name in CHECKS if out[name] is not True]
    assert not failed, out
    assert out["base"] == "PyCapsule", out


def test_transfer_embedded(python):
    run(python, env={"GT_WORKERS": "1"})


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_transfer_process_cluster(python, processes, transport):
    with processes(workers=1, env={"GT_LOCAL_IPC": "1" if transport == "ipc" else "0"}) as port:
        run(python, address=f"127.0.0.1:{port}", env={"GT_LOCAL_IPC": "1" if transport == "ipc" else "0"})
