"""Every Python example in examples/ runs (a fresh interpreter, on the embedded
default unless it starts its own cluster), exits 0 within seconds, and prints
its key lines; where an example computes something, the numbers are checked
here against NumPy too, not only by the example itself.

The examples are the Python counterparts of those the seeds (the
predecessor's manual) name: demo.py, signal_demo.py, compile_demo.py,
debug_demo.py, simple_launch.py, config_from_python.py; and the seeds'
auto-sharding and worker-stats features as auto_shard_demo.py and
show_stats.py.
"""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import gt

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

# Variables that change what the examples do: each run starts without them
# (ctest sets GT_WORKERS=4 for the other tests), so an example sees the
# embedded default's own defaults and sets what it needs itself.
_CLEARED = ("GT_WORKERS", "GT_CONFIG", "GT_COMPILE", "GT_WORKER_BATCH_SIZE", "GT_CLIENT_MANIFEST", "GT_AUTO_SHARD",
            "GT_EXPLAIN", "GT_INSTRUCTION_LOG", "GT_HOTPATH_WINDOW", "GT_HOTPATH_THRESHOLD", "GT_HOTPATH_MIN_SEQ",
            "GT_HOTPATH_MAX_EXPAND")


def run_example(name, *args, env=None, timeout=120):
    full = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    # The gt package this process imported (build/python under ctest), as conftest.run_python does.
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(gt.__file__)))
    full["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    full.update(env or {})
    # sys.executable: /usr/bin/python3 under ctest, the interpreter the package is built for.
    out = subprocess.run([sys.executable, str(EXAMPLES / name), *args], env=full, cwd=str(REPO),
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{name} exited {out.returncode}\nstdout:\n{out.stdout[-3000:]}\nstderr:\n{out.stderr[-3000:]}"
    return out


def line_starting(text, prefix):
    found = [l for l in text.splitlines() if l.startswith(prefix)]
    assert found, f"no line starting {prefix!r} in:\n{text}"
    return found[0]


def test_every_python_example_has_a_test():
    tested = {"demo.py", "signal_demo.py", "compile_demo.py", "debug_demo.py", "simple_launch.py",
              "config_from_python.py", "auto_shard_demo.py", "show_stats.py", "mesh_2d.py",
              "mlp_train.py"}  # mlp_train.py: test_seed_readme.py::test_mlp_train_example_runs
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested
    # examples/gpt: train.py below; model.py also in test_gpt.py against PyTorch.
    assert {p.name for p in (EXAMPLES / "gpt").glob("*.py")} == {"train.py", "model.py"}
    # examples/cnn: main.py below (test_cnn_example_*).
    assert {p.name for p in (EXAMPLES / "cnn").glob("*.py")} == {"main.py"}


def test_gpt_train_loss_falls_and_it_samples():
    out = run_example("gpt/train.py", "--steps", "50", timeout=300).stdout
    assert line_starting(out, "gpt: 35149 characters")
    losses = [float(m) for m in re.findall(r"^step +\d+  loss ([0-9.]+)$", out, re.M)]
    assert len(losses) == 3 and losses[-1] < losses[0] - 0.5, out  # from ~ln(vocab) down
    sample = line_starting(out, "sample: ")
    assert sample.startswith("sample: 'This License") and len(eval(sample[len("sample: "):])) == 92


def gpt_losses(out):
    return {int(m[0]): float(m[1]) for m in re.findall(r"^step +(\d+)  loss ([0-9.]+)$", out, re.M)}


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_gpt_resumed_run_continues_the_loss_curve(tmp_path, optimizer):
    """Stopped after step 3 and resumed in a new process on another worker count (the checkpoint
    holds the model and AdamW's moments and step counts), steps 4-6 equal the uninterrupted run's."""
    common = ("--optimizer", optimizer, "--log-every", "1", "--no-sample")
    whole = gpt_losses(run_example("gpt/train.py", "--steps", "6", *common, timeout=300).stdout)
    first = run_example("gpt/train.py", "--steps", "3", "--save", str(tmp_path), *common, timeout=300).stdout
    assert line_starting(first, "saved ").endswith("at step 4") and sorted(gpt_losses(first)) == [0, 1, 2, 3]
    second = run_example("gpt/train.py", "--steps", "6", "--resume", str(tmp_path), *common,
                         env={"GT_WORKERS": "4"}, timeout=300).stdout
    assert line_starting(second, "resumed from ").endswith("at step 4")
    resumed = gpt_losses(second)
    assert sorted(resumed) == [4, 5, 6]
    for step, loss in resumed.items():
        assert abs(loss - whole[step]) <= 2e-6, (step, loss, whole)
    assert whole[3] == gpt_losses(first)[3]
    # The checkpoint is a PyTorch file whose model loads into the same GPT built on torch.
    import torch
    sys.path.insert(0, str(EXAMPLES / "gpt"))
    from model import build
    state = torch.load(tmp_path / "checkpoint.pt")
    assert state["next_step"] == 4
    theirs = build(torch)(len(state["vocabulary"]), 32, d_model=64, heads=4, layers=2, dropout=0.1)
    theirs.load_state_dict(state["model"])


def test_mesh_2d_trains_data_by_model_parallel():
    out = run_example("mesh_2d.py").stdout
    losses = [float(m) for m in re.findall(r"^step +\d+  loss ([0-9.]+)$", out, re.M)]
    assert len(losses) == 4 and losses[-1] < losses[0] / 2, out
    assert line_starting(out, "hidden activations:") == "hidden activations: [Shard(dim=0), Shard(dim=1)]"
    pattern = line_starting(out, "pattern:")
    assert "along 'model': tensor parallel: 2 all-reduces" in pattern and "along 'data': data parallel" in pattern
    worst = float(line_starting(out, "weights after 30 steps").split()[-1])
    assert worst < 1e-5, out


def test_demo():
    out = run_example("demo.py").stdout
    a = np.array([[1, 2], [3, 4]], dtype=np.float32)
    b = np.array([[5, 6], [7, 8]], dtype=np.float32)
    assert str((a @ b).tolist()) in line_starting(out, "a @ b ")
    assert str((a + b).tolist()) in line_starting(out, "a + b ")
    assert str((a * b).sum(axis=1).tolist()) in line_starting(out, "(a * b).sum(dim=1)")
    assert "shape error caught at the call: matmul: shapes [2, 2] and [3, 3]" in out
    assert "demo: 8/8 results equal NumPy's" in out
    assert "MISMATCH" not in out


def test_signal_demo():
    out = run_example("signal_demo.py").stdout
    assert line_starting(out, "loaded 7 signals from config_sharding.yaml: forward_layer1, backward_layer1")
    # The batch split over four workers: every worker holds tensors after the data-parallel part.
    counts = re.findall(r": (\d+)", line_starting(out, "data parallel (forward_layer1, params):"))
    assert len(counts) == 4 and all(int(c) > 0 for c in counts), out
    assert "DIFFERS" not in out
    assert "signal demo: 5/5 results equal NumPy's" in out


def test_compile_demo():
    out = run_example("compile_demo.py").stdout
    assert "compile boundaries in config_compile.yaml: hot_path, forward_pass, backward_pass" in out
    assert "weights after 5 steps equal NumPy's" in out
    sent = int(line_starting(out, "run_unit instructions sent by the compile stages:").split(":")[1])
    executed = int(line_starting(out, "compiled units executed by the workers:").split(":")[1])
    assert sent >= 4, out  # forward_pass replayed as a unit after its first run
    assert executed >= sent, out  # each replay ran (on every worker it is placed on)

    # The first step's loss, as NumPy computes it from the example's data.
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    y = rng.standard_normal((8, 3)).astype(np.float32)
    w1 = (rng.standard_normal((6, 5)) * 0.5).astype(np.float32)
    w2 = (rng.standard_normal((5, 3)) * 0.5).astype(np.float32)
    loss0 = float(line_starting(out, "step 0: loss").split()[-1])
    assert loss0 == pytest.approx(float(((np.tanh(x @ w1) @ w2 - y) ** 2).mean()), rel=1e-4)


def test_compile_demo_eager_gives_the_same_weights():
    out = run_example("compile_demo.py", env={"GT_COMPILE": "0"}).stdout
    assert "weights after 5 steps equal NumPy's" in out
    assert line_starting(out, "run_unit instructions sent") == "run_unit instructions sent by the compile stages: 0"
    assert line_starting(out, "compiled units executed") == "compiled units executed by the workers: 0"


def test_debug_demo(tmp_path):
    log = tmp_path / "ops.log"
    out = run_example("debug_demo.py", "--explain", env={"GT_INSTRUCTION_LOG": str(log)})
    assert "autograd tape: 4 recorded ops" in out.stdout
    assert re.search(r"#0\s+matmul\s+%\d+ <- %\d+, %\d+\s+\[layer1\]", out.stdout), out.stdout
    assert "d loss / d a equals NumPy's" in out.stdout
    a = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    h = np.maximum(a @ np.ones((3, 2), dtype=np.float32), 0)
    assert float(line_starting(out.stdout, "loss ").split()[1].rstrip(";")) == pytest.approx(float((h * h).sum()),
                                                                                            abs=1e-4)
    assert f"== instruction log {log}:" in out.stdout
    assert "ops received, in order: configure from_bytes from_bytes matmul relu mul sum" in out.stdout
    assert log.read_text().count("RECV") > 10
    # --explain: the sharding stage's placement lines, a sharded from_bytes among them.
    assert re.search(r"gt explain: from_bytes #\d+ \[layer1\]: -> sharded\(axis 0\) on \[0, 1\]", out.stderr), out.stderr


def test_config_from_python():
    out = run_example("config_from_python.py").stdout
    assert "batch size 256: the batch is split over workers [0, 1, 2, 3]" in out
    assert "loss and d loss / d w equal NumPy's" in out
    out = run_example("config_from_python.py", "--batch-size", "32").stdout
    assert "batch size 32: the batch is split over workers [0, 1]" in out
    assert "loss and d loss / d w equal NumPy's" in out


def test_auto_shard_demo():
    out = run_example("auto_shard_demo.py")
    # 8 rows over 4 workers, 5 rows replicated: each worker holds two tensors.
    assert line_starting(out.stdout, "GT_AUTO_SHARD=1:").endswith("[2, 2, 2, 2]"), out.stdout
    a = np.arange(24, dtype=np.float32).reshape(8, 3)
    assert str((a * 2).sum(0).tolist()) in line_starting(out.stdout, "  (a * 2).sum(0)")
    assert "auto-shard demo: results equal NumPy's" in out.stdout
    assert re.search(r"from_bytes #\d+: -> sharded\(axis 0\) on \[0, 1, 2, 3\] sizes \[2, 2, 2, 2\]", out.stderr)
    assert re.search(r"from_bytes #\d+: -> replicated on \[0, 1, 2, 3\]", out.stderr)


def test_show_stats():
    out = run_example("show_stats.py").stdout
    assert "20 SGD steps: weights equal NumPy's" in out
    sent = int(line_starting(out, "run_unit instructions sent by the compile stages:").split(":")[1])
    executed = int(line_starting(out, "compiled units executed by the workers:").split(":")[1])
    # The repeated step ran as compiled units: each one the client's compile stage sent, a worker
    # executed (whole tensors: one worker each), and the per-host lines say the same.
    assert sent > 0 and executed == sent, out
    client = line_starting(out, "client (client):")
    assert f"{sent} run_unit instructions sent" in client, out
    workers = re.findall(r"^embedded-worker-\d+ \(worker\): \d+ instructions, (\d+) compiled units executed$", out, re.M)
    assert workers and sum(map(int, workers)) == executed, out
    assert re.search(r"^host\s+kind\s+instructions\s+compiled", out, re.M), out  # print_worker_stats' table
    assert "hot sequences:" in out and "client/hotpath" in out


def test_simple_launch():
    bin_dir = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))
    if not ((bin_dir / "gt-dispatcher").exists() and (bin_dir / "gt-worker").exists()):
        pytest.skip(f"gt-dispatcher / gt-worker not built in {bin_dir}")
    out = run_example("simple_launch.py").stdout
    assert "workers registered with the dispatcher: worker-0, worker-1" in out
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 16)).astype(np.float32)
    first = np.round(np.maximum(a @ b, 0).sum(axis=0)[:3].astype(np.float64), 4)
    line = line_starting(out, "relu(a @ b).sum(0) over tcp://127.0.0.1:")
    assert "equals NumPy's" in line
    got = [float(v) for v in re.search(r"first values \[(.*)\]", line).group(1).split(",")]
    np.testing.assert_allclose(got, first, rtol=1e-4, atol=1e-3)
    assert out.rstrip().endswith("stopped the server and workers")


# ---- examples/cnn: PyTorch's MNIST example with gt's names ------------------------------


def _cnn_example_module(monkeypatch):
    import importlib.util
    import types
    if not hasattr(gt.optim, "lr_scheduler"):
        # Only the model is compared here: a build without the optim work's schedulers still imports it.
        monkeypatch.setitem(sys.modules, "gt.optim.lr_scheduler", types.SimpleNamespace(StepLR=None))
    spec = importlib.util.spec_from_file_location("cnn_example", EXAMPLES / "cnn" / "main.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cnn_example_trains_and_tests():
    out = run_example("cnn/main.py", "--epochs", "1", "--train-size", "256", "--test-size", "200",
                      "--batch-size", "32", "--log-interval", "4", timeout=600).stdout
    assert line_starting(out, "Train Epoch: 1 [0/256 (0%)]")
    test_line = line_starting(out, "Test set: Average loss:")
    correct = int(re.search(r"Accuracy: (\d+)/200", test_line).group(1))
    assert correct > 60, out  # well above chance (20 of 200) after one epoch on patterned classes


def test_cnn_example_model_matches_torch(monkeypatch):
    """The example's Net against the same network in PyTorch with its weights copied in: log-probabilities,
    the NLL loss and every parameter's gradient (dropout off: eval mode on both sides)."""
    torch = pytest.importorskip("torch")
    example = _cnn_example_module(monkeypatch)
    ours = example.Net()

    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = torch.nn.Conv2d(1, 32, 3, 1), torch.nn.Conv2d(32, 64, 3, 1)
            self.fc1, self.fc2 = torch.nn.Linear(9216, 128), torch.nn.Linear(128, 10)

        def forward(self, x):
            x = torch.nn.functional.max_pool2d(self.conv2(self.conv1(x).relu()).relu(), 2)
            x = self.fc2(self.fc1(torch.flatten(x, 1)).relu())
            return torch.nn.functional.log_softmax(x, dim=1)

    theirs = TorchNet()
    params = dict(ours.named_parameters())
    assert sorted(params) == sorted(n for n, _ in theirs.named_parameters())
    for name, p in theirs.named_parameters():
        assert tuple(params[name].shape) == tuple(p.shape), name
        with gt.no_grad():
            params[name].copy_(gt.tensor(p.detach().numpy()))
    ours.eval()
    data = example.SyntheticMNIST(16, seed=3)
    out_g = ours(gt.tensor(data.data))
    out_t = theirs(torch.tensor(data.data))
    np.testing.assert_allclose(out_g.numpy(), out_t.detach().numpy(), rtol=1e-4, atol=1e-4)
    loss_g = example.F.nll_loss(out_g, gt.tensor(data.targets))
    loss_t = torch.nn.functional.nll_loss(out_t, torch.tensor(data.targets))
    np.testing.assert_allclose(loss_g.item(), loss_t.item(), rtol=1e-5)
    loss_g.backward()
    loss_t.backward()
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(params[name].grad.numpy(), p.grad.numpy(), rtol=1e-3, atol=1e-5, err_msg=name)
    pred = out_g.argmax(dim=1, keepdim=True)
    correct = pred.eq(gt.tensor(data.targets).view_as(pred)).sum().item()
    assert correct == int((out_t.argmax(dim=1) == torch.tensor(data.targets)).sum())
