"""One training step of the example GPT (examples/gpt/model.py): gt against
the same model in PyTorch in this same process.

Character-level GPT, vocab 76, block 32, d_model 64, 4 heads, 2 layers,
batch 16; AdamW + clip_grad_norm_ + loss.item() every step (the sync point).
Both sides start from the same weights and data. Prints the median step
time of each and their ratio.

    PYTHONPATH=build/python /usr/bin/python3 bench/gpt_bench.py [runs] [steps]
"""

import pathlib
import statistics
import sys

import numpy as np
import torch

import gt

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples" / "gpt"))
from mlp_bench import median_step_seconds  # noqa: E402  (bench/ is on sys.path: this script's directory)
from model import build  # noqa: E402

CONFIG = dict(vocab=76, block_size=32, d_model=64, heads=4, layers=2)


def trainer(lib, model, optimizer, x, y):
    clip = lib.nn.utils.clip_grad_norm_

    def step():
        optimizer.zero_grad()
        loss = model.loss(x, y)
        loss.backward()
        clip(model.parameters(), 1.0)
        optimizer.step()
        return loss.item()
    return step


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    gt.manual_seed(0)
    ours, theirs = build(gt)(**CONFIG), build(torch)(**CONFIG)
    by_name = dict(theirs.named_parameters())
    with torch.no_grad():
        for name, p in ours.named_parameters():
            by_name[name].copy_(torch.from_numpy(p.numpy()))
    rng = np.random.default_rng(0)
    idx = rng.integers(0, CONFIG["vocab"], (16, CONFIG["block_size"]))
    targets = np.roll(idx, -1, axis=1)
    gt_step = trainer(gt, ours, gt.optim.AdamW(ours.parameters(), lr=1e-3), gt.tensor(idx), gt.tensor(targets))
    torch_step = trainer(torch, theirs, torch.optim.AdamW(theirs.parameters(), lr=1e-3), torch.from_numpy(idx),
                         torch.from_numpy(targets))
    gt_times, torch_times = [], []
    for _ in range(3):  # interleaved rounds, so both see the same machine
        gt_times.append(median_step_seconds(gt_step, runs, steps))
        torch_times.append(median_step_seconds(torch_step, runs, steps))
    g, t = statistics.median(gt_times), statistics.median(torch_times)
    print(f"gt GPT step benchmark: {CONFIG}, batch 16, AdamW + clip_grad_norm_, loss.item() every step; "
          f"PyTorch {torch.__version__} with {torch.get_num_threads()} intra-op threads; "
          f"median of 3 interleaved rounds of {runs} runs x {steps} steps")
    print(f"  PyTorch in-process: {t * 1e3:8.2f} ms/step")
    print(f"  gt:                 {g * 1e3:8.2f} ms/step   ratio {g / t:.2f}x")


if __name__ == "__main__":
    main()
