"""Auto-sharding: GT_AUTO_SHARD=1 places tensors with no signal config at all.

    PYTHONPATH=build/python /usr/bin/python3 examples/auto_shard_demo.py

With GT_AUTO_SHARD=1 (set below unless the environment says otherwise; read
when the session starts), a tensor created outside any configured scope is
split on axis 0 over every live worker when its first dimension divides
evenly, and replicated otherwise. GT_EXPLAIN=1 (also set below) makes the
sharding stage print each placement on stderr; the demo prints how many
tensors each worker holds and checks the results against NumPy.
"""

import os

os.environ.setdefault("GT_AUTO_SHARD", "1")  # before the first op: read at session start
os.environ.setdefault("GT_EXPLAIN", "1")

import numpy as np  # noqa: E402

import gt  # noqa: E402


def live_tensors():
    hosts = gt.debug.get_worker_stats()
    return [int(next(s["value"] for s in h["samples"] if s["name"] == "gt_worker_live_tensors"))
            for _, h in sorted(hosts.items()) if h and h["host"] == "worker"]


def main():
    gt.gpu_workers(4)
    a_np = np.arange(24, dtype=np.float32).reshape(8, 3)
    b_np = np.arange(15, dtype=np.float32).reshape(5, 3) / 10

    a = gt.tensor(a_np)     # 8 rows over 4 workers: two rows each
    b = gt.tensor(b_np)     # 5 rows do not divide by 4: a copy on every worker
    print(f"GT_AUTO_SHARD={os.environ['GT_AUTO_SHARD']}: tensors per worker after creating a (8x3) and b (5x3):",
          live_tensors())

    results = {
        "(a * 2).sum(0)": ((a * 2).sum(0).numpy(), (a_np * 2).sum(0)),
        "(a @ a.T).sum()": ((a @ a.t()).sum().numpy(), (a_np @ a_np.T).sum()),
        "(a @ b.T).max(1)": ((a @ b.t()).max(1).values.numpy(), (a_np @ b_np.T).max(1)),
        "b.mean()": (b.mean().numpy(), b_np.mean()),
    }
    ok = True
    for name, (got, want) in results.items():
        same = np.allclose(got, want, rtol=1e-5)
        ok &= same
        print(f"  {name:<18} {np.round(np.asarray(got, dtype=np.float64), 4).tolist()}  "
              f"{'equals NumPy' if same else 'DIFFERS from NumPy'}")
    print(f"auto-shard demo: results {'equal' if ok else 'DIFFER from'} NumPy's")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
