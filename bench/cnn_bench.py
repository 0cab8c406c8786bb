"""One CNN training step from Python: gt against PyTorch eager in this same process.

The network of examples/cnn (PyTorch's MNIST example: two 3x3 convolutions,
max-pool, dropout, two linear layers, log-softmax + NLL), batch 64 of
MNIST-shaped images, SGD with momentum (the optimizer is not what is
measured), loss.item() every step (the sync point). Both sides start from
the same weights and data. Prints the median step time of each and their
ratio (the goal: gt at most 1.2x PyTorch's eager time).

    PYTHONPATH=build/python /usr/bin/python3 bench/cnn_bench.py [runs] [steps]
"""

import importlib.util
import pathlib
import statistics
import sys

import numpy as np
import torch

import gt
from gt.nn import SGD

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from timing import median_step_seconds  # noqa: E402


def example_net():
    """examples/cnn/main.py's Net."""
    spec = importlib.util.spec_from_file_location("cnn_example", ROOT / "examples" / "cnn" / "main.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Net()


class TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = torch.nn.Conv2d(1, 32, 3, 1), torch.nn.Conv2d(32, 64, 3, 1)
        self.dropout1, self.dropout2 = torch.nn.Dropout(0.25), torch.nn.Dropout(0.5)
        self.fc1, self.fc2 = torch.nn.Linear(9216, 128), torch.nn.Linear(128, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(self.conv2(self.conv1(x).relu()).relu(), 2)
        x = self.fc1(torch.flatten(self.dropout1(x), 1)).relu()
        return torch.nn.functional.log_softmax(self.fc2(self.dropout2(x)), dim=1)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    data = np.random.default_rng(0)
    x = data.standard_normal((64, 1, 28, 28)).astype(np.float32)
    y = data.integers(0, 10, 64)

    model, reference = example_net(), TorchNet()
    ours_params = dict(model.named_parameters())
    with gt.no_grad():
        for name, p in reference.named_parameters():
            ours_params[name].copy_(gt.tensor(p.detach().numpy()))
    ours = SGD(model.parameters(), lr=0.01, momentum=0.9)
    theirs = torch.optim.SGD(reference.parameters(), lr=0.01, momentum=0.9)
    gx, gy = gt.from_numpy(x), gt.tensor(y)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def gt_step():
        loss = gt.nn.functional.nll_loss(model(gx), gy)
        loss.backward()
        ours.step()
        ours.zero_grad()
        return loss.item()

    def torch_step():
        loss = torch.nn.functional.nll_loss(reference(tx), ty)
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
    print(f"gt Python CNN benchmark: examples/cnn's Net, batch 64 of 1x28x28, SGD momentum, NLL, loss.item() "
          f"every step; PyTorch {torch.__version__} with {torch.get_num_threads()} intra-op threads; "
          f"median of 3 interleaved rounds of {runs} runs x {steps} steps")
    print(f"{'per training step':34s} {'gt':>10s} {'pytorch':>10s} {'ratio':>8s}")
    print(f"{'conv-pool-dropout-linear, nll':34s} {g * 1e3:7.2f} ms {t * 1e3:7.2f} ms {g / t:7.2f}x")
    gt.shutdown()


if __name__ == "__main__":
    main()
