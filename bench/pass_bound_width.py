"""The price of honesty for fractional and graded scores: how much wider the PASS bound (the
betting lower bound, valid for any bounded data) is than a paired t bound on the same data.

    nice -n 10 python bench/pass_bound_width.py [--runs 200]

Per cell, ``runs`` simulated PR-vs-base pairs with no change (Δ = 0): items with latent pass
rate p ~ Beta(2, 1) scored over k = 4 rollouts in each arm, or graded rewards drawn
Beta(2p, 2(1 − p)) in each arm ("graded"). Printed: the median ratio (Δ̂ − L_betting) /
(Δ̂ − L_t) at n = 50 / 200 / 500, L_t = Δ̂ − t_{n−1, 1−α}·SE (one-sided α = .05), and the
items the betting bound needs for the same width, ≈ ratio². The t bound is the reference
only: it is not valid for a PR that breaks a few items (skewed differences).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats as sps

try:
    from evalgate.stats._betting import betting_lower
except ImportError:  # run as `python bench/pass_bound_width.py` from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from evalgate.stats._betting import betting_lower

ALPHA = 0.05


def draw(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    p = rng.beta(2.0, 1.0, n)
    if kind == "k=4":
        return rng.binomial(4, p) / 4, rng.binomial(4, p) / 4
    a, b = 2.0 * p + 1e-3, 2.0 * (1.0 - p) + 1e-3
    return rng.beta(a, b), rng.beta(a, b)


def ratio(base: np.ndarray, head: np.ndarray, seed: int) -> float:
    d = head - base
    n = d.size
    t_half = float(sps.t.ppf(1.0 - ALPHA, n - 1)) * float(d.std(ddof=1)) / math.sqrt(n)
    lo, _ = betting_lower(d, -1.0, 1.0, -0.03, ALPHA, seed)
    return (float(d.mean()) - lo) / t_half


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"betting / paired-t width of the one-sided {1 - ALPHA:.0%} lower bound, median of "
          f"{args.runs} runs (items needed for the same width ≈ ratio²)")  # fmt: skip
    for kind in ("k=4", "graded"):
        cells = []
        for n in (50, 200, 500):
            r = float(np.median([ratio(*draw(kind, n, rng), seed=s) for s in range(args.runs)]))
            cells.append(f"n={n}: {r:.2f} ({r * r:.1f}x items)")
        print(f"{kind:<7} " + "   ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
