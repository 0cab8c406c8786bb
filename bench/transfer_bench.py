"""Moving data between NumPy and gt (issue 19): `from_numpy` of N bytes of
float32, then `numpy()` of it, on the embedded default (or the dispatcher at
--address), against PyTorch in the same process doing the same work with the
same guarantees: a tensor that owns a copy of the array (`torch.tensor`), and
an array that owns a copy of the tensor (`.numpy().copy()`; gt's array never
shares memory with the tensor either). Sizes 1, 4 and 64 MiB; for each, the
median of `runs` timings per round, `rounds` rounds interleaving gt and
PyTorch, and the median over the rounds. GB/s counts both directions
(2 × N bytes moved).

    PYTHONPATH=build/python /usr/bin/python3 bench/transfer_bench.py [rounds] [--address HOST:PORT]
"""

import argparse
import statistics
import time

import numpy as np
import torch

import gt

SIZES_MIB = (1, 4, 64)


def median_time(fn, runs):
    fn()  # warm-up: the first use of a size maps its memory
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def gt_round_trip(array):
    return gt.from_numpy(array).numpy()


def torch_round_trip(array):
    return torch.tensor(array).numpy().copy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", type=int, nargs="?", default=5)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--address", help="a gt dispatcher (default: the embedded cluster)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.address:
        gt.connect(args.address)
    where = args.address or "the embedded default"
    print(f"gt transfer benchmark on {where}: {args.rounds} rounds, median of {args.runs} runs each")
    print(f"{'size':>7} {'gt':>10} {'PyTorch':>10} {'ratio':>7} {'gt GB/s':>8}   per-round ratios")
    for mib in SIZES_MIB:
        array = np.random.default_rng(mib).random((mib << 20) // 4, dtype=np.float32)
        assert np.array_equal(gt_round_trip(array), array)
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(median_time(lambda: gt_round_trip(array), args.runs))
            theirs.append(median_time(lambda: torch_round_trip(array), args.runs))
        g, t = statistics.median(ours), statistics.median(theirs)
        ratios = ", ".join(f"{a / b:.2f}" for a, b in zip(ours, theirs))
        print(f"{mib:>4} MiB {g * 1e3:>8.2f}ms {t * 1e3:>8.2f}ms {g / t:>6.2f}x {2 * array.nbytes / g / 1e9:>8.2f}   {ratios}")


if __name__ == "__main__":
    main()
