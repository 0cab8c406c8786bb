"""Compile directives: signals whose config says `compile: true` become units.

    PYTHONPATH=build/python /usr/bin/python3 examples/compile_demo.py

examples/config_compile.yaml marks hot_path, forward_pass and backward_pass as
compile boundaries. With the compile stages on (GT_COMPILE=1, set below
unless the environment already says otherwise; read when the session
starts), the first run of such a scope defines a unit and every later run
replays it as one instruction; a loop that repeats without any scope is found
by the hot-path detector. The demo trains a small two-layer model for a few
steps inside those scopes, checks the final weights against the same steps in
NumPy, and prints what the compile stages did (gt.debug.print_worker_stats).
"""

import os
import pathlib

os.environ.setdefault("GT_COMPILE", "1")  # before the first op: read at session start

import numpy as np  # noqa: E402

import gt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
STEPS, LR = 5, 0.1


def numpy_steps(x, y, w1, w2):
    for _ in range(STEPS):
        h = np.tanh(x @ w1)
        out = h @ w2
        d_out = 2 * (out - y) / out.size
        d_w2 = h.T @ d_out
        d_w1 = x.T @ ((d_out @ w2.T) * (1 - h * h))
        w1, w2 = w1 - LR * d_w1, w2 - LR * d_w2
    return w1, w2


def main():
    gt.gpu_workers(4)  # the config's scopes shard over workers 0-3
    names = gt.load_config(HERE / "config_compile.yaml")
    compiled = [n for n in names if gt.get_config(n).compile]
    print(f"compile boundaries in config_compile.yaml: {', '.join(compiled)}   (GT_COMPILE={os.environ['GT_COMPILE']})")

    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((8, 6)).astype(np.float32)
    y_np = rng.standard_normal((8, 3)).astype(np.float32)
    w1_np = (rng.standard_normal((6, 5)) * 0.5).astype(np.float32)
    w2_np = (rng.standard_normal((5, 3)) * 0.5).astype(np.float32)

    w1 = gt.tensor(w1_np, requires_grad=True)
    w2 = gt.tensor(w2_np, requires_grad=True)
    x, y = gt.tensor(x_np), gt.tensor(y_np)
    for step in range(STEPS):
        with gt.signal.context("forward_pass"):       # compile: true, backward: backward_pass
            loss = (((x @ w1).tanh() @ w2 - y) ** 2).mean()
        loss.backward()
        with gt.no_grad():
            w1 -= LR * w1.grad
            w2 -= LR * w2.grad
        w1.grad, w2.grad = None, None
        print(f"step {step}: loss {loss.item():.6f}")

    want1, want2 = numpy_steps(x_np, y_np, w1_np, w2_np)
    ok = np.allclose(w1.numpy(), want1, atol=1e-4) and np.allclose(w2.numpy(), want2, atol=1e-4)
    print(f"weights after {STEPS} steps {'equal' if ok else 'DIFFER from'} NumPy's")

    # A compile stage sends one run_unit instruction per replay of a unit (units_run); the worker
    # it reaches executes it (unit_runs; a unit placed on several workers runs on each).
    hosts = gt.debug.get_worker_stats()
    sent = sum(h["units_run"] for h in hosts.values() if h and h["host"] != "worker")
    executed = sum(h["unit_runs"] for h in hosts.values() if h and h["host"] == "worker")
    print(f"run_unit instructions sent by the compile stages: {sent}")
    print(f"compiled units executed by the workers: {executed}")
    gt.debug.print_worker_stats()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
