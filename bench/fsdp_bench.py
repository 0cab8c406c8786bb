"""FSDP (gt.distributed.fully_shard) against replicated data parallel on the
same workers: the tensor bytes each worker holds for the model once a
training step is done (gt_worker_resident_bytes, deltas from before the
model was made), and the step time; the same model and batches on one
worker as the baseline.

An MLP of four Linear layers (256 -> 1024 -> 1024 -> 1024 -> 256, 2.6 M
parameters), AdamW, batch 64 split along dim 0 over the workers;
loss.item() every step. What a worker holds after a step is its parameters
and the optimizer's two moment estimates (the gradients are set to None):
replicated, three full copies of the parameters per worker; fully sharded,
three quarters-of-a-copy on four workers. During the step an FSDP worker
also holds the weights it gathered for the layer at hand. On four workers a
fourth row lays the same model on a 2 x 2 data x model mesh (the batch split
along "data", the layers split Megatron-style along "model"): each worker
holds half of every weight.

    GT_WORKERS=4 PYTHONPATH=build/python /usr/bin/python3 bench/fsdp_bench.py [runs] [steps]
"""

import gc
import statistics
import sys

import numpy as np

import gt
from gt.distributed import DeviceMesh, Replicate, Shard, distribute_tensor, fully_shard

sys.path.insert(0, __import__("os").path.dirname(__file__))
from mlp_bench import median_step_seconds  # noqa: E402

SIZES = [256, 1024, 1024, 1024, 256]
BATCH = 64


class MLP(gt.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = gt.nn.ModuleList([gt.nn.Linear(a, b) for a, b in zip(SIZES, SIZES[1:])])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = x.relu()
        return x


def resident():
    """{worker instance: gt_worker_resident_bytes} (a sync point)."""
    out = {}
    for name, h in gt.debug.get_worker_stats().items():
        if h and h["host"] == "worker":
            out[name] = sum(s["value"] for s in h["samples"] if s["name"] == "gt_worker_resident_bytes")
    return out


def measure(label, make_model, place, runs, steps, data):
    gc.collect()
    before = resident()
    model = make_model()
    opt = gt.optim.AdamW(model.parameters(), lr=1e-3)
    x, t = place(data[0]), place(data[1])

    def step():
        loss = ((model(x) - t) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.item()

    seconds = median_step_seconds(step, runs, steps)
    after = resident()
    held = sorted((after[w] - before.get(w, 0)) / 2**20 for w in after)
    del model, opt, x, t, step
    gc.collect()
    gt.sync()
    return label, seconds, held


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    workers = len(resident())
    mesh = DeviceMesh(list(range(workers)), ("data",))
    rng = np.random.default_rng(0)
    data = (rng.standard_normal((BATCH, SIZES[0])).astype(np.float32),
            rng.standard_normal((BATCH, SIZES[-1])).astype(np.float32))
    gt.manual_seed(0)
    initial = {n: p.numpy() for n, p in MLP().named_parameters()}
    params = sum(v.size for v in initial.values())
    split = lambda a: distribute_tensor(gt.tensor(a), mesh, [Shard(0)])  # noqa: E731

    def whole():
        m = MLP()
        m.load_state_dict(initial)
        return m

    def replicated():
        m = whole()
        for _, owner in m.named_modules():
            for name, value in list(vars(owner).items()):
                if isinstance(value, gt.Tensor) and value.requires_grad:
                    setattr(owner, name, distribute_tensor(value.detach(), mesh, [Replicate()]).requires_grad_())
        return m

    def data_by_model():
        """2 x 2 mesh: the batch split along "data"; the layers Megatron pairs along "model"
        (even layers split by output features, odd ones by input features)."""
        m = whole()
        for i, layer in enumerate(m.layers):
            weight = [Replicate(), Shard(0)] if i % 2 == 0 else [Replicate(), Shard(1)]
            bias = [Replicate(), Shard(0)] if i % 2 == 0 else [Replicate(), Replicate()]
            layer.weight = distribute_tensor(layer.weight.detach(), grid, weight).requires_grad_()
            layer.bias = distribute_tensor(layer.bias.detach(), grid, bias).requires_grad_()
        return m

    grid = DeviceMesh([[0, 1], [2, 3]], ("data", "model")) if workers == 4 else None
    rows = [measure("one worker (whole tensors)", whole, gt.tensor, runs, steps, data),
            measure(f"data parallel, replicated, {workers} workers", replicated, split, runs, steps, data),
            measure(f"fully sharded (FSDP), {workers} workers", lambda: fully_shard(whole(), mesh), split, runs, steps,
                    data)]
    if grid is not None:
        rows.append(measure("2-D data x model (2 x 2 mesh)", data_by_model,
                            lambda a: distribute_tensor(gt.tensor(a), grid, [Shard(0), Replicate()]), runs, steps, data))
    print(f"gt FSDP benchmark: MLP {SIZES} ({params / 1e6:.2f} M parameters, {params * 4 / 2**20:.1f} MiB), "
          f"batch {BATCH}, AdamW, median of {runs} runs x {steps} steps")
    base = rows[0][1]
    for label, seconds, held in rows:
        print(f"  {label:38s} {seconds * 1e3:8.2f} ms/step ({seconds / base:.2f}x)   "
              f"MiB held per worker after a step: {', '.join(f'{h:.1f}' for h in held)}")


if __name__ == "__main__":
    main()
