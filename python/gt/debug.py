"""Looking inside gt: the autograd tape."""

import sys

from . import _C

__all__ = ["get_tape", "print_tape", "clear_tape"]


def get_tape():
    """The most recent recorded ops (at most 10000), oldest first, each a dict
    {index, op, output, inputs, signal}; tensors are named by their ids."""
    return _C.tape()


def clear_tape():
    _C.clear_tape()


def print_tape(file=None):
    """Prints the tape, one recorded op per line:

        #3    matmul        %7 <- %5, %6   [layer1]
    """
    out = file if file is not None else sys.stdout
    entries = get_tape()
    print(f"autograd tape: {len(entries)} recorded op{'s' if len(entries) != 1 else ''}", file=out)
    if not entries:
        return
    width = max(len(e["op"]) for e in entries)
    for e in entries:
        inputs = ", ".join(f"%{i}" for i in e["inputs"])
        signal = f"   [{e['signal']}]" if e["signal"] else ""
        print(f"  #{e['index']:<5} {e['op']:<{width}}  %{e['output']} <- {inputs}{signal}", file=out)
