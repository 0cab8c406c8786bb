"""gt.save / gt.load against torch.save / torch.load in this process: each reads
the other's files bit for bit; a torch model's state_dict loads into the same
gt model; bad files and mismatched checkpoints fail naming the file or the
tensor, with the model left as it was."""

import io
import pathlib
import pickle
import sys

import numpy as np
import pytest
import torch

import gt

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "gpt"))
from model import build  # noqa: E402

CONFIG = dict(vocab=11, block_size=6, d_model=8, heads=2, layers=2)


def as_numpy(value):
    """`value` with every gt or torch tensor turned into a NumPy array (containers kept)."""
    if isinstance(value, (gt.Tensor, torch.Tensor)):
        return np.asarray(value.detach() if isinstance(value, torch.Tensor) else value.numpy())
    if isinstance(value, dict):
        return {k: as_numpy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(as_numpy(v) for v in value)
    return value


def assert_same(a, b, path="obj"):
    """Equal structure, equal scalars, tensors equal bit for bit with equal dtypes."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, path
        assert a.tobytes() == b.tobytes(), path
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    else:
        assert type(a) is type(b) and a == b, path


def sample_object(rng):
    return {
        "f32": gt.tensor(rng.standard_normal((3, 4)).astype(np.float32)),
        "f64": gt.tensor(rng.standard_normal(5)),
        "i64": gt.tensor(rng.integers(-2**40, 2**40, (2, 2))),
        "bool": gt.tensor(rng.random(6) > 0.5),
        "scalar0d": gt.tensor(np.float32(2.5)),
        "empty": gt.zeros(0, 3),
        "nested": {"list": [gt.arange(3), 1, 2.5, "text", None, True], "tuple": (gt.ones(2, 2), -7)},
        "by_index": {0: gt.randn(2), 1: {"step": 4}},
        "numbers": [1, -2**62, 1e-300, False],
    }


@pytest.mark.parametrize("to_file_object", [False, True])
def test_torch_load_reads_gt_save_bit_for_bit(tmp_path, rng, to_file_object):
    obj = sample_object(rng)
    path = tmp_path / "gt.pt"
    if to_file_object:
        with open(path, "wb") as f:
            gt.save(obj, f)
    else:
        gt.save(obj, path)
    theirs = torch.load(path)
    assert theirs["f64"].dtype == torch.float64 and theirs["bool"].dtype == torch.bool
    assert theirs["i64"].dtype == torch.int64 and theirs["f32"].dtype == torch.float32
    assert_same(as_numpy(obj), as_numpy(theirs))
    back = gt.load(path)
    assert isinstance(back["f32"], gt.Tensor) and back["bool"].dtype == gt.bool
    assert_same(as_numpy(obj), as_numpy(back))


def test_a_tensor_under_two_keys_is_one_storage(tmp_path):
    shared = gt.randn(4)
    gt.save({"wte": shared, "head": shared, "other": gt.randn(4)}, tmp_path / "tied.pt")
    theirs = torch.load(tmp_path / "tied.pt")
    assert theirs["wte"].data_ptr() == theirs["head"].data_ptr() != theirs["other"].data_ptr()
    assert np.array_equal(theirs["head"].numpy(), shared.numpy())


def test_requires_grad_survives_both_ways(tmp_path):
    p = gt.randn(3, requires_grad=True)
    gt.save({"p": p}, tmp_path / "a.pt")
    assert torch.load(tmp_path / "a.pt")["p"].requires_grad and gt.load(tmp_path / "a.pt")["p"].requires_grad
    torch.save({"param": torch.nn.Parameter(torch.ones(2)), "plain": torch.ones(2)}, tmp_path / "b.pt")
    back = gt.load(tmp_path / "b.pt")
    assert back["param"].requires_grad and not back["plain"].requires_grad


def test_gt_load_reads_torch_save_bit_for_bit(tmp_path):
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    obj = {
        "f32": torch.randn(3, 4), "f64": base, "i64": torch.tensor([-(2**40), 3]), "bool": torch.tensor([True, False]),
        "transposed": base.t(),              # a strided view of a shared storage
        "offset": base[1:3, 2:5],            # a view at an offset into it
        "nested": [torch.ones(1), (2, "x", None), {"deep": {"k": torch.zeros(2, 0)}}],
        "single": {"only": 1},               # a one-item dict (pickle's SETITEM)
        "half": torch.tensor([1.5, -2.0], dtype=torch.float16),
    }
    torch.save(obj, tmp_path / "t.pt")
    ours = gt.load(tmp_path / "t.pt")
    assert ours["half"].dtype == gt.float32  # widened, as gt.from_numpy does
    ours["half"] = ours["half"].to(gt.float64)  # compare values, not the dtype gt lacks
    expected = as_numpy(obj)
    expected["half"] = expected["half"].astype(np.float64)
    assert_same(expected, as_numpy(ours))
    with open(tmp_path / "t.pt", "rb") as f:
        assert_same(as_numpy(obj)["nested"], as_numpy(gt.load(f)["nested"]))


def test_torch_state_dict_loads_into_the_same_gt_model(tmp_path, rng):
    torch.manual_seed(0)
    theirs = build(torch)(**CONFIG)
    torch.save(theirs.state_dict(), tmp_path / "model.pt")
    ours = build(gt)(**CONFIG)
    assert ours.load_state_dict(gt.load(tmp_path / "model.pt")) == ([], [])
    idx = rng.integers(0, CONFIG["vocab"], (2, CONFIG["block_size"]))
    np.testing.assert_allclose(ours(gt.tensor(idx)).numpy(), theirs(torch.from_numpy(idx)).detach().numpy(),
                               atol=1e-5, rtol=0)
    # ... and back: a gt model's checkpoint loads into torch.
    gt.save(ours.state_dict(), tmp_path / "back.pt")
    again = build(torch)(**CONFIG)
    again.load_state_dict(torch.load(tmp_path / "back.pt"))
    for name, value in theirs.state_dict().items():
        assert torch.equal(value, again.state_dict()[name]), name


# ---- bad input --------------------------------------------------------------------------


@pytest.fixture
def checkpoint(tmp_path, rng):
    path = tmp_path / "ckpt.pt"
    gt.save({"w": gt.tensor(rng.standard_normal((64, 64)).astype(np.float32)), "step": 3}, path)
    return path


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such checkpoint file: .*nothing.pt"):
        gt.load(tmp_path / "nothing.pt")
    with pytest.raises(FileNotFoundError, match="gt.save: no such directory: .*absent"):
        gt.save({"x": 1}, tmp_path / "absent" / "x.pt")


def test_truncated_file(checkpoint):
    data = checkpoint.read_bytes()
    checkpoint.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=f"{checkpoint.name} is not a readable PyTorch checkpoint"):
        gt.load(checkpoint)


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
def test_flipped_bytes(checkpoint, where):
    data = bytearray(checkpoint.read_bytes())
    at = int(len(data) * where)
    data[at] ^= 0xFF
    checkpoint.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"gt.load: .*{checkpoint.name}.*(corrupted|not a readable)"):
        gt.load(checkpoint)


def test_not_a_checkpoint(tmp_path):
    (tmp_path / "text.pt").write_text("hello")
    with pytest.raises(ValueError, match="text.pt is not a readable PyTorch checkpoint"):
        gt.load(tmp_path / "text.pt")
    torch.save({"x": torch.ones(2)}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(ValueError, match="legacy.pt is not a readable PyTorch checkpoint"):
        gt.load(tmp_path / "legacy.pt")


def test_an_expanded_view_is_refused_not_materialised(tmp_path):
    """A stride of 0 makes a tensor larger than its data: a few hundred bytes of file could ask gt.load
    (which uploads a copy) for terabytes, so it is refused, naming the file and the shape."""
    torch.save({"e": torch.zeros(1).expand(2 ** 40)}, tmp_path / "expanded.pt")
    assert (tmp_path / "expanded.pt").stat().st_size < 4096
    with pytest.raises(pickle.UnpicklingError, match=r"expanded.pt.*shape \[1099511627776\] has more elements"):
        gt.load(tmp_path / "expanded.pt")


class Custom:
    pass


def test_arbitrary_objects_are_refused_both_ways(tmp_path):
    torch.save({"obj": Custom()}, tmp_path / "custom.pt")
    with pytest.raises(Exception, match=r"custom.pt holds a .*Custom, which gt.load does not read"):
        gt.load(tmp_path / "custom.pt")
    with pytest.raises(TypeError, match=r"gt.save: obj\['a'\]\[1\] is a Custom"):
        gt.save({"a": [1, Custom()]}, tmp_path / "never.pt")
    assert not list(tmp_path.glob("*never*"))  # nothing left behind, not even the temporary


def test_mismatched_checkpoint_into_a_model_leaves_it_unchanged(tmp_path):
    model = build(gt)(**CONFIG)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    state = {k: v.numpy() * 0 for k, v in model.state_dict().items()}
    state["head.weight"] = np.zeros((3, 3), np.float32)
    state["wpe.weight"] = state["wpe.weight"].astype(np.float64)
    del state["ln_f.bias"]
    gt.save(state, tmp_path / "bad.pt")
    with pytest.raises(RuntimeError) as error:
        model.load_state_dict(gt.load(tmp_path / "bad.pt"))
    text = str(error.value)
    assert "size mismatch for head.weight" in text and "dtype mismatch for wpe.weight" in text
    assert 'Missing key(s) in state_dict: "ln_f.bias"' in text
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[name], err_msg=name)


def test_load_takes_pytorchs_arguments(checkpoint):
    assert gt.load(checkpoint, map_location="cpu")["step"] == 3
    assert gt.load(checkpoint, map_location=torch.device("cpu"), weights_only=True)["step"] == 3
    with pytest.raises(ValueError, match="cannot place a tensor on cuda:1"):
        gt.load(checkpoint, map_location="cuda:1")
    with pytest.raises(TypeError, match="map_location takes a device only"):
        gt.load(checkpoint, map_location={"cuda:0": "cpu"})


def test_save_to_a_file_object_in_memory():
    buffer = io.BytesIO()
    gt.save([gt.arange(4)], buffer)
    buffer.seek(0)
    assert torch.equal(torch.load(buffer)[0], torch.arange(4))
    buffer.seek(0)
    assert gt.load(buffer)[0].tolist() == [0, 1, 2, 3]


def test_fully_sharded_model_saves_and_loads_in_place(tmp_path):
    """A model split over 4 workers (FSDP) is gathered through the client by gt.save, and
    load_state_dict copies into the pieces in place: the placements stay as they were."""
    from gt.distributed import DeviceMesh, fully_shard
    model = build(gt)(**CONFIG)
    whole = {k: v.numpy() for k, v in model.state_dict().items()}
    fully_shard(model, DeviceMesh([0, 1, 2, 3]))
    placements = {n: repr(p.placements) for n, p in model.named_parameters()}
    assert placements["wte.weight"] == "[Shard(dim=0)]"
    gt.save(model.state_dict(), tmp_path / "sharded.pt")
    theirs = torch.load(tmp_path / "sharded.pt")
    assert_same(whole, {k: v.numpy() for k, v in theirs.items()})
    changed = {k: v + 1 if v.dtype == np.float32 else v for k, v in whole.items()}
    gt.save(changed, tmp_path / "changed.pt")
    model.load_state_dict(gt.load(tmp_path / "changed.pt"))
    assert {n: repr(p.placements) for n, p in model.named_parameters()} == placements
    assert_same(changed, {k: v.numpy() for k, v in model.state_dict().items()})
