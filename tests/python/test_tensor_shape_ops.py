"""Shape ops and indexing against NumPy on the same inputs: reshape / view,
transpose / permute / squeeze, indexing and item assignment, len and
iteration, cat / stack / split / chunk."""

import numpy as np
import pytest

import gt
from ops_helpers import g

# ---- shape ops ----------------------------------------------------------------


def test_reshape_and_view(rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x = g(a)
    np.testing.assert_array_equal(x.reshape(6, 4).numpy(), a.reshape(6, 4))
    np.testing.assert_array_equal(x.reshape((4, -1)).numpy(), a.reshape(4, -1))
    np.testing.assert_array_equal(x.reshape([-1]).numpy(), a.reshape(-1))
    np.testing.assert_array_equal(x.view(2, 12).numpy(), a.reshape(2, 12))
    np.testing.assert_array_equal(x.flatten().numpy(), a.reshape(-1))
    np.testing.assert_array_equal(x.flatten(1).numpy(), a.reshape(2, 12))
    with pytest.raises(gt.Error, match="cannot view"):
        x.reshape(5, 5)


def test_transpose_permute_squeeze(rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x = g(a)
    np.testing.assert_array_equal(x.transpose(0, 2).numpy(), a.transpose(2, 1, 0))
    np.testing.assert_array_equal(x.transpose().numpy(), np.swapaxes(a, -1, -2))
    np.testing.assert_array_equal(x.T.numpy(), a.T)
    np.testing.assert_array_equal(x[0].T.numpy(), a[0].T)
    np.testing.assert_array_equal(x[0].t().numpy(), a[0].T)
    np.testing.assert_array_equal(x.permute(2, 0, 1).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(x.permute((1, 2, 0)).numpy(), a.transpose(1, 2, 0))
    assert x.unsqueeze(1).shape == (2, 1, 3, 4)
    assert x.unsqueeze(-1).shape == (2, 3, 4, 1)
    y = g(a.reshape(2, 1, 3, 1, 4))
    assert y.squeeze().shape == (2, 3, 4)
    assert y.squeeze(1).shape == (2, 3, 1, 4)
    assert y.squeeze(0).shape == (2, 1, 3, 1, 4)


INDEX_CASES = [
    (1,), (-1,), (slice(1, 3),), (slice(None, None, 2),), (slice(None), 1), (Ellipsis, -1), (None,),
    (slice(None), None, slice(1, None)), (slice(-3, -1), slice(None, None, 2)), (1, 2, 3), (Ellipsis,),
    (slice(None), Ellipsis, None), (-2, Ellipsis, slice(1, 4, 2)), (slice(10, 20),), (slice(None, -10),),
    (slice(None), slice(None), slice(None, None, 3)), (None, 0, None),
]


@pytest.mark.parametrize("key", INDEX_CASES, ids=[repr(k) for k in INDEX_CASES])
def test_indexing_matches_numpy(rng, key):
    a = rng.standard_normal((4, 3, 5)).astype(np.float32)
    got = g(a)[key]
    want = a[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


def test_indexing_errors():
    x = gt.zeros(3, 4)
    with pytest.raises(IndexError, match="out of bounds"):
        x[3]
    with pytest.raises(IndexError, match="too many"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="ellipsis"):
        x[..., ...]
    with pytest.raises(ValueError, match="step"):
        x[::-1]
    # Advanced indices (test_losses_and_indexing.py): one, with full slices around it.
    with pytest.raises(IndexError, match="must be long, int, byte or bool"):
        x[gt.tensor([0.0, 1.0])]
    with pytest.raises(TypeError, match="one advanced index"):
        x[gt.tensor([0, 1]), 1:]
    with pytest.raises(TypeError, match="one advanced index"):
        x[gt.tensor([0, 1]), 1:] = 1.0


@pytest.mark.parametrize("key", INDEX_CASES, ids=[repr(k) for k in INDEX_CASES])
def test_item_assignment_matches_numpy(rng, key):
    a = rng.standard_normal((4, 3, 5)).astype(np.float32)
    x = g(a)
    part_shape = a[key].shape
    value = rng.standard_normal(part_shape).astype(np.float32)
    x[key] = value          # an array of the indexed part's shape
    a[key] = value
    np.testing.assert_array_equal(x.numpy(), a)
    x[key] = 2.5            # a scalar
    a[key] = 2.5
    np.testing.assert_array_equal(x.numpy(), a)


def test_item_assignment_broadcasts_and_is_seen_by_views(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    x = g(a)
    row = x[1]              # a view of x's data on its worker
    x[:, 1:3] = gt.tensor([7.0, 8.0])
    a[:, 1:3] = [7.0, 8.0]
    np.testing.assert_array_equal(x.numpy(), a)
    np.testing.assert_array_equal(row.numpy(), a[1])


def test_item_assignment_on_a_tensor_that_requires_grad_needs_no_grad():
    w = gt.zeros(3, requires_grad=True)
    with pytest.raises(gt.Error, match="in place"):
        w[0] = 1.0
    with gt.no_grad():
        w[0] = 1.0
    np.testing.assert_array_equal(w.detach().numpy(), [1, 0, 0])


def test_len_and_iteration(rng):
    a = rng.standard_normal((3, 2)).astype(np.float32)
    x = g(a)
    assert len(x) == 3
    rows = list(x)
    assert len(rows) == 3
    np.testing.assert_array_equal(rows[2].numpy(), a[2])
    with pytest.raises(TypeError):
        len(gt.tensor(1.0))


def test_cat_stack_split_chunk(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(gt.cat([g(a), g(b)]).numpy(), np.concatenate([a, b]))
    np.testing.assert_array_equal(gt.cat([g(a), g(a)], dim=1).numpy(), np.concatenate([a, a], axis=1))
    np.testing.assert_array_equal(gt.stack([g(a), g(a)], dim=1).numpy(), np.stack([a, a], axis=1))
    c = rng.standard_normal((7, 2)).astype(np.float32)
    pieces = g(c).split(3)
    assert [p.shape for p in pieces] == [(3, 2), (3, 2), (1, 2)]
    np.testing.assert_array_equal(pieces[2].numpy(), c[6:])
    sections = g(c).split([2, 5])
    np.testing.assert_array_equal(sections[1].numpy(), c[2:])
    chunks = g(c).chunk(2)
    assert [p.shape for p in chunks] == [(4, 2), (3, 2)]
    cols = g(c).chunk(2, dim=1)
    np.testing.assert_array_equal(cols[1].numpy(), c[:, 1:])
    with pytest.raises(ValueError, match="add up"):
        g(c).split([2, 2])
    with pytest.raises(gt.Error, match="differ"):
        gt.cat([g(a), g(c)])
