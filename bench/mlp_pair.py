"""The MLP training step the Python benchmarks time (mlp_bench.py, per_op_bench.py): a
784-256-10 MLP in gt and the same in PyTorch, from the same weights, each trained by SGD on
the MSE loss of the same batch of 128 random inputs and targets."""

import numpy as np
import torch

import gt
from gt.nn import Linear, Module, SGD


class GtMLP(Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Linear(784, 256)
        self.fc2 = Linear(256, 10)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def sgd_step(model, optimizer, x, y):
    """One training step of either side; returns the loss tensor (fetching it is the caller's choice)."""
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    return loss


def mlp_steps(seed):
    """(gt_step, torch_step): one training step of each side per call, returning its loss
    tensor. The data come from numpy's generator seeded `seed`; PyTorch's model starts
    from the gt model's initial weights."""
    data = np.random.default_rng(seed)
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
    return (lambda: sgd_step(model, ours, gx, gy)), (lambda: sgd_step(reference, theirs, tx, ty))
