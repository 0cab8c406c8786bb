"""Per-op cost from Python: gt's embedded default against PyTorch in this same process (issue 41).

Each measure runs gt's form and PyTorch's form of the same loop in alternating rounds (who goes
first alternating too), and reports the median of gt's times, of PyTorch's, and of the rounds'
ratios gt / PyTorch, so that a change in the machine's load falls on both alike:

  tensor      2000 dependent adds of two 64x64 float32 tensors (`x = x + y`), then one fetch
  scalar      2000 dependent adds of a scalar (`x = x + 1.0`) to a 64x64 float32, then one fetch
  round_trip  one add of two 64x64 float32 tensors and its fetch (`(a + b).numpy()`), x 200
  matmul      512x512 float32 `(a @ b).numpy()`, x 20
  mlp_sync    784-256-10 MLP step (batch 128, SGD, MSE), `loss.item()` every step, x 20
  mlp_once    the same step, one `loss.item()` after 20 steps

Every gt result is checked against PyTorch's once, before the timing (bit for bit, except the
MLP, whose two sides reduce in different orders).

    PYTHONPATH=build/python /usr/bin/python3 bench/per_op_bench.py [rounds] [measure ...] [--connect HOST:PORT]

With --connect it runs against that dispatcher instead of the embedded default (bench/per_op_ab.py
uses it to compare two worker configurations in one sitting). The last line printed is JSON.
"""

import json
import pathlib
import statistics
import sys
import time

import numpy as np
import torch

import gt

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from mlp_pair import mlp_steps  # noqa: E402
from timing import median_step_seconds  # noqa: E402

OPS = 2000


def chain(x, y):
    for _ in range(OPS):
        x = x + y
    return x


def scalar_chain(x):
    for _ in range(OPS):
        x = x + 1.0
    return x


def elementwise_measures():
    rng = np.random.default_rng(0)
    tile, step = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    gx, gy = gt.from_numpy(tile), gt.from_numpy(step)
    tx, ty = torch.from_numpy(tile.copy()), torch.from_numpy(step.copy())
    np.testing.assert_array_equal(chain(gx, gy).numpy(), chain(tx, ty).numpy())
    np.testing.assert_array_equal(scalar_chain(gx).numpy(), scalar_chain(tx).numpy())
    np.testing.assert_array_equal((gx + gy).numpy(), (tx + ty).numpy())
    return {
        "tensor": (lambda: chain(gx, gy).numpy(), lambda: chain(tx, ty).numpy(), OPS),
        "scalar": (lambda: scalar_chain(gx).numpy(), lambda: scalar_chain(tx).numpy(), OPS),
        "round_trip": (lambda: (gx + gy).numpy(), lambda: (tx + ty).numpy(), 1),
    }


def matmul_measure():
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((512, 512)).astype(np.float32) for _ in range(2))
    ga, gb = gt.from_numpy(a), gt.from_numpy(b)
    ta, tb = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
    np.testing.assert_array_equal((ga @ gb).numpy(), (ta @ tb).numpy())
    return {"matmul": (lambda: (ga @ gb).numpy(), lambda: (ta @ tb).numpy(), 1)}


MLP_STEPS = 20


def mlp_measures():
    gt_step, torch_step = mlp_steps(seed=2)

    def every_step(step):
        return lambda: [step().item() for _ in range(MLP_STEPS)][-1]

    def once(step):
        def run():
            for _ in range(MLP_STEPS - 1):
                step()
            return step().item()
        return run

    first = (every_step(gt_step)(), every_step(torch_step)())
    if not np.isclose(first[0], first[1], rtol=1e-4):
        raise SystemExit(f"MLP losses differ: gt {first[0]} PyTorch {first[1]}")
    return {"mlp_sync": (every_step(gt_step), every_step(torch_step), MLP_STEPS),
            "mlp_once": (once(gt_step), once(torch_step), MLP_STEPS)}


# Runs per round and calls per run of each measure (its median of runs is the round's figure).
SHAPE = {"tensor": (5, 1), "scalar": (5, 1), "round_trip": (15, 200), "matmul": (7, 20), "mlp_sync": (5, 1),
         "mlp_once": (5, 1)}


def measure(name, gt_body, torch_body, per, rounds):
    runs, calls = SHAPE[name]
    gt_times, torch_times, ratios = [], [], []
    for r in range(rounds):
        order = [(gt_times, gt_body), (torch_times, torch_body)]
        for times, body in (order if r % 2 == 0 else order[::-1]):
            times.append(median_step_seconds(body, runs, calls) / per)
        ratios.append(gt_times[-1] / torch_times[-1])
    return {"gt_us": 1e6 * statistics.median(gt_times), "torch_us": 1e6 * statistics.median(torch_times),
            "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios)}


def main():
    args = sys.argv[1:]
    where = "embedded default"
    if "--connect" in args:
        at = args.index("--connect")
        where = args[at + 1]
        gt.connect(where)
        del args[at:at + 2]
    rounds = int(args[0]) if args else 5
    wanted = args[1:] or list(SHAPE)
    unknown = [w for w in wanted if w not in SHAPE]
    if unknown:
        raise SystemExit(f"unknown measure(s) {unknown}; known: {list(SHAPE)}")
    bodies = {}
    for make in (elementwise_measures, matmul_measure, mlp_measures):
        bodies.update(make())
    started = time.perf_counter()
    results = {}
    print(f"gt per-op benchmark: {where}, PyTorch {torch.__version__}, "
          f"{torch.get_num_threads()} intra-op threads, {rounds} alternating rounds")
    print(f"{'measure':12s} {'gt':>10s} {'pytorch':>10s} {'ratio':>7s}  (min..max of rounds)  per op/step")
    for name in wanted:
        gt_body, torch_body, per = bodies[name]
        r = results[name] = measure(name, gt_body, torch_body, per, rounds)
        print(f"{name:12s} {r['gt_us']:7.2f} us {r['torch_us']:7.2f} us {r['ratio']:6.2f}x  "
              f"({r['ratio_min']:.2f}..{r['ratio_max']:.2f})", flush=True)
    print(json.dumps({"seconds": time.perf_counter() - started, "results": results}))
    gt.shutdown()


if __name__ == "__main__":
    main()
