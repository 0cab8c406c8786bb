"""The sharding stage's strategies for transformers (modifiers/sharding/):
batched matmul with a cut batch dim, reshapes around the sharded dim,
index_select / index_add / gather / scatter_add, tril / triu with the
diagonal moved per shard, `where` as an elementwise op, and zeros / ones
remade on workers instead of sent ("constants").

Every program runs in a fresh interpreter on four embedded workers, places
its operands with signal configs (uneven torch.chunk sizes, fewer pieces
than workers, worker lists out of order), and compares with NumPy or with
the same program run without a signal (one worker, whole tensors).

The tests named test_bug_* are regressions from a hostile review: each
failed on the strategies as first written (1cee9dc) and passes since 60b34d9;
each names the fault it showed.
"""

import textwrap

PRELUDE = """
import contextlib, itertools
import numpy as np
import gt
from gt import ShardConfig, SignalConfig

def close(got, want, what="", tol=1e-4):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)

def shard(name, axis, workers, backward=None):
    gt.register_config(name, SignalConfig(shard=ShardConfig(axis=axis, workers=workers), backward=backward))

def made(arr, signal):
    if signal is None:
        return gt.tensor(arr)
    with gt.signal.context(signal):
        return gt.tensor(arr)

def scope(signal):
    return gt.signal.context(signal) if signal else contextlib.nullcontext()
"""


def run(python, *parts, workers=4, explain=False):
    """Runs PRELUDE and `parts` (each dedented) in a fresh interpreter; asserts it exits 0."""
    env = {"GT_WORKERS": str(workers)}
    if explain:
        env["GT_EXPLAIN"] = "1"
    r = python(PRELUDE + "".join(textwrap.dedent(p) for p in parts), env=env, timeout=90)
    assert r.returncode == 0, f"stdout:\n{r.stdout[-4000:]}\nstderr:\n{r.stderr[-6000:]}"
    return r


# ---- tril / triu ------------------------------------------------------------------------------


def test_tril_triu_cut_on_rows_columns_and_batch(python):
    run(python, """
        shard("rows", 0, [0, 1, 2]); shard("cols", 1, [2, 0, 1]); shard("rows4", 0, [0, 1, 2, 3])
        rng = np.random.default_rng(0)
        for shape in [(5, 7), (7, 5), (2, 6)]:          # 5 / 7 rows over 3 workers: sizes [2, 2, 1] / [3, 3, 1]
            a = rng.standard_normal(shape).astype(np.float32)
            for sig in ["rows", "cols", "rows4"]:
                for k in [-3, -1, 0, 1, 2, 6]:
                    with gt.signal.context(sig):
                        x = gt.tensor(a)
                        lo, hi = x.tril(k), gt.triu(x, k)
                    close(lo.numpy(), np.tril(a, k), f"tril {shape} {sig} {k}")
                    close(hi.numpy(), np.triu(a, k), f"triu {shape} {sig} {k}")
        a3 = rng.standard_normal((3, 5, 6)).astype(np.float32)
        for ax in range(3):
            shard(f"a{ax}", ax, [3, 1, 0, 2])
            for k in [-2, 0, 3]:
                with gt.signal.context(f"a{ax}"):
                    x = gt.tensor(a3)
                    lo, hi = x.tril(k), x.triu(k)
                close(lo.numpy(), np.tril(a3, k), f"tril3 axis {ax} {k}")
                close(hi.numpy(), np.triu(a3, k), f"triu3 axis {ax} {k}")
    """)


def test_tril_of_cut_rows_runs_shard_local(python):
    r = run(python, """
        shard("rows", 0, [0, 1, 2])
        a = np.arange(30, dtype=np.float32).reshape(5, 6)
        with gt.signal.context("rows"):
            x = gt.tensor(a)
            y = x.tril(-1)
        s = y.sum(dim=1)
        close(s.numpy(), np.tril(a, -1).sum(axis=1))
    """, explain=True)
    line = next(l for l in r.stderr.splitlines() if "gt explain: tril" in l)
    assert "-> sharded(axis 0) on [0, 1, 2] sizes [2, 2, 1]; collectives: none" in line, line


# ---- matmul over batched operands ---------------------------------------------------------------


def test_batched_matmul_each_operand_cut_on_each_dim(python):
    # Cut batch dims never of size 1 here (see the size-1 bug below).
    run(python, """
        rng = np.random.default_rng(0)
        for r in range(4):
            shard(f"a{r}", r, [0, 1, 2]); shard(f"m{r}", r - 4, [1, 3, 0])
        gt.register_config("rep", SignalConfig(replicated=True))
        cases = [((3, 5, 4), (3, 4, 2)), ((2, 3, 5, 4), (3, 4, 2)), ((3, 5, 4), (2, 3, 4, 2)),
                 ((5, 4), (3, 4, 2)), ((3, 5, 4), (4, 2)), ((7, 5, 4), (7, 4, 3)), ((3, 5, 4), (1, 4, 2)),
                 ((2, 1, 5, 4), (3, 4, 6))]
        for sa, sb in cases:
            A = rng.standard_normal(sa).astype(np.float32); B = rng.standard_normal(sb).astype(np.float32)
            def sigs(shape):
                out = [None, "rep"] + [f"a{r}" for r in range(len(shape))] + [f"m{r}" for r in range(4 - len(shape), 4)]
                return [s for s in out if s is None or s == "rep" or shape[int(s[1]) - (4 - len(shape) if s[0] == "m" else 0)] > 1]
            for ga, gb in itertools.product(sigs(sa), sigs(sb)):
                close((made(A, ga) @ made(B, gb)).numpy(), A @ B, f"{sa} @ {sb} {ga} {gb}")
    """)


def test_attention_heads_cut_stay_local(python):
    r = run(python, """
        shard("heads", 1, [0, 1])
        rng = np.random.default_rng(1)
        Q = rng.standard_normal((2, 4, 5, 3)).astype(np.float32)
        K = rng.standard_normal((2, 4, 5, 3)).astype(np.float32)
        with gt.signal.context("heads"):
            q, k = gt.tensor(Q), gt.tensor(K)
            s = (q @ k.transpose(-2, -1)).tril()
        close(s.numpy(), np.tril(Q @ K.transpose(0, 1, 3, 2)))
    """, explain=True)
    line = next(l for l in r.stderr.splitlines() if "gt explain: matmul" in l)
    assert "collectives: none" in line, line


# ---- reshapes ----------------------------------------------------------------------------------


def test_reshape_split_and_merge_around_the_cut_dim(python):
    run(python, """
        rng = np.random.default_rng(0)
        for r in range(4):
            for nw in (2, 3, 4):
                shard(f"a{r}w{nw}", r, list(range(nw)))
        cases = [((2, 6, 4), [(2, 24), (12, 4), (2, 3, 2, 4), (2, 6, 2, 2), (48,), (4, 3, 4), (2, 6, 4, 1),
                              (1, 2, 6, 4), (2, 1, 6, 4), (2, 4, 6), (2, 12, 2)]),
                 ((3, 5, 4), [(3, 20), (15, 4), (3, 5, 2, 2), (3, 10, 2), (3, 1, 5, 4), (3, 2, 10)]),
                 ((4, 3, 2, 6), [(4, 3, 12), (12, 2, 6), (4, 6, 6), (4, 3, 2, 2, 3), (2, 2, 3, 2, 6), (4, 3, 3, 4)]),
                 ((7, 6), [(7, 2, 3), (42,), (14, 3), (1, 7, 6), (7, 6, 1), (6, 7)])]
        for shape, targets in cases:
            X = rng.standard_normal(shape).astype(np.float32)
            for ax in range(len(shape)):
                for nw in (3, 4):
                    for to in targets:
                        with gt.signal.context(f"a{ax}w{nw}"):
                            x = gt.tensor(X)
                            y = x.reshape(*to)
                            z = (y * 2.0).reshape(*shape).tril(1) if len(shape) >= 2 else y
                        close(y.numpy(), X.reshape(to), f"{shape} axis {ax} over {nw} -> {to}")
                        close(z.numpy(), np.tril(2 * X, 1), f"{shape} axis {ax} over {nw} -> {to} -> back")
    """)


def test_reshape_heads_split_is_shard_local(python):
    r = run(python, """
        shard("feat", 2, [0, 1, 2])
        X = np.arange(2 * 3 * 12, dtype=np.float32).reshape(2, 3, 12)
        with gt.signal.context("feat"):
            x = gt.tensor(X)
            y = x.reshape(2, 3, 3, 4)      # 12 features over 3 workers: 4 each, one head of 4 each
        close(y.numpy(), X.reshape(2, 3, 3, 4))
    """, explain=True)
    line = next(l for l in r.stderr.splitlines() if "gt explain: reshape" in l)
    assert "-> sharded(axis 2) on [0, 1, 2] sizes [1, 1, 1]; collectives: none" in line, line


# ---- indexing ----------------------------------------------------------------------------------

INDEX_PLACEMENTS = """
gt.register_config("rep", SignalConfig(replicated=True))
sigs = [None, "rep"]
for r in range(3):
    for ws in ([0, 1, 2], [2, 3], [3, 1, 0, 2]):
        n = f"a{r}_" + "".join(map(str, ws))
        shard(n, r, ws)
        sigs.append(n)
def fits(sig, rank):
    return sig is None or sig == "rep" or int(sig[1]) < rank
"""


def test_index_select_each_operand_cut_on_each_dim(python):
    run(python, INDEX_PLACEMENTS, """
        rng = np.random.default_rng(0)
        X = rng.standard_normal((5, 6, 3)).astype(np.float32)
        for dim in (0, 1, 2, -1, -2):
            n = X.shape[dim]
            for I in (np.array([n - 1, 0, 1, 0, n - 1, 2 % n, 1]), np.array([1]), np.array([0, 0])):
                for sx, si in itertools.product(sigs, sigs):
                    if fits(sx, 3) and fits(si, 1):
                        close(made(X, sx).index_select(dim, made(I, si)).numpy(), np.take(X, I, axis=dim),
                              f"index_select dim {dim} {I} {sx} {si}")
    """)


def test_index_add_each_operand_cut_repeated_indices(python):
    run(python, INDEX_PLACEMENTS, """
        rng = np.random.default_rng(0)
        B = rng.standard_normal((5, 6, 3)).astype(np.float32)
        for dim in (0, 1, -1):
            n = B.shape[dim]
            I = np.array([n - 1, 0, 1, 0, n - 1, 2 % n, 1])
            sshape = list(B.shape); sshape[dim] = len(I)
            S = rng.standard_normal(sshape).astype(np.float32)
            want = np.moveaxis(B.copy(), dim, 0)
            for k, i in enumerate(I):
                want[i] += np.moveaxis(S, dim, 0)[k]
            want = np.moveaxis(want, 0, dim)
            for sb, si, ss in itertools.product(sigs, sigs, sigs):
                if not (fits(sb, 3) and fits(si, 1) and fits(ss, 3)):
                    continue
                if sum(s not in (None, "rep") for s in (sb, si, ss)) > 2 or (ss not in (None, sb)):
                    continue
                got = made(B, sb).index_add(dim, made(I, si), made(S, ss))
                close(got.numpy(), want, f"index_add dim {dim} {sb} {si} {ss}")
        # integer dtype, an index of one and of two repeated entries (fewer pieces than workers)
        Bi = np.arange(20).reshape(5, 4)
        for I in (np.array([2]), np.array([1, 1]), np.array([4, 0, 4, 4])):
            S = np.arange(len(I) * 4).reshape(len(I), 4) + 1
            want = Bi.copy()
            for k, i in enumerate(I):
                want[i] += S[k]
            close(made(Bi, "a1_012").index_add(0, made(I, "a0_3102"), made(S, "a1_012")).numpy(), want, f"int {I}")
    """)


def test_gather_scatter_add_cut_alike_and_not(python):
    run(python, INDEX_PLACEMENTS, """
        rng = np.random.default_rng(0)
        X = rng.standard_normal((5, 6, 3)).astype(np.float32)
        few = [None, "rep", "a0_012", "a1_23", "a2_3102"]
        for dim in (0, 1, -1):
            d = dim % 3
            for ishape in [(5, 6, 3), (4, 6, 2), (5, 2, 3)]:
                I = rng.integers(0, X.shape[d], size=ishape)
                S = rng.standard_normal(ishape).astype(np.float32)
                want_g = np.zeros(ishape, np.float32); want_s = X.copy()
                for idx in np.ndindex(*ishape):
                    j = list(idx); j[d] = I[idx]
                    want_g[idx] = X[tuple(j)]; want_s[tuple(j)] += S[idx]
                for sx, si in itertools.product(few, few):
                    close(made(X, sx).gather(dim, made(I, si)).numpy(), want_g, f"gather {dim} {ishape} {sx} {si}")
                    got = made(X, sx).scatter_add(dim, made(I, si), made(S, si))
                    close(got.numpy(), want_s, f"scatter_add {dim} {ishape} {sx} {si}")
    """)


# ---- where --------------------------------------------------------------------------------------


def test_where_broadcasting_each_operand_cut(python):
    run(python, INDEX_PLACEMENTS, """
        rng = np.random.default_rng(0)
        C = rng.standard_normal((5, 6)) > 0
        A = rng.standard_normal((4, 5, 6)).astype(np.float32)
        B = rng.standard_normal((6,)).astype(np.float32)
        for sc, sa, sb in itertools.product(sigs[:8], sigs[:8], [None, "rep", "a0_012"]):
            if not (fits(sc, 2) and fits(sa, 3)):
                continue
            c = made(C.astype(np.float32), sc)      # a nonzero mask (no bool tensor crosses a collective)
            close(gt.where(c, made(A, sa), made(B, sb)).numpy(), np.where(C, A, B), f"where {sc} {sa} {sb}")
            close(gt.where(c, made(A, sa), 2.5).numpy(), np.where(C, A, 2.5), f"where scalar {sc} {sa}")
    """)


# ---- constants (zeros / ones remade instead of sent) -----------------------------------------------


def test_zeros_written_in_place_then_used_elsewhere(python):
    run(python, """
        shard("rows", 0, [0, 1, 2]); shard("cols", 1, [1, 2, 3])
        gt.register_config("rep", SignalConfig(replicated=True))
        A = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
        for make in ("zeros", "ones"):
            for write in ("copy", "fill", "add", "mul", "zero"):
                for where in ("rows", "cols", "rep", None):
                    for use in ("cols", "rows", "rep", None):
                        with scope(where):
                            z = getattr(gt, make)(6, 4)
                        ref = np.zeros((6, 4), np.float32) if make == "zeros" else np.ones((6, 4), np.float32)
                        if write == "copy": z.copy_(gt.tensor(A)); ref = A.copy()
                        elif write == "fill": z.fill_(3.0); ref = np.full((6, 4), 3.0, np.float32)
                        elif write == "add": z.add_(gt.tensor(A)); ref = ref + A
                        elif write == "mul": z.mul_(2.0); ref = ref * 2
                        elif write == "zero": z.zero_(); ref = np.zeros((6, 4), np.float32)
                        with scope(use):
                            y = z + gt.tensor(A)
                        what = f"{make} {write} made {where} used {use}"
                        close(y.numpy(), ref + A, what)
                        close(z.numpy(), ref, what + " fetched")
    """)


def test_unwritten_ones_broadcast_operand_is_remade_not_sent(python):
    r = run(python, """
        shard("rows", 0, [0, 1, 2])
        A = np.arange(28, dtype=np.float32).reshape(7, 4)   # 7 rows over 3 workers: [3, 3, 1]
        o = gt.ones(4)
        z = gt.zeros(7, 4)
        with gt.signal.context("rows"):
            x = gt.tensor(A)
            y = x * o + z
            w = gt.where(x > 10.0, x, o * 2.0)
        close(y.numpy(), A)
        close(w.numpy(), np.where(A > 10, A, 2.0))
    """, explain=True)
    lines = [l for l in r.stderr.splitlines() if "gt explain: mul" in l or "gt explain: add" in l]
    assert lines and all("broadcast" not in l and "all_gather" not in l for l in lines), "\n".join(lines)
    assert any("ones made on" in l for l in lines) and any("zeros made as" in l for l in lines), "\n".join(lines)


# ---- autograd ------------------------------------------------------------------------------------


def test_gradients_through_new_strategies_match_one_worker(python):
    run(python, """
        rng = np.random.default_rng(0)
        for ax in range(3):
            shard(f"a{ax}", ax, [0, 1, 2], backward=f"a{ax}" if ax < 2 else None)
            shard(f"n{ax}", ax, [1, 2, 3])
        X = rng.standard_normal((5, 6, 4)).astype(np.float32)
        W = rng.standard_normal((5, 4, 3)).astype(np.float32)
        V = rng.standard_normal((4, 2)).astype(np.float32)
        I = np.array([3, 0, 0, 5, 2])
        G = rng.integers(0, 4, size=(5, 6, 4))
        def prog(x, w, v, idx, gi):
            y = (x @ w).tril(1).sum() + (x.triu(-1) * x).sum()
            y = y + x.index_select(1, idx).sum(dim=0).pow(2).sum()
            y = y + x.gather(2, gi).pow(2).sum()
            y = y + x.reshape(5, 24).reshape(5, 3, 8).sum(dim=1).pow(2).sum()
            y = y + gt.where(x > 0.0, x, x * 0.5).pow(2).sum()
            y = y + (x @ v).pow(2).sum() + (v.t().unsqueeze(0) @ x.transpose(1, 2)).tril(-1).pow(2).sum()
            return y
        def run(sig):
            x = gt.tensor(X, requires_grad=True); w = gt.tensor(W, requires_grad=True)
            v = gt.tensor(V, requires_grad=True)
            idx, gi = gt.tensor(I), gt.tensor(G)
            with scope(sig):
                xs = gt.signal.tensor(x, sig) if sig else x
                ws = gt.signal.tensor(w, sig) if sig else w
                gi = gt.signal.tensor(gi, sig) if sig else gi
                y = prog(xs, ws, v, idx, gi)
            y.backward()
            return y.item(), x.grad.numpy(), w.grad.numpy(), v.grad.numpy()
        base = run(None)
        for sig in ["a0", "a1", "a2", "n0", "n1", "n2"]:
            for name, got, want in zip(["loss", "dx", "dw", "dv"], run(sig), base):
                close(got, want, f"{sig} {name}", tol=1e-3)
    """)


def test_cat_along_an_uncut_dim_mixed_placements_and_constants(python):
    run(python, INDEX_PLACEMENTS, """
        rng = np.random.default_rng(0)
        A = rng.standard_normal((4, 5, 3)).astype(np.float32)
        for dim in (0, 1, -1):
            shp = list(A.shape); shp[dim] = 2
            B = rng.standard_normal(shp).astype(np.float32)
            for sa, sb in itertools.product(sigs[:8], sigs[:8]):
                got = gt.cat([made(A, sa), made(B, sb), made(A, "a0_012")], dim)
                close(got.numpy(), np.concatenate([A, B, A], axis=dim), f"cat {dim} {sa} {sb}")
            for sa in sigs[:8]:
                with scope(sa):
                    z = gt.zeros(*shp)
                got = gt.cat([z, made(A, sa), z], dim)
                close(got.numpy(), np.concatenate([np.zeros(shp), A, np.zeros(shp)], axis=dim), f"cat zeros {dim} {sa}")
    """)


def test_slice_select_stack_and_setitem_gradients_under_a_backward_signal(python):
    # The slice / select formulas pad with zeros (cat) or, for a step > 1,
    # write g into a view of zeros: both must reach the shards' gradient.
    run(python, """
        for ax in range(2):
            for ws in ([0, 1, 2], [3, 1, 2, 0]):
                n = f"a{ax}_" + "".join(map(str, ws))
                shard(n, ax, ws, backward=n if ax == 0 else None)
        X = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
        def prog(x):
            y = x[1:6].pow(2).sum() + x[:, 1:4].pow(2).sum() + x[::2].sum() + x[:, ::3].pow(3).sum()
            y = y + x[2].pow(2).sum() + x[:, 4].sum() + gt.stack([x[0], x[3]], 0).pow(2).sum()
            y = y + x.tril(-1).sum() + x.t().triu(1).pow(2).sum()
            z = gt.zeros(7, 5)
            with gt.no_grad():  # an in-place write carries no gradient: gt refuses one that would lose it
                z[2:4] = x[2:4] * 2.0
            return y + (z * x).sum()
        def run(sig):
            x = gt.tensor(X, requires_grad=True)
            with scope(sig):
                y = prog(gt.signal.tensor(x, sig) if sig else x)
            y.backward()
            return y.item(), x.grad.numpy()
        base = run(None)
        for sig in ["a0_012", "a0_3120", "a1_012", "a1_3120"]:
            for name, got, want in zip(["loss", "dx"], run(sig), base):
                close(got, want, f"{sig} {name}", tol=1e-3)
    """)


# ---- bugs found (failing at 1cee9dc, fixed by 60b34d9) ---------------------------------------------
#
# 1. A zeros/ones tensor written THROUGH A VIEW keeps its "constant" mark
#    (stage_ops.cc ForgetConstants clears it only for the mutation's own operand 0; the
#    worker's select / slice / transpose / reshape results alias their base),
#    so step.cc Replicate / ShardLike remake it as zeros/ones and the write is
#    lost wherever it is fetched, gathered or re-cut.


def test_bug_sharded_zeros_written_through_setitem_then_fetched(python):
    run(python, """
        shard("rows", 0, [0, 1, 2])
        with gt.signal.context("rows"):
            z = gt.zeros(6, 4)
        z[1] = 5.0                      # x[key] is a view of x on its worker (gt docs)
        want = np.zeros((6, 4), np.float32); want[1] = 5
        close(z.numpy(), want)          # got all zeros: "zeros made on [0]" at the fetch
    """)


def test_bug_whole_zeros_written_through_view_then_used_sharded(python):
    run(python, """
        shard("rows", 0, [0, 1, 2])
        A = np.arange(24, dtype=np.float32).reshape(6, 4)
        z = gt.zeros(6, 4)              # whole on worker 0 (a config exists: it has a record)
        z[:, 3] = 5.0
        with gt.signal.context("rows"):
            y = z + gt.tensor(A)        # z cut like the rows: remade as zeros pieces
        want = A.copy(); want[:, 3] += 5
        close(y.numpy(), want)
    """)


def test_bug_transposed_view_fill_of_cut_zeros(python):
    run(python, """
        shard("cols", 1, [1, 2, 3])
        with gt.signal.context("cols"):
            z = gt.zeros(6, 4)
        z.t().fill_(2.0)               # the transpose is shard-local: views of z's shards
        close(z.numpy(), np.full((6, 4), 2.0, np.float32))
    """)


def test_bug_strided_slice_gradient_under_a_backward_signal(python):
    # autograd.cc's slice formula for step != 1: z = zeros(x.shape);
    # z.slice(...).copy_(g) -- a write through a view of a constant.
    run(python, """
        shard("rows", 0, [0, 1, 2], backward="rows")
        a = np.arange(24, dtype=np.float32).reshape(6, 4)
        with gt.signal.context("rows"):
            x = gt.tensor(a, requires_grad=True)
            loss = x[:, ::2].sum()
        loss.backward()
        want = np.zeros((6, 4), np.float32); want[:, ::2] = 1
        close(x.grad.numpy(), want)     # got all zeros
    """)


# 2. Matmul's batch branch (strategies.cc Matmul, "A batch dim cut") takes the
#    cut operand's placement for the result even when its cut batch dim has
#    size 1 and broadcasts against the other operand's >1: the other is sliced
#    to the lead's sizes ([1]) and the result keeps one batch of B, recorded as
#    the full shape (silently wrong reductions; a fetch fails on the shape).


def test_bug_batched_matmul_cut_batch_dim_of_size_one_a_leads(python):
    run(python, """
        shard("rows", 0, [0, 1, 2])
        rng = np.random.default_rng(0)
        A = rng.standard_normal((1, 2, 3)).astype(np.float32)   # cut on dim 0: one piece of 1
        B = rng.standard_normal((4, 3, 2)).astype(np.float32)
        with gt.signal.context("rows"):
            a = gt.tensor(A)
        b = gt.tensor(B)
        close((a @ b).sum().item(), (A @ B).sum())           # got the sum of batch 0 only
        close((a @ b).numpy(), A @ B)                         # worker returned [1, 2, 2] for [4, 2, 2]
    """)


def test_bug_batched_matmul_cut_batch_dim_of_size_one_b_leads(python):
    run(python, """
        shard("heads", 1, [0, 1])
        rng = np.random.default_rng(0)
        A = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
        B = rng.standard_normal((2, 1, 4, 2)).astype(np.float32)  # cut on dim 1 (size 1): one piece
        with gt.signal.context("heads"):
            b = gt.tensor(B)
        a = gt.tensor(A)
        close((a @ b).numpy(), A @ B)
    """)


# 3. The same flaw in Elementwise (strategies.cc Elementwise: the first cut
#    operand leads even when its cut dim is a broadcast 1), which `where` now
#    reaches: a [1, T] mask made in a data-parallel scope against a [B, T]
#    tensor keeps one row.


def test_bug_where_condition_cut_on_a_broadcast_dim(python):
    run(python, """
        shard("rows", 0, [0, 1, 2])
        C = np.array([[1, 0, 1]], np.float32)
        with gt.signal.context("rows"):
            c = gt.tensor(C)                        # a [1, 3] nonzero mask: one piece on worker 0
        a = gt.tensor(np.ones((4, 3), np.float32))
        close(gt.where(c, a, 0.0).numpy(), np.where(C > 0, np.ones((4, 3)), 0.0))
    """)
