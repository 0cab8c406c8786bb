"""Signal configs built in Python instead of YAML (the signal guide's
`config_from_python.py`).

    PYTHONPATH=build/python /usr/bin/python3 examples/config_from_python.py [--batch-size N]

gt.SignalConfig / gt.ShardConfig / gt.register_config hold the same settings
as a YAML file's keys (shard.axis, shard.workers, replicated, backward,
compile), so a program can pick them at run time: here the number of workers
a batch is split over follows the batch size. The forward and the gradients
are checked against NumPy.
"""

import argparse

import numpy as np

import gt
from gt import ShardConfig, SignalConfig


def configure_for_batch_size(batch_size):
    """Large batches over all four workers, small ones over two."""
    workers = [0, 1, 2, 3] if batch_size >= 256 else [0, 1]
    gt.register_config("training_bwd", SignalConfig(shard=ShardConfig(axis=0, workers=workers)))
    gt.register_config("training", SignalConfig(shard=ShardConfig(axis=0, workers=workers),
                                                backward_signal="training_bwd"))
    gt.register_config("weights", SignalConfig(replicated=True))
    return workers


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()

    gt.gpu_workers(4)
    workers = configure_for_batch_size(args.batch_size)
    for name, config in sorted(gt.configs().items()):
        print(f"{name:<13} {config!r}")
    print(f"batch size {args.batch_size}: the batch is split over workers {workers}")

    rng = np.random.default_rng(7)
    x_np = rng.standard_normal((args.batch_size, 16)).astype(np.float32)
    w_np = (rng.standard_normal((16, 4)) * 0.2).astype(np.float32)

    with gt.signal.context("weights"):
        w = gt.tensor(w_np, requires_grad=True)
    with gt.signal.context("training"):
        x = gt.tensor(x_np)
        out = (x @ w).sigmoid()
        loss = out.mean()
    loss.backward()

    s = 1 / (1 + np.exp(-(x_np @ w_np)))
    want_grad = x_np.T @ (s * (1 - s) / s.size)
    ok = np.allclose(loss.item(), s.mean(), atol=1e-5) and np.allclose(w.grad.numpy(), want_grad, atol=1e-5)
    print(f"loss {loss.item():.6f}; loss and d loss / d w {'equal' if ok else 'DIFFER from'} NumPy's")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
