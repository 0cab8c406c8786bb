"""The sharding stage's strategies for transformers (modifiers/sharding/):
batched matmul with a cut batch dim, reshapes around the sharded dim,
index_select / index_add / gather / scatter_add, tril / triu with the
diagonal moved per shard, `where` as an elementwise op, and zeros / ones
remade on workers instead of sent ("constants").

Every program runs in a fresh interpreter on four embedded workers, places
its operands with signal configs (uneven torch.chunk sizes, fewer pieces
than workers, worker lists out of order), and compares with NumPy or with
the same program run without a signal (one worker, whole tensors).

Indexing is in test_sharding_strategies_indexing.py, gradients in
test_sharding_strategies_autograd.py, the review's regressions in
test_sharding_strategies_bugs.py; the shared prelude in strategy_programs.py.
"""

from strategy_programs import INDEX_PLACEMENTS, run


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
