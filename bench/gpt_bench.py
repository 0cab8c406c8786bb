"""One training step of the example GPT (examples/gpt/model.py): gt against
the same model in PyTorch in this same process.

Character-level GPT, vocab 76, block 32, d_model 64, 4 heads, 2 layers,
batch 16; AdamW + clip_grad_norm_ + loss.item() every step (the sync point).
Both sides start from the same weights and data, and run in paired rounds.
Prints the median step time of each, the median of the rounds' ratios (and
their range), and how many instructions gt's workers ran per step (the
per-op cost is what a small model's step is made of).

With --data-parallel (and GT_WORKERS=2): gt's tokens per second on one
worker (whole tensors) against data parallel on two (the batch split in
two, parameters replicated), in the same process, interleaved.

    PYTHONPATH=build/python /usr/bin/python3 bench/gpt_bench.py [runs] [steps]
    GT_WORKERS=2 PYTHONPATH=build/python /usr/bin/python3 bench/gpt_bench.py --data-parallel [runs] [steps]
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
ROUNDS = 7


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


def worker_instructions():
    return sum(h["instructions"] for h in gt.debug.get_worker_stats().values() if h and h["host"] == "worker")


def instructions_per_step(step, steps=5):
    before = worker_instructions()
    for _ in range(steps):
        step()
    return (worker_instructions() - before) / steps


def data_parallel(runs, steps, batch=32):
    """Tokens/s of one gt worker against two data-parallel ones (GT_WORKERS=2)."""
    rng = np.random.default_rng(0)
    idx = rng.integers(0, CONFIG["vocab"], (batch, CONFIG["block_size"]))
    targets = np.roll(idx, -1, axis=1)
    gt.manual_seed(0)
    one = build(gt)(**CONFIG)
    one_step = trainer(gt, one, gt.optim.AdamW(one.parameters(), lr=1e-3), gt.tensor(idx), gt.tensor(targets))
    gt.register_config("replicated", gt.SignalConfig(replicated=True))
    gt.register_config("batch", gt.SignalConfig(shard=gt.ShardConfig(axis=0, workers=[0, 1])))
    gt.manual_seed(0)
    with gt.signal.context("replicated"):
        two = build(gt)(**CONFIG)
    with gt.signal.context("batch"):
        x, y = gt.tensor(idx), gt.tensor(targets)
    two_step = trainer(gt, two, gt.optim.AdamW(two.parameters(), lr=1e-3), x, y)
    one_times, two_times = [], []
    for _ in range(3):
        one_times.append(median_step_seconds(one_step, runs, steps))
        two_times.append(median_step_seconds(two_step, runs, steps))
    tokens = batch * CONFIG["block_size"]
    o, t = tokens / statistics.median(one_times), tokens / statistics.median(two_times)
    print(f"gt GPT data-parallel benchmark: {CONFIG}, batch {batch}, AdamW + clip_grad_norm_, loss.item() every step; "
          f"median of 3 interleaved rounds of {runs} runs x {steps} steps")
    print(f"  one worker:                  {o:9.0f} tokens/s")
    print(f"  two workers, data parallel:  {t:9.0f} tokens/s   ratio {t / o:.2f}x")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = int(args[0]) if len(args) > 0 else 5
    steps = int(args[1]) if len(args) > 1 else 20
    if "--data-parallel" in sys.argv:
        return data_parallel(runs, steps)
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
    # Paired rounds, who goes first alternating: this VM's speed drifts by
    # 30 % within a minute, so the ratio is taken inside each round and the
    # median of the rounds' ratios reported (as bench_timing.h does).
    gt_times, torch_times = [], []
    for round_ in range(ROUNDS):
        pair = [(gt_times, gt_step), (torch_times, torch_step)]
        for times, step in pair if round_ % 2 == 0 else pair[::-1]:
            times.append(median_step_seconds(step, runs, steps))
    g, t = statistics.median(gt_times), statistics.median(torch_times)
    ratio = statistics.median(a / b for a, b in zip(gt_times, torch_times))
    print(f"gt GPT step benchmark: {CONFIG}, batch 16, AdamW + clip_grad_norm_, loss.item() every step; "
          f"PyTorch {torch.__version__} with {torch.get_num_threads()} intra-op threads; "
          f"{ROUNDS} paired rounds of {runs} runs x {steps} steps")
    print(f"  PyTorch in-process: {t * 1e3:8.2f} ms/step (median of rounds)")
    print(f"  gt:                 {g * 1e3:8.2f} ms/step   ratio {ratio:.2f}x (median of the rounds' ratios, "
          f"{min(a / b for a, b in zip(gt_times, torch_times)):.2f}x to {max(a / b for a, b in zip(gt_times, torch_times)):.2f}x)")
    per_step = instructions_per_step(gt_step)
    print(f"  gt's workers ran {per_step:.0f} instructions per step: "
          f"{(g - t) / per_step * 1e6:.1f} us of difference per instruction")


if __name__ == "__main__":
    main()
