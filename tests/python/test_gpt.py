"""A GPT (examples/gpt/model.py, one source for gt and PyTorch) trained on gt
against the same model in PyTorch in this process: same parameter names,
same initial weights (copied by name), five AdamW steps with gradient
clipping; losses and every parameter within 1e-4.
"""

import pathlib
import sys

import numpy as np
import torch

import gt

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "gpt"))
from model import build  # noqa: E402

CONFIG = dict(vocab=13, block_size=8, d_model=16, heads=2, layers=2)


def models():
    gt.manual_seed(7)
    ours, theirs = build(gt)(**CONFIG), build(torch)(**CONFIG)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    by_name = dict(theirs.named_parameters())
    with torch.no_grad():
        for name, p in ours.named_parameters():
            assert tuple(p.shape) == tuple(by_name[name].shape), name
            by_name[name].copy_(torch.from_numpy(p.numpy()))
    return ours, theirs


def test_gpt_trains_as_in_pytorch_for_five_adamw_steps(rng):
    ours, theirs = models()
    idx = rng.integers(0, CONFIG["vocab"], (4, CONFIG["block_size"]))
    targets = np.roll(idx, -1, axis=1)
    x, y = gt.tensor(idx), gt.tensor(targets)
    tx, ty = torch.from_numpy(idx), torch.from_numpy(targets)
    opt = gt.optim.AdamW(ours.parameters(), lr=1e-2)
    topt = torch.optim.AdamW(theirs.parameters(), lr=1e-2)
    losses, tlosses = [], []
    for _ in range(5):
        opt.zero_grad()
        topt.zero_grad()
        loss, tloss = ours.loss(x, y), theirs.loss(tx, ty)
        loss.backward()
        tloss.backward()
        norm = gt.nn.utils.clip_grad_norm_(ours.parameters(), 0.5)
        tnorm = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.5)
        assert abs(norm.item() - tnorm.item()) < 1e-4 * max(1.0, tnorm.item())
        opt.step()
        topt.step()
        losses.append(loss.item())
        tlosses.append(tloss.item())
    np.testing.assert_allclose(losses, tlosses, atol=1e-4, rtol=0)
    assert losses[-1] < losses[0]  # it learns
    theirs_by_name = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.numpy(), theirs_by_name[name].detach().numpy(), atol=1e-4, rtol=0, err_msg=name)


def test_eval_turns_dropout_off():
    gt.manual_seed(1)
    model = build(gt)(**CONFIG, dropout=0.5)
    idx = gt.tensor(np.arange(8).reshape(1, 8) % CONFIG["vocab"])
    model.eval()
    a, b = model(idx).numpy(), model(idx).numpy()
    np.testing.assert_array_equal(a, b)
    model.train()
    assert not np.array_equal(model(idx).numpy(), a)
