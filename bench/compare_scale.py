"""How `compare` scales with the benchmark's size: time and peak memory of one metric's
comparison (the paired test, its bounds, and the MDE: the path `evalgate compare` and the gate
take, :func:`evalgate.compare.paired.compare_metric`).

    nice -n 10 python bench/compare_scale.py [--quick]

Sizes: 1,000,000 paired 0/1 items (k = 1, a PR that breaks 1 % of the passing items and fixes
0.5 % of the failing ones), and 100,000 items x 4 rollouts (fractional scores, the PR shifts
each rollout's pass rate by −2 pp), plus 10,000 of each as a reference in the same run. The
time is of a call in a fresh process, untraced, with scipy imported before timing; peak memory
is tracemalloc's peak over the same call here (numpy reports its buffers to tracemalloc) and
this process's peak RSS (getrusage) after it. CPU time is given beside the wall time because
the machine may be shared. `--quick` runs only the reference sizes.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import time
import tracemalloc
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from evalgate.compare.paired import compare_metric


def binary(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    base = (rng.random(n) < 0.7).astype(float)
    u = rng.random(n)
    head = np.where((base == 1.0) & (u < 0.01), 0.0, base)
    head = np.where((base == 0.0) & (u < 0.005), 1.0, head)
    return base, head


def fractional(n: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    p = rng.beta(2.0, 1.0, n)
    base = rng.binomial(k, p) / k
    head = rng.binomial(k, np.clip(p - 0.02, 0.0, 1.0)) / k
    return base, head


def _timed(label: str, base: np.ndarray, head: np.ndarray) -> tuple[float, float]:
    """(wall, CPU) seconds of one compare in this (fresh) process, imports done beforehand."""
    from scipy import optimize, special, stats  # noqa: F401  (imported once, not timed)

    start, cpu = time.perf_counter(), time.process_time()
    compare_metric(label, base, head, clusters=None, margin=0.03, alpha=0.05)
    return time.perf_counter() - start, time.process_time() - cpu


def measure(label: str, base: np.ndarray, head: np.ndarray) -> None:
    # The time in a fresh process, untraced: tracing slows every allocation, and the betting
    # bound's pass over the items makes a few small arrays per item. The memory here, traced,
    # from a first call of this size too (nothing cached from another call of it).
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        took, cpu = pool.submit(_timed, label, base, head).result()
    tracemalloc.start()
    mc = compare_metric(label, base, head, clusters=None, margin=0.03, alpha=0.05)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    r = mc.result
    assert r is not None
    print(
        f"{label:<22} {took:6.2f} s (CPU {cpu:6.2f} s)  "
        f"peak {peak / 2**20:7.1f} MiB (RSS {rss:6.0f} MiB)  "
        f"{mc.status:<12} Δ {r.delta * 100:+.2f} pp [{r.lo * 100:+.2f}, {r.hi * 100:+.2f}]  "
        f"MDE {mc.mde * 100 if mc.mde is not None else float('nan'):.2f} pp  {r.method}",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reference sizes only")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    from scipy import optimize, stats  # noqa: F401  (imported once, not timed)

    measure("0/1, n = 10,000", *binary(10_000, rng))
    measure("k = 4, n = 10,000", *fractional(10_000, 4, rng))
    if not args.quick:
        measure("0/1, n = 1,000,000", *binary(1_000_000, rng))
        measure("k = 4, n = 100,000", *fractional(100_000, 4, rng))
    return 0


if __name__ == "__main__":
    sys.exit(main())
