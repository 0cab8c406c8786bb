"""Signal-based sharding on four workers, driven by examples/config_sharding.yaml.

    PYTHONPATH=build/python /usr/bin/python3 examples/signal_demo.py

A `gt.signal.context(name)` scope tags every instruction issued inside with
the signal; the sharding stage of the dispatcher places what the scope
creates as the signal's config says (modifiers/sharding/README.md). This demo
runs the config file's data-parallel, pipeline and model-parallel signals,
prints how many tensors each worker holds after each part, and checks every
result against NumPy. Set GT_EXPLAIN=1 to see each op's placement on stderr.
"""

import pathlib

import numpy as np

import gt

HERE = pathlib.Path(__file__).resolve().parent


def live_tensors():
    """Tensors each worker holds now, from its gt_worker_live_tensors gauge."""
    hosts = gt.debug.get_worker_stats()
    return {name: int(next(s["value"] for s in h["samples"] if s["name"] == "gt_worker_live_tensors"))
            for name, h in sorted(hosts.items()) if h and h["host"] == "worker"}


def check(name, got, want):
    ok = np.allclose(got, want, rtol=1e-4, atol=1e-4)
    print(f"  {name:<34} {'equals NumPy' if ok else 'DIFFERS from NumPy'}")
    return ok


def main():
    gt.gpu_workers(4)  # the config names workers 0-3 (before the first op)
    names = gt.load_config(HERE / "config_sharding.yaml")
    print(f"loaded {len(names)} signals from config_sharding.yaml: {', '.join(names)}")

    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((16, 8)).astype(np.float32)
    w_np = rng.standard_normal((8, 4)).astype(np.float32)
    ok = []

    print("baseline (no signal):", live_tensors())

    # 1. Data parallel: the weight replicated on every worker, the batch split
    #    on axis 0 over workers 0-3; gradients use backward_layer1.
    with gt.signal.context("params"):
        w = gt.tensor(w_np, requires_grad=True)
    with gt.signal.context("forward_layer1"):
        x = gt.tensor(x_np)
        h = (x @ w).relu()
        loss = (h * h).mean()
    loss.backward()
    h_np = np.maximum(x_np @ w_np, 0)
    print("data parallel (forward_layer1, params):", live_tensors())
    ok.append(check("loss", loss.item(), (h_np * h_np).mean()))
    ok.append(check("dloss/dw", w.grad.numpy(), x_np.T @ (2 * h_np / h_np.size)))

    # 2. Pipeline: the forward on workers 0-1, its gradient ops on workers 2-3
    #    (pipeline_stage_1's backward: pipeline_stage_1_bwd).
    v = gt.tensor(w_np, requires_grad=True)
    with gt.signal.context("pipeline_stage_1"):
        xs = gt.tensor(x_np)
        t = (xs @ v).tanh()
    t.sum().backward()
    print("pipeline (pipeline_stage_1 -> _bwd):", live_tensors())
    ok.append(check("tanh(x @ v)", t.numpy(), np.tanh(x_np @ w_np)))
    ok.append(check("d sum(tanh(x @ v)) / dv", v.grad.numpy(), x_np.T @ (1 - np.tanh(x_np @ w_np) ** 2)))

    # 3. Model parallel: the weight split on its feature axis over workers 0-1.
    xm = gt.tensor(x_np)
    with gt.signal.context("model_parallel"):
        wm = gt.tensor(w_np)
        y = xm @ wm
    print("model parallel (model_parallel):", live_tensors())
    ok.append(check("x @ w, w split by columns", y.numpy(), x_np @ w_np))

    print(f"signal demo: {sum(ok)}/{len(ok)} results equal NumPy's")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    raise SystemExit(main())
