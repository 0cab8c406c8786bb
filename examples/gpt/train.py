"""A character-level GPT trained on gt: the GPL-3 text that every Debian
system ships (/usr/share/common-licenses/GPL-3, or any file given), with
AdamW and gradient clipping; prints the loss as it falls and samples text
at the end. The model (model.py) is the same source PyTorch runs.

    python3 examples/gpt/train.py [--steps 500] [--text FILE]
    python3 examples/gpt/train.py --steps 200 --save ckpt     # train, write ckpt/checkpoint.pt
    python3 examples/gpt/train.py --steps 500 --resume ckpt   # continue from step 201 to 500

Each step's randomness (its batch, its dropout masks) is seeded by the step's
number, so a resumed run draws what the uninterrupted one would have drawn and
its loss curve continues where the first run stopped. The checkpoint is a
PyTorch file (gt.save): torch.load reads it, and its "model" entry loads into
build(torch)'s GPT. It holds the optimizer's state too (PyTorch's layout: AdamW's
moments and step counts), so a resumed run takes the steps the uninterrupted one
would have taken.
"""

import argparse
import os
import pathlib
import sys
import time

import numpy as np

import gt
from model import build

DEFAULT_TEXT = "/usr/share/common-licenses/GPL-3"
CHECKPOINT = "checkpoint.pt"


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


def make_optimizer(name, params, lr):
    if name == "sgd":
        return gt.optim.SGD(params, lr=0.5 if lr is None else lr)
    return gt.optim.AdamW(params, lr=3e-3 if lr is None else lr, weight_decay=0.01)


def save_checkpoint(directory, model, optimizer, next_step, vocabulary):
    """DIR/checkpoint.pt (written whole or not at all: gt.save renames a complete file into place)."""
    os.makedirs(directory, exist_ok=True)
    state = {"model": model.state_dict(), "next_step": next_step, "vocabulary": vocabulary}
    state["optimizer"] = optimizer.state_dict()
    gt.save(state, os.path.join(directory, CHECKPOINT))
    print(f"saved {os.path.join(directory, CHECKPOINT)} at step {next_step}", flush=True)


def load_checkpoint(directory, model, optimizer, vocabulary):
    """The step to continue from, after loading the model and the optimizer."""
    state = gt.load(os.path.join(directory, CHECKPOINT))
    if state["vocabulary"] != vocabulary:
        raise SystemExit(f"{directory}: the checkpoint was trained on another text (vocabulary differs)")
    model.load_state_dict(state["model"])
    if "optimizer" in state:
        optimizer.load_state_dict(state["optimizer"])
    else:
        print("note: no optimizer state in the checkpoint; the optimizer starts afresh", flush=True)
    print(f"resumed from {os.path.join(directory, CHECKPOINT)} at step {state['next_step']}", flush=True)
    return state["next_step"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--text", default=DEFAULT_TEXT)
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
    parser.add_argument("--lr", type=float, default=None, help="default 3e-3 (AdamW), 0.5 (SGD)")
    parser.add_argument("--log-every", type=int, default=25)
    parser.add_argument("--save", metavar="DIR", help="write DIR/checkpoint.pt after the last step")
    parser.add_argument("--resume", metavar="DIR", help="continue from DIR/checkpoint.pt")
    parser.add_argument("--no-sample", action="store_true", help="skip the sample at the end")
    args = parser.parse_args()

    text = pathlib.Path(args.text).read_text(errors="replace")
    chars = sorted(set(text))
    stoi, itos = {c: i for i, c in enumerate(chars)}, dict(enumerate(chars))
    data = np.array([stoi[c] for c in text], dtype=np.int64)
    gt.manual_seed(0)

    GPT = build(gt)
    model = GPT(len(chars), args.block_size, d_model=64, heads=4, layers=2, dropout=0.1)
    params = model.parameters()
    optimizer = make_optimizer(args.optimizer, params, args.lr)
    print(f"gpt: {len(text)} characters, vocabulary {len(chars)}, "
          f"{sum(int(np.prod(p.shape)) for p in params)} parameters", flush=True)

    start = load_checkpoint(args.resume, model, optimizer, "".join(chars)) if args.resume else 0

    started = time.monotonic()
    first = last = None
    for step in range(start, args.steps + 1):
        gt.manual_seed(1000 + step)  # this step's dropout masks and batch depend on its number alone
        x, y = batches(data, args.block_size, args.batch_size, np.random.default_rng(step))
        optimizer.zero_grad()
        loss = model.loss(x, y)
        loss.backward()
        gt.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        if step % args.log_every == 0:
            last = loss.item()
            first = last if first is None else first
            print(f"step {step:4d}  loss {last:.6f}", flush=True)
    print(f"trained steps {start}..{args.steps} in {time.monotonic() - started:.1f} s; loss {first:.3f} -> {last:.3f}")
    if args.save:
        save_checkpoint(args.save, model, optimizer, args.steps + 1, "".join(chars))
    if not args.no_sample:
        print("sample:", repr(sample(model, stoi, itos, "This License", 80, np.random.default_rng(0))))
    return 0 if args.resume or last < first else 1


if __name__ == "__main__":
    sys.exit(main())
