"""gt.save / gt.load of a state held on the workers, against torch.save /
torch.load of the same state held in this process (issue 36). The state is
a dict of float32 tensors of 4 MiB each, `--mib` in all, spread over the
workers (each tensor whole on one worker). gt's times include fetching every
tensor from its worker (save) and uploading it (load); PyTorch's do not move
data at all, so a ratio above 1 is what the round trip through the client
costs. Both write to and read from the same folder (page cache warm after
the first round). For each, the median over `rounds` rounds, interleaved; GB/s
counts the state's bytes. The client's peak RSS growth over a gt.save
(ru_maxrss, read before and after) is printed too.

    PYTHONPATH=build/python /usr/bin/python3 bench/checkpoint_bench.py [rounds] [--mib 256] [--dir /tmp]
"""

import argparse
import os
import resource
import statistics
import tempfile
import time

import numpy as np
import torch

import gt

TENSOR_MIB = 4


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def gt_load_synced(path):
    state = gt.load(path)
    gt.sync()  # the uploads have reached the workers
    return state


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", type=int, nargs="?", default=3)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    elements = TENSOR_MIB * 2**20 // 4
    arrays = {f"layer{i}.weight": rng.standard_normal(elements, dtype=np.float32)
              for i in range(args.mib // TENSOR_MIB)}
    ours = {k: gt.from_numpy(a) for k, a in arrays.items()}
    theirs = {k: torch.from_numpy(a) for k, a in arrays.items()}
    gt.sync()
    gt_path, torch_path = (os.path.join(args.dir, f"checkpoint_bench.{who}.pt") for who in ("gt", "torch"))
    size_gb = args.mib * 2**20 / 1e9

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    gt.save(ours, gt_path)
    rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    times = {"gt.save": [], "torch.save": [], "gt.load": [], "torch.load": []}
    for _ in range(args.rounds):
        times["gt.save"].append(timed(lambda: gt.save(ours, gt_path)))
        times["torch.save"].append(timed(lambda: torch.save(theirs, torch_path)))
        times["gt.load"].append(timed(lambda: gt_load_synced(gt_path)))
        times["torch.load"].append(timed(lambda: torch.load(torch_path)))
    loaded = gt.load(gt_path)
    assert all(np.array_equal(loaded[k].numpy(), a) for k, a in arrays.items())
    print(f"state: {args.mib} MiB in {len(arrays)} tensors, {args.rounds} rounds")
    for kind in ("save", "load"):
        ours_s, theirs_s = statistics.median(times[f"gt.{kind}"]), statistics.median(times[f"torch.{kind}"])
        print(f"{kind}: gt {ours_s:.3f} s ({size_gb / ours_s:.2f} GB/s), torch {theirs_s:.3f} s "
              f"({size_gb / theirs_s:.2f} GB/s), gt/torch {ours_s / theirs_s:.2f}x")
    print(f"client peak RSS growth over the first gt.save: {rss_growth:.0f} MiB")
    for path in (gt_path, torch_path):
        os.remove(path)


if __name__ == "__main__":
    main()
