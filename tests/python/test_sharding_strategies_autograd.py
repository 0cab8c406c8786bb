"""Gradients through the sharding stage's transformer strategies
(modifiers/sharding/): matmul, reshapes, indexing, cat, slice / select /
stack / setitem under backward signals, against one worker's gradients.
"""

from strategy_programs import INDEX_PLACEMENTS, run

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
