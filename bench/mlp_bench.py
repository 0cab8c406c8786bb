"""The MLP training step from Python: gt against PyTorch in this same process.

784-256-10 MLP, batch 128, SGD, MSE loss, loss.item() every step (the sync
point). Both sides start from the same weights and data. Prints the median
step time of each and their ratio.

    PYTHONPATH=build/python /usr/bin/python3 bench/mlp_bench.py [runs] [steps]
"""

import pathlib
import statistics
import sys

import numpy as np
import torch

import gt
from gt.nn import Linear, Module, SGD

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from timing import median_step_seconds  # noqa: E402


class GtMLP(Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Linear(784, 256)
        self.fc2 = Linear(256, 10)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    data = np.random.default_rng(0)
    x = data.standard_normal((128, 784)).astype(np.float32)
    y = data.standard_normal((128, 10)).astype(np.float32)

    model = GtMLP()
    reference = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    with torch.no_grad():
        for theirs, ours in zip(reference.parameters(), model.parameters()):
            theirs.copy_(torch.from_numpy(ours.numpy()))
    ours, theirs = SGD(model.parameters(), lr=0.01), torch.optim.SGD(reference.parameters(), lr=0.01)
    gx, gy = gt.from_numpy(x), gt.from_numpy(y)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def gt_step():
        loss = ((model(gx) - gy) ** 2).mean()
        loss.backward()
        ours.step()
        ours.zero_grad()
        return loss.item()

    def torch_step():
        loss = ((reference(tx) - ty) ** 2).mean()
        theirs.zero_grad()
        loss.backward()
        theirs.step()
        return loss.item()

    # Interleaved rounds, so both see the same machine.
    gt_times, torch_times = [], []
    for _ in range(3):
        gt_times.append(median_step_seconds(gt_step, runs, steps))
        torch_times.append(median_step_seconds(torch_step, runs, steps))
    g, t = statistics.median(gt_times), statistics.median(torch_times)
    print(f"gt Python MLP benchmark: 784-256-10, batch 128, SGD, MSE, loss.item() every step; "
          f"PyTorch {torch.__version__} with {torch.get_num_threads()} intra-op threads; "
          f"median of 3 interleaved rounds of {runs} runs x {steps} steps")
    print(f"{'per training step':34s} {'gt':>10s} {'pytorch':>10s} {'ratio':>8s}")
    print(f"{'mse_loss, loss.item() every step':34s} {g * 1e3:7.3f} ms {t * 1e3:7.3f} ms {g / t:7.2f}x")
    gt.shutdown()


if __name__ == "__main__":
    main()
