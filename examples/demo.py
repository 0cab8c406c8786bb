"""Basic tensor operations on gt, checked against NumPy (the Python twin of demo.cc).

    PYTHONPATH=build/python /usr/bin/python3 examples/demo.py

With nothing configured the first op starts the embedded default: a dispatcher
and two workers (GT_WORKERS) on threads of this process. Every op returns at
once; numpy() / item() are the sync points that fetch a result.
"""

import numpy as np

import gt


def show(name, t, want):
    got = t.numpy()
    ok = np.allclose(got, want, rtol=1e-5, atol=1e-5)
    print(f"{name:<24} shape {list(got.shape)!s:<9} {np.round(got.astype(np.float64), 4).tolist()}  {'ok' if ok else 'MISMATCH'}")
    return ok


def main():
    a_np = np.array([[1, 2], [3, 4]], dtype=np.float32)
    b_np = np.array([[5, 6], [7, 8]], dtype=np.float32)
    a, b = gt.tensor(a_np), gt.tensor(b_np)

    results = [
        show("a + b", a + b, a_np + b_np),
        show("a @ b", a @ b, a_np @ b_np),
        show("relu(a - 2.5)", (a - 2.5).relu(), np.maximum(a_np - 2.5, 0)),
        show("(a * b).sum(dim=1)", (a * b).sum(dim=1), (a_np * b_np).sum(axis=1)),
        show("sigmoid(a).mean()", a.sigmoid().mean(), (1 / (1 + np.exp(-a_np))).mean()),
        show("a.t().reshape(4)", a.t().reshape(4), a_np.T.reshape(4)),
        show("softmax(b, dim=1)", b.softmax(dim=1), np.exp(b_np) / np.exp(b_np).sum(axis=1, keepdims=True)),
    ]

    # A bigger one that stays on the workers until max() comes back.
    x_np = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    x = gt.from_numpy(x_np)
    results.append(show("(x @ x.T).max()", (x @ x.t()).max(), (x_np @ x_np.T).max()))

    # Shapes are checked locally: the error comes at the call, not at a sync point.
    try:
        a @ gt.ones(3, 3)
    except (gt.Error, ValueError) as e:
        print(f"shape error caught at the call: {e}")

    print(f"demo: {sum(results)}/{len(results)} results equal NumPy's")
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
