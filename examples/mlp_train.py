"""Trains the GT2 README's MLP (784 -> 256 -> 10) on synthetic data with gt.

    PYTHONPATH=build/python /usr/bin/python3 examples/mlp_train.py [--steps N] [--lr LR]

The data is a fixed random linear map plus noise, so the loss has somewhere to
go. Everything runs on gt workers (the embedded default unless --connect is
given); only the loss comes back each step.
"""

import argparse
import time

import numpy as np

import gt
from gt.nn import Linear, Module, SGD


class MLP(Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Linear(784, 256)
        self.fc2 = Linear(256, 10)

    def forward(self, x):
        x = self.fc1(x).relu()
        return self.fc2(x)


def synthetic_data(samples, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, 784)).astype(np.float32)
    true_map = rng.standard_normal((784, 10)).astype(np.float32) / np.sqrt(784)
    y = x @ true_map + 0.1 * rng.standard_normal((samples, 10)).astype(np.float32)
    return x, y


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--connect", help="dispatcher address (host:port); default: the embedded default")
    parser.add_argument("--workers", type=int, help="workers of the embedded default")
    args = parser.parse_args()

    if args.connect:
        gt.connect(args.connect)
    elif args.workers:
        gt.gpu_workers(args.workers)
    gt.manual_seed(0)

    x, y = synthetic_data(args.samples, seed=0)
    X_train, y_train = gt.from_numpy(x), gt.from_numpy(y)

    model = MLP()
    optimizer = SGD(model.parameters(), lr=args.lr)

    start = time.perf_counter()
    for step in range(args.steps):
        pred = model(X_train)
        loss = ((pred - y_train) ** 2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step:4d}  loss {loss.item():.6f}", flush=True)
    elapsed = time.perf_counter() - start
    print(f"{args.steps} steps in {elapsed:.2f}s ({1000 * elapsed / max(args.steps, 1):.1f} ms/step)")


if __name__ == "__main__":
    main()
