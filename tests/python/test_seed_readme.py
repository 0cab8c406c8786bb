"""The code blocks of the GT2 README (seed 001) and of the signal guide
(seed 000) that do not depend on sharding, run as written (with the data they
leave undefined filled in), checking their results."""

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gt
from gt.nn import Module, Linear, SGD

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_quick_start():
    a = gt.randn(1000, 1000)
    b = gt.randn(1000, 1000)
    c = a @ b
    result = c.data.numpy()
    assert result.shape == (1000, 1000) and result.dtype == np.float32
    np.testing.assert_allclose(result, a.numpy() @ b.numpy(), rtol=1e-3, atol=1e-3)


def test_auto_server_mode():
    a = gt.tensor([1, 2, 3, 4])
    b = gt.tensor([5, 6, 7, 8])
    c = a + b
    data = c.data.numpy()
    np.testing.assert_array_equal(data, [6, 8, 10, 12])


def test_gpu_workers_before_the_first_op(python):
    code = textwrap.dedent("""\
        import gt
        gt.gpu_workers(4)  # Must call before tensor operations

        a = gt.randn(1000, 1000)
        print(a.shape, float((a * 0).sum()))
        try:
            gt.gpu_workers(2)
        except gt.Error as e:
            print("late:", e)
        """)
    result = python(code)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "(1000, 1000) 0.0"
    assert lines[1].startswith("late:") and "before the first tensor op" in lines[1]


def test_distributed_setup_with_connect(python, processes):
    """README 'Distributed Setup': a dispatcher and workers started by hand, a client that connects."""
    with processes(workers=2) as port:
        code = textwrap.dedent(f"""\
            import gt

            gt.connect('localhost:{port}')
            a = gt.randn(300, 200)
            b = gt.randn(200, 100)
            c = a @ b
            import numpy as np
            print(np.allclose(c.numpy(), a.numpy() @ b.numpy(), rtol=1e-4, atol=1e-4))
            """)
        result = python(code, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "True"


def test_autograd_training_loop():
    # README 'Autograd Support', on small synthetic data.
    class MLP(Module):
        def __init__(self):
            super().__init__()
            self.fc1 = Linear(784, 256)
            self.fc2 = Linear(256, 10)

        def forward(self, x):
            x = self.fc1(x).relu()
            return self.fc2(x)

    data = np.random.default_rng(0)
    X_train = gt.tensor(data.standard_normal((32, 784)).astype(np.float32))
    y_train = gt.tensor(data.standard_normal((32, 10)).astype(np.float32))

    model = MLP()
    optimizer = SGD(model.parameters(), lr=0.01)

    losses = []
    for epoch in range(100):
        pred = model(X_train)
        loss = ((pred - y_train) ** 2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0] * 0.9
    assert np.all(np.diff(losses) < 1e-6)  # full-batch gradient descent at a small step: monotone


def test_api_reference_model_block():
    input_size, hidden_size, output_size = 8, 16, 2

    class MyModel(Module):
        def __init__(self):
            super().__init__()
            self.layer1 = Linear(input_size, hidden_size)
            self.layer2 = Linear(hidden_size, output_size)

        def forward(self, x):
            x = self.layer1(x).relu()
            return self.layer2(x)

    model = MyModel()
    optimizer = SGD(model.parameters(), lr=0.01)
    assert len(optimizer.params) == 4
    assert model(gt.randn(3, input_size)).shape == (3, output_size)


def test_api_reference_autograd_block():
    a = gt.randn(3, 4, requires_grad=True)
    b = gt.from_numpy(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    loss = (a * 2).sum()
    loss.backward()
    assert a.grad.data.numpy().tolist() == [[2.0] * 4] * 3
    assert b.requires_grad and b.dtype is gt.float64


def test_api_reference_ops_list():
    x = gt.randn(4, 3, requires_grad=True)
    w = gt.randn(3, 5)
    y = ((x @ w).relu() + x.sum(1, keepdim=True).sigmoid() * 2 - 1) / 3
    z = y.tanh().exp().log().mean() + y.transpose().sum() + y.T.sum()
    z.backward()
    assert x.grad.shape == (4, 3)
    with gt.no_grad():
        x -= x.grad * 0.1
    x.grad.zero_()


def test_signal_guide_quick_example(tmp_path, python):
    (tmp_path / "config.yaml").write_text(textwrap.dedent("""\
        forward_layer1:
          shard:
            axis: 0                  # Shard batch dimension
            workers: [0, 1, 2, 3]    # Use workers 0-3
          backward: backward_layer1  # Different config for gradients

        backward_layer1:
          shard:
            axis: 0
            workers: [0, 1, 2, 3]
        """))
    code = textwrap.dedent("""\
        import os
        os.environ['GT_CONFIG'] = 'config.yaml'
        import gt

        w = gt.randn(64, 32)
        # Shards tensors AND compute across workers [0,1,2,3]
        with gt.signal.context('forward_layer1'):
            x = gt.randn(100, 64)  # Sharded on axis 0
            y = x @ w              # Compute in sharded mode
        print(y.shape, gt.get_config('backward_layer1').shard.workers)
        """)
    result = python(code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(100, 32) [0, 1, 2, 3]"


def test_signal_guide_complete_example():
    gt.load_config(pathlib.Path(__file__).parent / "configs" / "training_config.yaml")

    class Model(Module):
        def __init__(self):
            super().__init__()
            self.layer = Linear(784, 10)

        def forward(self, x):
            return self.layer(x)

    X_train, y_train = gt.randn(16, 784), gt.randn(16, 10)
    model = Model()
    optimizer = SGD(model.parameters(), lr=0.01)
    losses = []
    for epoch in range(5):
        with gt.signal.context('forward_pass'):
            pred = model(X_train)
            loss = ((pred - y_train) ** 2).mean()
        loss.backward()
        with gt.signal.context('parameter_updates'):
            optimizer.step()
            optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_instruction_log(tmp_path, python):
    log = tmp_path / "ops.log"
    code = textwrap.dedent("""\
        import gt
        a = gt.randn(10, 10)
        b = gt.randn(10, 10)
        c = a @ b
        print(c.data.numpy().shape)
        """)
    result = python(code, env={"GT_INSTRUCTION_LOG": str(log)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(10, 10)"
    lines = log.read_text().splitlines()
    ops = [line.split("|")[4].strip() for line in lines if "RECV" in line]
    assert ops[:4] == ["randn", "randn", "matmul", "fetch"], lines
    matmul = next(line for line in lines if "| matmul" in line)
    assert "client 1" in matmul and "operands=%1,%2" in matmul


def test_debug_utilities(capsys):
    gt.debug.clear_tape()
    a = gt.randn(10, 10, requires_grad=True)
    b = gt.randn(10, 10, requires_grad=True)
    loss = (a + b).sum()
    tape = gt.debug.get_tape()
    assert [e["op"] for e in tape] == ["add", "sum"]
    add, total = tape
    assert add["inputs"] == [a._c.id(), b._c.id()] and add["output"] == total["inputs"][0]
    assert total["output"] == loss._c.id() and add["signal"] == "" and total["index"] == add["index"] + 1
    assert set(add) == {"index", "op", "output", "inputs", "signal", "backward_signal"}
    gt.debug.print_tape()
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "autograd tape: 2 recorded ops"
    assert f"add  %{add['output']} <- %{a._c.id()}, %{b._c.id()}" in out
    with gt.signal.context("layer1"):
        (a * 2).sum()
    gt.debug.print_tape()
    assert "[layer1]" in capsys.readouterr().out


def test_mlp_train_example_runs(python):
    script = REPO / "examples" / "mlp_train.py"
    result = subprocess.run([sys.executable, str(script), "--steps", "5"], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": os.path.dirname(
                                os.path.dirname(os.path.abspath(gt.__file__)))})
    assert result.returncode == 0, result.stderr
    losses = [float(line.split()[-1]) for line in result.stdout.splitlines() if line.startswith("step")]
    assert len(losses) == 5 and losses[-1] < losses[0]
