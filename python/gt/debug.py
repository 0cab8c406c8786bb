"""Looking inside gt: the autograd tape and the hosts' stage figures."""

import sys

from . import _C

__all__ = ["get_tape", "print_tape", "clear_tape", "get_worker_stats", "print_worker_stats"]


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


def get_worker_stats(timeout=2.0):
    """What every host's stages did, read from its Prometheus metrics (the
    figures its /metrics endpoint serves; docs/METRICS.md).

    A sync point: waits for every queued op first. Returns a dict from host id
    to that host's figures, the dispatcher first, then each worker, then the
    client's own stages when it runs any (GT_COMPILE=1, GT_CLIENT_MANIFEST;
    host 'client', instance its manifest id); a live
    worker that did not answer within `timeout` seconds maps to None (a
    repeated host id gets a '#2', '#3', ... suffix). Each
    host's dict holds: instance, host ('dispatcher', 'worker' or 'client'), stages,
    instructions (entered the host), terminal_instructions (routed /
    executed), compiled, eager, units_run, cache_hits, cache_misses (compile
    stages), hot_sequences_found and hot_sequences (a list of {id, stage,
    length, repetitions}, hotpath stages), unit_cache_hits,
    unit_cache_misses, unit_runs, compile_seconds, unit_instructions (by
    strategy; the backend's compiled units) and samples (every gt_* sample as
    {name, labels, value})."""
    if timeout <= 0:
        raise ValueError(f"get_worker_stats: timeout must be > 0 seconds, got {timeout}")
    stats = _C.worker_stats(max(1, int(timeout * 1000)))
    hosts = {}
    for name, h in [(h["instance"], h) for h in stats["hosts"]] + [(name, None) for name in stats["missing"]]:
        hosts[_unique_key(hosts, name)] = h
    return hosts


def _unique_key(taken, name):
    # Host ids are meant to be unique (they are the `instance` label), but
    # workers started without --id all default to "worker": keep every one.
    key, n = name, 2
    while key in taken:
        key, n = f"{name}#{n}", n + 1
    return key


_COLUMNS = [
    ("instructions", "instructions"),
    ("compiled", "compiled"),
    ("eager", "eager"),
    ("hot seqs", "hot_sequences_found"),
    ("cache hit/miss", None),
    ("unit cache hit/miss", None),
    ("compile s", None),
]


def _row(name, h):
    if h is None:
        return [name, "worker", "(no answer)"] + [""] * (len(_COLUMNS) - 1)
    return [name, h["host"], str(h["instructions"]), str(h["compiled"]), str(h["eager"]),
            str(h["hot_sequences_found"]), f"{h['cache_hits']}/{h['cache_misses']}",
            f"{h['unit_cache_hits']}/{h['unit_cache_misses']}", f"{h['compile_seconds']:.3f}"]


def print_worker_stats(file=None, timeout=2.0):
    """Prints get_worker_stats() as a table, one line per host, then the hot
    sequences each host found:

        host        kind        instructions  compiled  eager  hot seqs  ...
        dispatcher  dispatcher  1234          980       254    1         ...
        worker-0    worker      300           0         300    0         ...
        hot sequences:
          dispatcher/hotpath  5f0c3a1e9b2d4c77  length 49  x20
    """
    out = file if file is not None else sys.stdout
    hosts = get_worker_stats(timeout)
    rows = [["host", "kind"] + [title for title, _ in _COLUMNS]]
    rows += [_row(name, h) for name, h in hosts.items()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip(), file=out)
    hot = [(name, q) for name, h in hosts.items() if h for q in h["hot_sequences"]]
    if hot:
        print("hot sequences:", file=out)
        for name, q in hot:
            print(f"  {name}/{q['stage']}  {q['id']}  length {q['length']}  x{q['repetitions']}", file=out)
