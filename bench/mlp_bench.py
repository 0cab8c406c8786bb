"""The MLP training step from Python: gt against PyTorch in this same process.

784-256-10 MLP, batch 128, SGD, MSE loss, loss.item() every step (the sync
point). Both sides start from the same weights and data. Prints the median
step time of each and their ratio.

    PYTHONPATH=build/python /usr/bin/python3 bench/mlp_bench.py [runs] [steps]
"""

import pathlib
import statistics
import sys

import torch

import gt

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from mlp_pair import mlp_steps  # noqa: E402
from timing import median_step_seconds  # noqa: E402


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    gt_step, torch_step = mlp_steps(seed=0)

    # Interleaved rounds, so both see the same machine.
    gt_times, torch_times = [], []
    for _ in range(3):
        gt_times.append(median_step_seconds(lambda: gt_step().item(), runs, steps))
        torch_times.append(median_step_seconds(lambda: torch_step().item(), runs, steps))
    g, t = statistics.median(gt_times), statistics.median(torch_times)
    print(f"gt Python MLP benchmark: 784-256-10, batch 128, SGD, MSE, loss.item() every step; "
          f"PyTorch {torch.__version__} with {torch.get_num_threads()} intra-op threads; "
          f"median of 3 interleaved rounds of {runs} runs x {steps} steps")
    print(f"{'per training step':34s} {'gt':>10s} {'pytorch':>10s} {'ratio':>8s}")
    print(f"{'mse_loss, loss.item() every step':34s} {g * 1e3:7.3f} ms {t * 1e3:7.3f} ms {g / t:7.2f}x")
    gt.shutdown()


if __name__ == "__main__":
    main()
