"""Regressions from a hostile review of the sharding stage's transformer
strategies (modifiers/sharding/): each failed on the strategies as first
written (1cee9dc) and passes since 60b34d9; each names the fault it showed.
"""

from strategy_programs import run

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
