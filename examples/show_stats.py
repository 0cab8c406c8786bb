"""What every host's stages did: gt.debug.get_worker_stats() and
gt.debug.print_worker_stats().

    PYTHONPATH=build/python /usr/bin/python3 examples/show_stats.py [--steps N]

Runs a training step (linear regression, plain SGD) N times with the compile
stages on (GT_COMPILE=1, set below unless the environment says otherwise;
read when the session starts). The client's hot-path detector finds the step
repeating and its compile stage turns it into a unit the workers run as one
instruction. The figures come from each host's Prometheus metrics, the same
ones its /metrics endpoint serves (docs/METRICS.md). The weights are checked
against the same steps in NumPy.
"""

import argparse
import os

os.environ.setdefault("GT_COMPILE", "1")  # before the first op: read at session start

import numpy as np  # noqa: E402

import gt  # noqa: E402

LR = 0.1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    rng = np.random.default_rng(3)
    x_np = rng.standard_normal((32, 8)).astype(np.float32)
    y_np = (x_np @ rng.standard_normal((8, 1)) + 0.1).astype(np.float32)
    w_np = np.zeros((8, 1), dtype=np.float32)

    x, y, w = gt.tensor(x_np), gt.tensor(y_np), gt.tensor(w_np)
    for step in range(args.steps):
        err = x @ w - y
        loss = (err * err).mean()
        w -= (x.t() @ err) * (2 * LR / len(x_np))     # in place on the worker
        w_np = w_np - (x_np.T @ (x_np @ w_np - y_np)) * (2 * LR / len(x_np))
        value = loss.item()     # a sync point each step, as a training loop that logs has
        if step % 5 == 0:
            print(f"step {step:>3}: loss {value:.6f}")
    ok = np.allclose(w.numpy(), w_np, rtol=1e-4, atol=1e-5)
    print(f"{args.steps} SGD steps: weights {'equal' if ok else 'DIFFER from'} NumPy's;"
          f" loss {float(((x_np @ w_np - y_np) ** 2).mean()):.6f}")

    # Two sides of one count: a compile stage (here the client's) sends a run_unit instruction
    # per replay of a unit (units_run); a worker's backend executes it (unit_runs).
    stats = gt.debug.get_worker_stats()
    for name, h in stats.items():
        if h is None:
            print(f"{name}: no answer")
        elif h["host"] == "worker":
            print(f"{name} (worker): {h['instructions']} instructions, {h['unit_runs']} compiled units executed")
        else:
            print(f"{name} ({h['host']}): {h['instructions']} instructions; compile stage: "
                  f"{h['hot_sequences_found']} hot sequences, {h['compiled']} instructions compiled into units, "
                  f"{h['units_run']} run_unit instructions sent")
    sent = sum(h["units_run"] for h in stats.values() if h and h["host"] != "worker")
    executed = sum(h["unit_runs"] for h in stats.values() if h and h["host"] == "worker")
    print(f"run_unit instructions sent by the compile stages: {sent}")
    print(f"compiled units executed by the workers: {executed}")
    print()
    gt.debug.print_worker_stats()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
