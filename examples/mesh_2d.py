"""Two-dimensional parallelism: data x model on a 2 x 2 mesh of workers.

An MLP of two gt.nn.Linear layers learns y = sin(x W) on four embedded
workers laid out as DeviceMesh([[0, 1], [2, 3]], ("data", "model")): the
batch is split along "data", the first layer by output features and the
second by input features along "model" (Megatron's pair). Each worker
holds half of every weight and a quarter of each activation. Prints the
loss falling, where the activations live, and what one training step
communicates; then checks the weights against the same training on one
worker.

    python3 examples/mesh_2d.py
"""

import os

os.environ.setdefault("GT_WORKERS", "4")  # read when the embedded cluster starts (the first op)

import numpy as np  # noqa: E402

import gt  # noqa: E402
from gt.distributed import DeviceMesh, Replicate, Shard, distribute_tensor, record  # noqa: E402

D, H, BATCH, STEPS = 16, 64, 32, 30
rng = np.random.default_rng(0)
W = rng.standard_normal((D, D)).astype(np.float32) / np.sqrt(D)
xs = rng.standard_normal((STEPS, BATCH, D)).astype(np.float32)
ys = np.sin(xs @ W)

grid = DeviceMesh([[0, 1], [2, 3]], ("data", "model"))
PLACEMENTS = {"0.weight": [Replicate(), Shard(0)], "0.bias": [Replicate(), Shard(0)],  # by output features
              "2.weight": [Replicate(), Shard(1)], "2.bias": [Replicate(), Replicate()]}  # by input features
BATCH_SPLIT = [Shard(0), Replicate()]


def model_on(mesh, initial):
    """Linear, GELU, Linear with the `initial` weights ({name: array}), laid out on `mesh` by
    PLACEMENTS (None: whole tensors on one worker)."""
    hidden, features = initial["0.weight"].shape
    model = gt.nn.Sequential(gt.nn.Linear(features, hidden), gt.nn.GELU(), gt.nn.Linear(hidden, features))
    modules = dict(model.named_modules())
    for name, value in initial.items():
        owner, _, attr = name.rpartition(".")
        t = gt.from_numpy(value)
        if mesh is not None:
            t = distribute_tensor(t, mesh, PLACEMENTS[name])
        setattr(modules[owner], attr, t.requires_grad_())
    return model


def train(mesh, initial, report):
    model = model_on(mesh, initial)
    opt = gt.optim.Adam(model.parameters(), lr=0.01)
    for step in range(STEPS):
        x, y = gt.from_numpy(xs[step]), gt.from_numpy(ys[step])
        if mesh is not None:
            x, y = distribute_tensor(x, mesh, BATCH_SPLIT), distribute_tensor(y, mesh, BATCH_SPLIT)
        with record() as r:
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            value = loss.item()
        if report and step % 10 == 0:
            print(f"step {step:2d}  loss {value:.4f}")
        if report and step == STEPS - 1:
            print(f"step {step:2d}  loss {value:.4f}")
            print("one training step's collectives:")
            print(r.table())
    return model


def main():
    gt.manual_seed(0)
    initial = {n: p.numpy() for n, p in gt.nn.Sequential(gt.nn.Linear(D, H), gt.nn.GELU(),
                                                          gt.nn.Linear(H, D)).named_parameters()}
    print(f"mesh: {grid!r}")
    model = train(grid, initial, report=True)
    x = distribute_tensor(gt.from_numpy(xs[0]), grid, BATCH_SPLIT)
    with gt.no_grad():
        hidden = model[1](model[0](x))
    print(f"hidden activations: {hidden.placements}")  # cut along both dims, no collective
    print(f"first weight: {model[0].weight.placements}, second weight: {model[2].weight.placements}")
    reference = train(None, initial, report=False)
    worst = max(float(np.abs(p.numpy() - q.numpy()).max())
                for p, q in zip(model.parameters(), reference.parameters()))
    print(f"weights after {STEPS} steps: largest difference from one worker {worst:.2e}")


if __name__ == "__main__":
    main()
