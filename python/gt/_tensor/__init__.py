"""gt.Tensor and the functions that create tensors.

A Tensor is a handle to a tensor that lives on a gt worker: every operation
returns at once with the result's shape and dtype already known (a mismatch
raises right there), and only reading data (numpy(), item(), repr) waits.
This package turns Python idiom (operators with scalars on either side,
indexing, varargs shapes, NumPy inputs) into calls on the C++ client:

    args.py         argument idiom: ints, varargs shapes, reduction dims, scalars
    base.py         TensorBase (the C++ handle) and operands from arrays / lists
    arithmetic.py   operators, comparisons, elementwise functions, in-place ops
    reductions.py   sum, mean, max / min, argmax / argmin, softmax; MinMax
    shape.py        reshape, transpose, permute, squeeze, split, indexing
    autograd.py     requires_grad, grad, backward, detach
    interop.py      NumPy on tensors: __array__, ufuncs, np.mean(t) and the like
    core.py         Tensor (the mixins joined): metadata, dtype conversion, data access
    creation.py     tensor, from_numpy, randn, zeros, eye, randperm, ..., cat, stack, where, tril, triu, manual_seed
"""

from .core import Tensor, _wrap
from .creation import (_next_seed, arange, cat, eye, from_numpy, full, manual_seed, ones, ones_like, rand, rand_like,
                       randn, randn_like, randperm, stack, tensor, tril, triu, where, zeros, zeros_like)
from .reductions import MinMax
