"""The sharding stage's strategies for index_select / index_add / gather /
scatter_add (modifiers/sharding/): each operand cut on each dim, against the
same program on one worker (strategy_programs.py runs each program).
"""

from strategy_programs import INDEX_PLACEMENTS, run

# ---- indexing ----------------------------------------------------------------------------------


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
