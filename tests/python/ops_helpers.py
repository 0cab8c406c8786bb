"""What the tensor-op tests (test_tensor_*.py, test_tensor_ops.py) share:
NumPy's tolerance for float32 results and the shortest way to make a gt tensor.
"""

import gt

F32 = dict(rtol=1e-5, atol=1e-6)


def g(a):
    return gt.tensor(a)
