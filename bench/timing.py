"""Timing helpers the Python benchmarks share."""

import statistics
import time


def median_step_seconds(step, runs, steps):
    """The median over `runs` of the mean time of `steps` calls of step(), after one warm-up call."""
    step()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - start) / steps)
    return statistics.median(times)
