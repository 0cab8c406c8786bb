"""The 784-256-10 MLP trained with gt against PyTorch in this same process.

Debian's python3-torch (LibTorch 1.13, the same library the worker's backend
uses) runs the reference: same initial weights, same data, same optimizer
settings; the loss must agree at every one of the 50 steps within 1e-4.
"""

import numpy as np
import pytest
import torch

import gt
from gt.nn import Linear, Module, SGD, Adam


class GtMLP(Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Linear(784, 256)
        self.fc2 = Linear(256, 10)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def torch_mlp_from(model):
    """A torch.nn MLP holding copies of `model`'s parameters."""
    reference = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    with torch.no_grad():
        for theirs, ours in zip(reference.parameters(), model.parameters()):
            theirs.copy_(torch.from_numpy(ours.numpy()))
    return reference


def train(model_step, steps):
    return [model_step() for _ in range(steps)]


@pytest.mark.parametrize("optimizer", ["sgd", "sgd_momentum", "adam"])
@pytest.mark.parametrize("loss_name", ["mse", "cross_entropy"])
def test_mlp_matches_pytorch_in_process_for_50_steps(optimizer, loss_name):
    data = np.random.default_rng(7)
    x = data.standard_normal((128, 784)).astype(np.float32)
    y = data.standard_normal((128, 10)).astype(np.float32)
    labels = data.integers(0, 10, 128)
    gt.manual_seed(3)
    model = GtMLP()
    reference = torch_mlp_from(model)

    def make(params, lib):
        if optimizer == "sgd":
            return lib.SGD(params, lr=0.05)
        if optimizer == "sgd_momentum":
            return lib.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4)
        return lib.Adam(params, lr=1e-3)

    ours, theirs = make(model.parameters(), gt.nn), make(reference.parameters(), torch.optim)
    gx, gy, glabels = gt.from_numpy(x), gt.from_numpy(y), gt.tensor(labels)
    tx, ty, tlabels = torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(labels)

    def gt_step():
        pred = model(gx)
        loss = ((pred - gy) ** 2).mean() if loss_name == "mse" else gt.nn.functional.cross_entropy(pred, glabels)
        loss.backward()
        ours.step()
        ours.zero_grad()
        return loss.item()

    def torch_step():
        pred = reference(tx)
        loss = ((pred - ty) ** 2).mean() if loss_name == "mse" else torch.nn.functional.cross_entropy(pred, tlabels)
        theirs.zero_grad()
        loss.backward()
        theirs.step()
        return loss.item()

    gt_losses, torch_losses = train(gt_step, 50), train(torch_step, 50)
    assert max(abs(a - b) for a, b in zip(gt_losses, torch_losses)) <= 1e-4, (gt_losses, torch_losses)
    assert gt_losses[-1] < gt_losses[0]  # it learns
    for ours_p, theirs_p in zip(model.parameters(), reference.parameters()):
        np.testing.assert_allclose(ours_p.numpy(), theirs_p.detach().numpy(), rtol=1e-3, atol=1e-4)
