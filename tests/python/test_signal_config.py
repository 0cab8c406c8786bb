"""Signal scopes and signal configs: the signal guide's code blocks, the
YAML loader (every problem reported with file, line and key path), the
Python config API and its validation."""

import pathlib
import textwrap

import numpy as np
import pytest

import gt
from gt import ShardConfig, SignalConfig

CONFIGS = pathlib.Path(__file__).parent / "configs"


# ---- YAML ---------------------------------------------------------------------------


def test_load_the_readme_config():
    found = gt.load_config(CONFIGS / "readme_config.yaml")
    assert set(found) == {"forward_layer1", "pipeline_stage_1", "pipeline_stage_1_bwd"}
    f = gt.get_config("forward_layer1")
    assert f.shard == ShardConfig(axis=0, workers=[0, 1, 2, 3])
    assert f.backward_signal == "backward_layer1" and f.backward == "backward_layer1"
    assert f.compile is False and f.replicated is False
    assert gt.get_config("pipeline_stage_1_bwd").shard.workers == [2, 3]


def test_load_the_guide_training_config():
    gt.load_config(str(CONFIGS / "training_config.yaml"))
    assert gt.get_config("forward_pass").compile is True
    assert gt.get_config("forward_pass").backward_signal == "backward_pass"
    assert gt.get_config("parameter_updates").compile is False
    assert gt.get_config("model_parallel").shard.axis == 1
    params = gt.get_config("params")
    assert params.replicated is True and params.shard is None
    assert set(gt.configs()) >= {"forward_pass", "backward_pass", "parameter_updates", "model_parallel", "params"}


def test_every_problem_is_reported_with_line_and_path():
    with pytest.raises(gt.ConfigError) as info:
        gt.load_config(CONFIGS / "bad_config.yaml")
    message = str(info.value)
    path = str(CONFIGS / "bad_config.yaml")
    expected = [
        f"{path}:3: layer1.shard.axis: expected int, got str 'zero'",
        f"{path}:4: layer1.shard.workers[1]: expected int, got str 'one'",
        f"{path}:4: layer1.shard.workers[2]: worker index must be >= 0, got -2",
        f"{path}:5: layer1.backward: expected a signal name (str), got int 7",
        f"{path}:6: layer1.compile: expected bool, got str 'maybe'",
        f"{path}:8: layer2.sharding: unknown key 'sharding' (known: shard, replicated, placements, backward, compile)",
        f"{path}:10: layer3: shard and replicated: true exclude each other",
    ]
    for line in expected:
        assert line in info.value.problems, (line, info.value.problems)
    assert len(info.value.problems) == len(expected)
    assert "7 problems" in message
    assert gt.get_config("layer1") is None  # nothing registered


def test_yaml_errors_and_missing_file(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(ValueError, match=r"broken\.yaml:\d+:\d+: invalid YAML"):
        gt.load_config(bad)
    with pytest.raises(FileNotFoundError):
        gt.load_config(tmp_path / "nope.yaml")
    top = tmp_path / "list.yaml"
    top.write_text("- a\n- b\n")
    with pytest.raises(gt.ConfigError, match="mapping of signal names"):
        gt.load_config(top)
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    assert gt.load_config(empty) == {}


def test_load_config_string_and_gt_config_at_import(tmp_path, python):
    gt.load_config_string("s1:\n  replicated: true\n")
    assert gt.get_config("s1").replicated
    config = tmp_path / "config.yaml"
    config.write_text((CONFIGS / "readme_config.yaml").read_text())
    # The README: os.environ['GT_CONFIG'] = 'config.yaml' before `import gt`.
    code = textwrap.dedent("""\
        import os
        os.environ['GT_CONFIG'] = 'config.yaml'
        import gt
        print(gt.get_config('forward_layer1').shard.workers)
        """)
    result = python(code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[0, 1, 2, 3]"
    result = python("import gt", env={"GT_CONFIG": str(CONFIGS / "bad_config.yaml")})
    assert result.returncode != 0 and "layer1.shard.axis" in result.stderr


# ---- the Python config API ------------------------------------------------------------


def test_guide_python_config_api():
    # Data parallelism.
    config = SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1, 2, 3]), backward_signal="backward_layer1",
                          compile=False)
    gt.register_config("forward_layer1", config)
    assert gt.get_config("forward_layer1") is config
    # Pipeline parallelism.
    gt.register_config("forward_stage", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1]),
                                                     backward_signal="backward_stage"))
    gt.register_config("backward_stage", SignalConfig(shard=ShardConfig(axis=0, workers=[2, 3])))
    assert gt.get_config("forward_stage").backward == "backward_stage"

    # Dynamic configuration.
    def configure_for_batch_size(batch_size):
        workers = [0, 1, 2, 3] if batch_size >= 256 else [0, 1]
        gt.register_config("training", SignalConfig(shard=ShardConfig(axis=0, workers=workers)))

    configure_for_batch_size(64)
    assert gt.get_config("training").shard.workers == [0, 1]
    configure_for_batch_size(512)
    assert gt.get_config("training").shard.workers == [0, 1, 2, 3]
    with gt.signal.context("training"):
        x = gt.randn(128, 64)
    assert x.shape == (128, 64)


def test_mixing_yaml_and_python_configs():
    gt.load_config(CONFIGS / "readme_config.yaml")
    gt.register_config("dynamic_layer", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
    gt.register_config("pipeline_stage_1", SignalConfig(replicated=True))  # overrides the YAML one
    assert gt.get_config("pipeline_stage_1").replicated
    assert gt.get_config("forward_layer1") is not None and gt.get_config("dynamic_layer") is not None


@pytest.mark.parametrize("make,field", [
    (lambda: ShardConfig(axis="0"), "ShardConfig.axis"),
    (lambda: ShardConfig(axis=True), "ShardConfig.axis"),
    (lambda: ShardConfig(workers=3), "ShardConfig.workers"),
    (lambda: ShardConfig(workers=[0, 1.5]), "ShardConfig.workers[1]"),
    (lambda: ShardConfig(workers=[]), "ShardConfig.workers"),
    (lambda: ShardConfig(workers=[1, 1]), "ShardConfig.workers"),
    (lambda: SignalConfig(replicated="yes"), "SignalConfig.replicated"),
    (lambda: SignalConfig(compile=1), "SignalConfig.compile"),
    (lambda: SignalConfig(backward_signal=5), "SignalConfig.backward"),
    (lambda: SignalConfig(shard={"axis": 0}), "SignalConfig.shard"),
    (lambda: SignalConfig(shard=ShardConfig(), replicated=True), "SignalConfig"),
])
def test_config_validation_names_the_field(make, field):
    with pytest.raises(gt.ConfigError) as info:
        make()
    assert any(p.startswith(field + ":") for p in info.value.problems), info.value.problems


def test_register_config_names_the_signal():
    config = SignalConfig(shard=ShardConfig(axis=0, workers=[0]))
    config.shard.axis = "rows"  # broken after construction
    with pytest.raises(gt.ConfigError, match=r"layer9\.shard\.axis: expected int"):
        gt.register_config("layer9", config)
    with pytest.raises(gt.ConfigError, match="layer9: expected a SignalConfig"):
        gt.register_config("layer9", {"shard": {"axis": 0}})
    with pytest.raises(gt.ConfigError, match="signal name"):
        gt.register_config("", SignalConfig())
    assert gt.get_config("layer9") is None


# ---- signal scopes ---------------------------------------------------------------------


def test_context_scopes_tag_recorded_ops():
    gt.load_config(CONFIGS / "readme_config.yaml")
    # The README names backward_layer1 without defining it; opening a scope
    # whose backward signal has no config is an error, so define it here.
    gt.register_config("backward_layer1", gt.SignalConfig(shard=gt.ShardConfig(axis=0, workers=[0, 1, 2, 3])))
    w = gt.randn(64, 8, requires_grad=True)
    assert gt.signal.current() is None
    with gt.signal.context("forward_layer1"):
        assert gt.signal.current() == "forward_layer1"
        assert gt.signal.current_backward() == "backward_layer1"  # from the config
        x = gt.randn(100, 64)
        y = x @ w
        gt.register_config("inner_bwd", gt.SignalConfig())  # a backward signal must have a config
        with gt.signal.context("inner", backward="inner_bwd"):
            z = y.relu()
            assert gt.signal.current_backward() == "inner_bwd"
        assert gt.signal.current() == "forward_layer1"
    assert gt.signal.current() is None
    tape = {e["output"]: e for e in gt.debug.get_tape()}
    assert tape[y._c.id()]["signal"] == "forward_layer1"
    assert tape[z._c.id()]["signal"] == "inner"
    assert y.shape == (100, 8)


def test_context_with_backward_runs_the_pipeline_block():
    # The README's pipeline block: forward on workers [0, 1], the gradients on [2, 3].
    gt.load_config(CONFIGS / "readme_config.yaml")
    model = gt.nn.Linear(4, 1)
    inp = gt.randn(8, 4)
    with gt.signal.context("pipeline_stage_1", backward="pipeline_stage_1_bwd"):
        loss = model(inp).sum()
        loss.backward()
    assert model.weight.grad.shape == (1, 4)
    np.testing.assert_allclose(model.weight.grad.numpy(), inp.numpy().sum(0, keepdims=True), rtol=1e-5, atol=1e-5)


def test_enter_exit():
    gt.signal.enter("layer1")
    x = gt.randn(100, 64)
    assert gt.signal.current() == "layer1"
    gt.signal.exit("layer1")
    assert gt.signal.current() is None
    assert x.shape == (100, 64)
    gt.signal.enter("a")
    gt.signal.enter("b")
    with pytest.raises(RuntimeError, match="innermost open scope is 'b'"):
        gt.signal.exit("a")
    gt.signal.exit("b")
    gt.signal.exit("a")
    with pytest.raises(RuntimeError, match="no signal scope"):
        gt.signal.exit("a")
    with pytest.raises(TypeError, match="non-empty str"):
        gt.signal.enter("")


def test_scope_closes_on_exception_and_works_as_decorator():
    with pytest.raises(KeyError):
        with gt.signal.context("boom"):
            raise KeyError("x")
    assert gt.signal.current() is None

    @gt.signal.context("decorated")
    def f():
        return gt.signal.current()
    assert f() == "decorated" and gt.signal.current() is None


def test_signal_tensor_is_a_copy_made_in_the_scope(rng):
    a = rng.standard_normal((100, 64)).astype(np.float32)
    x = gt.tensor(a, requires_grad=True)
    x_sharded = gt.signal.tensor(x, name="forward_layer1")
    assert x_sharded is not x and not x_sharded._c.is_same(x._c)
    np.testing.assert_array_equal(x_sharded.numpy(), a)
    entry = [e for e in gt.debug.get_tape() if e["output"] == x_sharded._c.id()][0]
    assert entry["op"] == "clone" and entry["signal"] == "forward_layer1"
    x_sharded.sum().backward()  # differentiable, like any op
    np.testing.assert_array_equal(x.grad.numpy(), np.ones_like(a))
    assert gt.signal.current() is None


def test_scopes_are_per_thread():
    import threading
    seen = []
    with gt.signal.context("main"):
        t = threading.Thread(target=lambda: seen.append(gt.signal.current()))
        t.start()
        t.join()
    assert seen == [None]
