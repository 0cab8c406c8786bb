"""A character-level GPT trained on gt: the GPL-3 text that every Debian
system ships (/usr/share/common-licenses/GPL-3, or any file given), with
AdamW and gradient clipping; prints the loss as it falls and samples text
at the end. The model (model.py) is the same source PyTorch runs.

    python3 examples/gpt/train.py [--steps 500] [--text FILE]
"""

import argparse
import pathlib
import sys
import time

import numpy as np

import gt
from model import build

DEFAULT_TEXT = "/usr/share/common-licenses/GPL-3"


def batches(data, block_size, batch_size, rng):
    """Random windows of the text and the same windows one character on."""
    starts = rng.integers(0, len(data) - block_size - 1, batch_size)
    x = np.stack([data[s:s + block_size] for s in starts])
    y = np.stack([data[s + 1:s + block_size + 1] for s in starts])
    return gt.tensor(x), gt.tensor(y)


def sample(model, stoi, itos, prompt, length, rng):
    """Characters drawn one at a time from the model's next-character distribution."""
    model.eval()
    ids = [stoi[c] for c in prompt if c in stoi]
    with gt.no_grad():
        for _ in range(length):
            window = ids[-model.block_size:]
            logits = model(gt.tensor(np.array([window])))
            probs = logits[0, -1].softmax(-1).numpy().astype(np.float64)
            ids.append(int(rng.choice(len(probs), p=probs / probs.sum())))
    model.train()
    return "".join(itos[i] for i in ids)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--text", default=DEFAULT_TEXT)
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()

    text = pathlib.Path(args.text).read_text(errors="replace")
    chars = sorted(set(text))
    stoi, itos = {c: i for i, c in enumerate(chars)}, dict(enumerate(chars))
    data = np.array([stoi[c] for c in text], dtype=np.int64)
    rng = np.random.default_rng(0)
    gt.manual_seed(0)

    GPT = build(gt)
    model = GPT(len(chars), args.block_size, d_model=64, heads=4, layers=2, dropout=0.1)
    params = model.parameters()
    optimizer = gt.optim.AdamW(params, lr=3e-3, weight_decay=0.01)
    print(f"gpt: {len(text)} characters, vocabulary {len(chars)}, "
          f"{sum(int(np.prod(p.shape)) for p in params)} parameters", flush=True)

    started = time.monotonic()
    first = last = None
    for step in range(args.steps + 1):
        x, y = batches(data, args.block_size, args.batch_size, rng)
        optimizer.zero_grad()
        loss = model.loss(x, y)
        loss.backward()
        gt.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        if step % 25 == 0:
            last = loss.item()
            first = last if first is None else first
            print(f"step {step:4d}  loss {last:.3f}", flush=True)
    print(f"trained {args.steps} steps in {time.monotonic() - started:.1f} s; loss {first:.3f} -> {last:.3f}")
    print("sample:", repr(sample(model, stoi, itos, "This License", 80, rng)))
    return 0 if last < first else 1


if __name__ == "__main__":
    sys.exit(main())
