"""Finite-difference gradient checks, in float64, for every differentiable op.

For f and inputs x_i, the analytic gradient of L = sum(f(x) * w) (w random,
so every output element gets a different upstream gradient) from backward()
is compared with central differences (L(x + h e_j) - L(x - h e_j)) / 2h,
where every L is evaluated by gt itself. All perturbed evaluations are
issued first and fetched with one sync.
"""

import numpy as np
import pytest

import gt

H = 1e-6


def gradcheck(fn, inputs, rng, atol=1e-6, rtol=1e-5):
    inputs = [np.asarray(x, dtype=np.float64) for x in inputs]
    leaves = [gt.tensor(x, requires_grad=True) for x in inputs]
    out = fn(*leaves)
    assert out.dtype is gt.float64
    assert out.requires_grad
    w = rng.standard_normal(out.shape)
    wt = gt.tensor(w)
    (out * wt).sum().backward()
    analytic = []
    for x, leaf in zip(inputs, leaves):
        grad = leaf.grad
        assert grad is not None, "backward() did not reach an input"
        assert grad.shape == x.shape
        analytic.append(grad.numpy())

    with gt.no_grad():
        losses = []
        for i, x in enumerate(inputs):
            for j in range(x.size):
                for sign in (1.0, -1.0):
                    moved = [a.copy() for a in inputs]
                    moved[i].reshape(-1)[j] += sign * H
                    losses.append((fn(*[gt.tensor(a) for a in moved]) * wt).sum().reshape(1))
        values = gt.cat(losses).numpy() if losses else np.zeros(0)
    k = 0
    for x, a in zip(inputs, analytic):
        numeric = np.empty(x.size)
        for j in range(x.size):
            numeric[j] = (values[k] - values[k + 1]) / (2 * H)
            k += 2
        np.testing.assert_allclose(a.reshape(-1), numeric, atol=atol, rtol=rtol)


def normal(rng, *shape):
    return rng.standard_normal(shape)


def positive(rng, *shape):
    return rng.random(shape) + 0.5


def away_from_zero(rng, *shape):
    v = rng.standard_normal(shape)
    return np.where(np.abs(v) < 0.1, 0.5, v)


def distinct(rng, *shape):
    """Values whose gaps are far larger than H (max/min without ties)."""
    n = int(np.prod(shape))
    return (rng.permutation(n).astype(np.float64) * 0.1 + rng.random(n) * 0.01).reshape(shape)


# ---- binary, with broadcasting ------------------------------------------------

BROADCAST = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)), ((2, 3), (1, 1))]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("sa,sb", BROADCAST, ids=[f"{a}x{b}" for a, b in BROADCAST])
def test_binary(rng, op, sa, sb):
    fn = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / b}[op]
    gradcheck(fn, [normal(rng, *sa), positive(rng, *sb)], rng)


SCALAR_FORMS = {
    "x+2": lambda x: x + 2, "2+x": lambda x: 2 + x, "x-2": lambda x: x - 2, "1-x": lambda x: 1 - x,
    "x*3": lambda x: x * 3, "2*x": lambda x: 2 * x, "x/3": lambda x: x / 3, "3/x": lambda x: 3 / x,
    "-x": lambda x: -x, "x**2": lambda x: x ** 2, "x**3": lambda x: x ** 3, "x**2.5": lambda x: x ** 2.5,
    "x**-1": lambda x: x ** -1, "2**x": lambda x: 2 ** x, "x.pow(0.5)": lambda x: x.pow(0.5),
}


@pytest.mark.parametrize("form", list(SCALAR_FORMS))
def test_scalar_forms(rng, form):
    gradcheck(SCALAR_FORMS[form], [positive(rng, 3, 4)], rng)


@pytest.mark.parametrize("sa,sb", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4))])
def test_pow_tensor_exponent(rng, sa, sb):
    gradcheck(lambda a, b: a ** b, [positive(rng, *sa), normal(rng, *sb)], rng)


# ---- matmul ---------------------------------------------------------------------

MATMUL = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (3, 4, 2)),
          ((4,), (4, 3)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4,)), ((2, 2, 3, 4), (4, 5))]


@pytest.mark.parametrize("sa,sb", MATMUL, ids=[f"{a}@{b}" for a, b in MATMUL])
def test_matmul(rng, sa, sb):
    gradcheck(lambda a, b: a @ b, [normal(rng, *sa), normal(rng, *sb)], rng)


def test_matmul_of_views(rng):
    # A batched x @ W's weight gradient is one product over every row
    # (reshapes of x and of the gradient): here x is a transposed view and W
    # one too, as in a linear layer after attention's head swap.
    gradcheck(lambda a, b: a.transpose(1, 2) @ b.T, [normal(rng, 2, 4, 3), normal(rng, 5, 4)], rng)


@pytest.mark.parametrize("sa,sb", [((2, 3, 0), (0, 5)), ((2, 3, 4), (4, 0)), ((2, 3, 0), (0,)), ((0, 3, 4), (4, 2))])
def test_matmul_with_an_empty_dim_has_zero_gradients(sa, sb):
    a = gt.tensor(np.ones(sa, np.float32), requires_grad=True)
    b = gt.tensor(np.ones(sb, np.float32), requires_grad=True)
    (a @ b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros(sa, np.float32))
    np.testing.assert_array_equal(b.grad.numpy(), np.zeros(sb, np.float32))


def test_matmul_same_operand_twice(rng):
    gradcheck(lambda a: a @ a.T, [normal(rng, 3, 4)], rng)


# ---- unary ---------------------------------------------------------------------


UNARY = {
    "exp": (lambda x: x.exp(), normal), "log": (lambda x: x.log(), positive),
    "sqrt": (lambda x: x.sqrt(), positive), "relu": (lambda x: x.relu(), away_from_zero),
    "sigmoid": (lambda x: x.sigmoid(), normal), "tanh": (lambda x: x.tanh(), normal),
    "abs": (lambda x: x.abs(), away_from_zero), "neg": (lambda x: x.neg(), normal),
    "clone": (lambda x: x.clone(), normal),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(rng, name):
    fn, make = UNARY[name]
    gradcheck(fn, [make(rng, 3, 4)], rng)


# ---- reductions ---------------------------------------------------------------------

REDUCE_AXES = [(None, False), (0, False), (1, True), (-1, False), ((0, 2), False), ((0, 2), True),
               ((0, 1, 2), True)]


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("dim,keepdim", REDUCE_AXES, ids=[f"{d}-{k}" for d, k in REDUCE_AXES])
def test_reductions(rng, name, dim, keepdim):
    def reduce(x):
        r = getattr(x, name)(dim, keepdim)
        return r.values if isinstance(r, gt.MinMax) else r  # max/min over one dim: (values, indices)
    gradcheck(reduce, [distinct(rng, 2, 3, 4)], rng)


def test_max_ties_share_the_gradient():
    x = gt.tensor([1.0, 3.0, 3.0, 2.0], dtype=gt.float64, requires_grad=True)
    x.max().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0, 0.5, 0.5, 0])


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(rng, name, dim):
    gradcheck(lambda x: getattr(x, name)(dim), [normal(rng, 3, 4)], rng)


# ---- movement ---------------------------------------------------------------------

MOVEMENT = {
    "reshape(-1)": lambda x: x.reshape(-1), "reshape(4,-1)": lambda x: x.reshape(4, -1),
    "view(3,8)": lambda x: x.view(3, 8), "transpose(0,2)": lambda x: x.transpose(0, 2),
    "transpose()": lambda x: x.transpose(), "T": lambda x: x.T, "permute(2,0,1)": lambda x: x.permute(2, 0, 1),
    "unsqueeze(1)": lambda x: x.unsqueeze(1), "unsqueeze(-1)": lambda x: x.unsqueeze(-1),
    "squeeze()": lambda x: x.reshape(2, 1, 3, 4).squeeze(), "squeeze(1)": lambda x: x.reshape(2, 1, 12).squeeze(1),
    "flatten(1)": lambda x: x.flatten(1),
}


@pytest.mark.parametrize("name", list(MOVEMENT))
def test_movement(rng, name):
    gradcheck(MOVEMENT[name], [normal(rng, 2, 3, 4)], rng)


def test_t_2d(rng):
    gradcheck(lambda x: x.t(), [normal(rng, 3, 4)], rng)


INDEX = {
    "x[1]": lambda x: x[1], "x[-1]": lambda x: x[-1], "x[1:3]": lambda x: x[1:3], "x[::2]": lambda x: x[::2],
    "x[:,1]": lambda x: x[:, 1], "x[...,-1]": lambda x: x[..., -1], "x[None]": lambda x: x[None],
    "x[:,None,1:]": lambda x: x[:, None, 1:], "x[-3:-1,::2]": lambda x: x[-3:-1, ::2],
    "x[1,2,3]": lambda x: x[1, 2, 3], "x[-2,...,1:4:2]": lambda x: x[-2, ..., 1:4:2],
    "x[:,:,::3]": lambda x: x[:, :, ::3], "x[None,0,None]": lambda x: x[None, 0, None],
}


@pytest.mark.parametrize("name", list(INDEX))
def test_indexing(rng, name):
    gradcheck(INDEX[name], [normal(rng, 4, 3, 5)], rng)


def test_indexing_twice_accumulates(rng):
    gradcheck(lambda x: x[0] * x[1] + x[-1], [normal(rng, 3, 4)], rng)


def test_cat(rng):
    gradcheck(lambda a, b: gt.cat([a, b]), [normal(rng, 2, 3), normal(rng, 4, 3)], rng)
    gradcheck(lambda a, b: gt.cat([a, b, a], dim=1), [normal(rng, 2, 3), normal(rng, 2, 1)], rng)
    gradcheck(lambda a, b: gt.stack([a, b], dim=1), [normal(rng, 2, 3), normal(rng, 2, 3)], rng)


@pytest.mark.parametrize("name", ["split(2)", "split([1,3])", "chunk(3)", "chunk(2,dim=1)"])
def test_split_and_chunk(rng, name):
    def fn(x):
        parts = {"split(2)": lambda: x.split(2), "split([1,3])": lambda: x.split([1, 3]),
                 "chunk(3)": lambda: x.chunk(3), "chunk(2,dim=1)": lambda: x.chunk(2, dim=1)}[name]()
        # Weigh the pieces differently so each one's gradient matters.
        out = parts[0].sum() * 1.0
        for i, p in enumerate(parts[1:], start=2):
            out = out + (p * p).sum() * i
        return out
    gradcheck(fn, [normal(rng, 4, 3)], rng)


# ---- compositions -----------------------------------------------------------------


def test_mlp_like_composition(rng):
    def fn(x, w1, b1, w2):
        h = (x @ w1.T + b1).relu()
        return (h @ w2.T).log_softmax(1)
    gradcheck(fn, [normal(rng, 5, 4), normal(rng, 3, 4), normal(rng, 3), normal(rng, 2, 3)], rng)


def test_reused_intermediate(rng):
    def fn(x):
        y = x.tanh()
        return y * y.sum(0, keepdim=True) - y.exp().mean()
    gradcheck(fn, [normal(rng, 3, 4)], rng)
