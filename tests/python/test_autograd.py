"""Autograd semantics: what is recorded, how grads accumulate and reset,
grad mode, and the errors a user meets."""

import threading

import numpy as np
import pytest

import gt


def test_seed_autograd_example():
    # The README's Autograd block.
    a = gt.randn(3, 4, requires_grad=True)
    b = gt.from_numpy(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    loss = (a * 2).sum()
    loss.backward()
    np.testing.assert_array_equal(a.grad.data.numpy(), np.full((3, 4), 2.0, np.float32))
    (b * b).sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), [[2, 4], [6, 8]])


def test_leaves_and_requires_grad():
    x = gt.randn(2, 2, requires_grad=True)
    c = gt.randn(2, 2)
    assert x.is_leaf and x.requires_grad
    assert c.is_leaf and not c.requires_grad
    y = x * c
    assert y.requires_grad and not y.is_leaf
    assert not (c * 2).requires_grad
    assert x.grad is None
    c.requires_grad = True
    assert c.requires_grad
    c.requires_grad_(False)
    assert not c.requires_grad
    with pytest.raises(gt.Error, match="leaf"):
        y.requires_grad_(False)
    with pytest.raises(gt.Error, match="floating"):
        gt.tensor([1, 2]).requires_grad_()
    assert gt.tensor([1.0], requires_grad=True).requires_grad


def test_grads_accumulate_across_backward_calls():
    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2 + 3, 4 + 3, 6 + 3])


def test_retain_graph_and_released_record():
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    loss = (x * x).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4, 8])
    with pytest.raises(gt.Error, match="retain_graph"):
        loss.backward()


def test_grad_can_be_reset_to_none_and_set():
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).sum().backward()
    assert x.grad is not None
    x.grad = None
    assert x.grad is None
    (x * 5).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5, 5])
    x.grad = gt.tensor([1.0, 1.0])
    (x * 5).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6, 6])
    with pytest.raises(gt.Error, match="shape"):
        x.grad = gt.zeros(3)
    with pytest.raises(TypeError):
        x.grad = np.zeros(2)


def test_zero_grad_on_module_and_optimizer():
    model = gt.nn.Linear(3, 2)
    x = gt.randn(4, 3)
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    model(x).sum().backward()
    opt = gt.nn.SGD(model.parameters(), lr=0.1)
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_no_grad_records_nothing():
    x = gt.randn(3, requires_grad=True)
    def last_index():
        tape = gt.debug.get_tape()
        return tape[-1]["index"] if tape else -1
    before = last_index()
    with gt.no_grad():
        y = x * 2
        assert not gt.is_grad_enabled()
    assert gt.is_grad_enabled()
    assert not y.requires_grad
    assert last_index() == before

    @gt.no_grad()
    def f(t):
        return t * 3
    assert not f(x).requires_grad
    with gt.no_grad():
        with gt.enable_grad():
            assert (x * 2).requires_grad
    gt.set_grad_enabled(False)
    assert not (x * 2).requires_grad
    gt.set_grad_enabled(True)
    with gt.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert gt.is_grad_enabled()


def _transposes_run():
    """Transpose instructions the workers ran so far (a sync point)."""
    total = 0
    for h in gt.debug.get_worker_stats().values():
        if h and h["host"] == "worker":
            total += sum(s["value"] for s in h["samples"]
                         if s["name"] == "gt_backend_op_seconds_count" and s["labels"].get("op") == "transpose")
    return total


def test_a_transpose_transposed_back_under_no_grad_is_the_tensor_again():
    # The gradient formulas transpose transposes (a linear layer's x @ W.t()):
    # with grad off the second transpose is the first's operand, no instruction.
    x = gt.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    before = _transposes_run()
    with gt.no_grad():
        y = x.t()
        back, same_pair = y.t(), y.transpose(1, 0)
        other = y.unsqueeze(0).transpose(0, 1)  # another pair: a real transpose
    np.testing.assert_array_equal(back.numpy(), x.numpy())
    np.testing.assert_array_equal(same_pair.numpy(), x.numpy())
    assert other.shape == (3, 1, 2)
    assert _transposes_run() - before == 2  # y and other's
    with gt.no_grad():
        back.add_(1)  # the same data, as a view's would be
    np.testing.assert_array_equal(x.numpy(), np.arange(6).reshape(2, 3) + 1)
    # With grad on both are recorded and run, and the gradient flows through them.
    p = gt.from_numpy(np.ones((2, 3), np.float32)).requires_grad_()
    before = _transposes_run()
    (p.t().t() * 2).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), np.full((2, 3), 2, np.float32))
    assert _transposes_run() - before >= 2


def test_no_grad_is_per_thread():
    x = gt.randn(3, requires_grad=True)
    seen = {}

    def other():
        seen["enabled"] = gt.is_grad_enabled()
        seen["records"] = (x * 2).requires_grad

    with gt.no_grad():
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen == {"enabled": True, "records": True}


def test_backward_on_non_scalar_needs_a_gradient():
    x = gt.randn(2, 3, requires_grad=True)
    y = x * 2
    with pytest.raises(gt.Error, match=r"scalar.*\[2, 3\]") as info:
        y.backward()
    assert info.value.code == "invalid_argument"
    y.backward(gt.ones(2, 3))
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 2))
    y2 = x * 3
    y2.backward(np.full((2, 3), 2.0))
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 8))
    with pytest.raises(gt.Error, match="shape"):
        (x * 2).backward(gt.ones(3))


def test_backward_without_a_record():
    with pytest.raises(gt.Error, match="does not require grad"):
        gt.ones(1).backward()


def test_in_place_on_a_leaf_needs_no_grad():
    w = gt.randn(3, requires_grad=True)
    with pytest.raises(gt.Error, match="no_grad"):
        w -= 1
    before = w.numpy()
    with gt.no_grad():
        w -= 1
    np.testing.assert_allclose(w.numpy(), before - 1, rtol=1e-6)
    assert w.requires_grad and w.is_leaf


def test_manual_sgd_update_like_the_seed():
    w = gt.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    with gt.no_grad():
        w -= 0.1 * w.grad
    np.testing.assert_allclose(w.numpy(), [0.8, 1.6], rtol=1e-6)
    w.grad.zero_()
    np.testing.assert_array_equal(w.grad.numpy(), [0, 0])


def test_detach_and_data_share_data_without_grad():
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and not x.data.requires_grad
    np.testing.assert_array_equal(x.data.numpy(), [1, 2])
    d.fill_(7)  # same remote data
    np.testing.assert_array_equal(x.numpy(), [7, 7])
    y = x * d
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [7, 7])


def test_non_float_results_are_not_recorded():
    x = gt.randn(3, requires_grad=True)
    mask = x > 0
    assert not mask.requires_grad


def test_gradient_flows_through_unused_branches_only_where_used():
    a = gt.tensor([1.0, 2.0], requires_grad=True)
    b = gt.tensor([3.0, 4.0], requires_grad=True)
    (a * 2).sum().backward()
    assert b.grad is None
    np.testing.assert_array_equal(a.grad.numpy(), [2, 2])


def test_pow_zero_exponent_gradient_at_zero():
    x = gt.tensor([0.0, 2.0], requires_grad=True)
    (x ** 0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0])


def test_pow_tensor_exponent_gradients_at_zero_are_finite():
    # PyTorch: no gradient for the base where the exponent is 0, none for the
    # exponent where the base is 0.
    a = gt.tensor([0.0, 2.0, 0.0], requires_grad=True)
    b = gt.tensor([0.0, 3.0, 2.0], requires_grad=True)
    (a ** b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [0.0, 12.0, 0.0])
    np.testing.assert_allclose(b.grad.numpy(), [0.0, 8.0 * np.log(2.0), 0.0])


def test_changing_a_saved_tensor_in_place_is_refused_like_pytorch():
    w = gt.randn(3, requires_grad=True)
    x = gt.randn(3)
    y = (x * w).sum()
    x += 1.0  # x needs no grad, so this is allowed; mul's gradient reads it
    with pytest.raises(gt.Error, match="changed in place"):
        y.backward()
    # Add reads no values: the same change is harmless there.
    z = (x + w).sum()
    x.zero_()
    z.backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.ones(3, np.float32))
