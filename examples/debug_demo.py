"""Debug utilities: the autograd tape, the instruction log, the explain log,
and each host's stage figures.

    PYTHONPATH=build/python /usr/bin/python3 examples/debug_demo.py [--explain]

- gt.debug.print_tape() shows the ops the client recorded for backward(), with
  the signal each ran under.
- GT_INSTRUCTION_LOG=file makes the embedded dispatcher write every
  instruction it receives to that file (set below to a temporary file unless
  the environment names one; read when the session starts).
- --explain sets GT_EXPLAIN=1: the sharding stage prints each op's placement
  ("gt explain: ..." lines) on stderr.
- gt.debug.print_worker_stats() prints what every host's stages did.
"""

import os
import sys
import tempfile

if "--explain" in sys.argv[1:]:
    os.environ["GT_EXPLAIN"] = "1"
LOG = os.environ.get("GT_INSTRUCTION_LOG") or os.path.join(tempfile.mkdtemp(prefix="gt-debug-demo-"), "gt.log")
os.environ["GT_INSTRUCTION_LOG"] = LOG  # before the first op: read at session start

import numpy as np  # noqa: E402

import gt  # noqa: E402


def main():
    gt.register_config("layer1", gt.SignalConfig(shard=gt.ShardConfig(axis=0)))

    a_np = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    b_np = np.ones((3, 2), dtype=np.float32)
    b = gt.tensor(b_np, requires_grad=True)
    gt.debug.clear_tape()
    with gt.signal.context("layer1"):           # a is split by rows over the workers
        a = gt.tensor(a_np, requires_grad=True)
        h = (a @ b).relu()
    loss = (h * h).sum()

    print("== the autograd tape (client side)")
    gt.debug.print_tape()

    loss.backward()
    want = 2 * np.maximum(a_np @ b_np, 0) @ b_np.T
    ok = np.allclose(a.grad.numpy(), want, atol=1e-5)
    print(f"loss {loss.item():.4f}; d loss / d a {'equals' if ok else 'DIFFERS from'} NumPy's")

    print("== stage figures of every host")
    gt.debug.print_worker_stats()

    gt.shutdown()  # the dispatcher closes (and flushes) its log
    with open(LOG) as f:
        lines = f.read().splitlines()
    ops = [line.split("|")[4].strip() for line in lines if "RECV" in line]
    print(f"== instruction log {LOG}: {len(lines)} lines, {len(ops)} instructions received; the first 6:")
    for line in lines[:6]:
        print("  " + line)
    print("ops received, in order:", " ".join(ops))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
