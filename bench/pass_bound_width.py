"""The price of honesty for fractional and graded scores: how much wider the PASS bound (the
betting lower bound, valid for any bounded data) is than a paired t bound on the same data.

    nice -n 10 python bench/pass_bound_width.py [--runs 200]

Per cell, ``runs`` simulated PR-vs-base pairs with no change (Δ = 0): items with latent pass
rate p ~ Beta(2, 1) scored over k = 4 rollouts in each arm, or graded rewards drawn
Beta(2p, 2(1 − p)) in each arm ("graded"). Printed: the median ratio (Δ̂ − L_betting) /
(Δ̂ − L_t) at n = 50 / 200 / 500, L_t = Δ̂ − t_{n−1, 1−α}·SE (one-sided α = .05), and the
items the betting bound needs for the same width, ≈ ratio². The t bound is the reference
only: it is not valid for a PR that breaks a few items (skewed differences).

``--variants`` also prints other valid bounds from the same family on the same data, the survey
behind the gate's choice (docs/gate.md, "The price of honesty"): the capital at n only (Markov
instead of Ville: what the running maximum buys), bets scaled ×1.25 and ×0.8 (is the fixed-n
tuning of λ optimal?), and the mean of B = 20 stopped capitals over 20 betting orders (each an
e-value by optional stopping; their mean is one too) with the stop at 2/α.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats as sps

try:
    from evalgate.stats._betting import _MAX_BET, _bets, betting_lower
except ImportError:  # run as `python bench/pass_bound_width.py` from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from evalgate.stats._betting import _MAX_BET, _bets, betting_lower

ALPHA = 0.05


def draw(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    p = rng.beta(2.0, 1.0, n)
    if kind == "k=4":
        return rng.binomial(4, p) / 4, rng.binomial(4, p) / 4
    a, b = 2.0 * p + 1e-3, 2.0 * (1.0 - p) + 1e-3
    return rng.beta(a, b), rng.beta(a, b)


def _variant_lower(d: np.ndarray, seed: int, variant: str) -> float:
    """Lower bound on the mean of d ∈ [−1, 1] by a variant of the gate's betting test."""
    rng = np.random.default_rng(seed)
    orders = 20 if variant == "avg20" else 1
    xs = np.stack([(d[rng.permutation(d.size)] + 1.0) / 2.0 for _ in range(orders)])
    scale = {"x1.25": 1.25, "x0.8": 0.8}.get(variant, 1.0)
    bets = np.stack([scale * _bets(x, ALPHA) for x in xs])

    def reject(m: float) -> bool:
        capped = np.minimum(bets, _MAX_BET / max(m, 1e-12))
        log_k = np.cumsum(np.log1p(capped * (xs - m)), axis=1)
        if variant == "markov":
            return bool(log_k[0, -1] >= math.log(1.0 / ALPHA))
        if variant == "avg20":  # stop each order at 2/α (or n); the mean is an e-value
            hit = log_k >= math.log(2.0 / ALPHA)
            stop = np.where(hit.any(axis=1), hit.argmax(axis=1), d.size - 1)
            return bool(np.mean(np.exp(log_k[np.arange(orders), stop])) >= 1.0 / ALPHA)
        return bool(log_k.max() >= math.log(1.0 / ALPHA))

    rejected, accepted = 0.0, float(xs[0].mean())
    while accepted - rejected > 1e-5:
        mid = (rejected + accepted) / 2.0
        rejected, accepted = (mid, accepted) if reject(mid) else (rejected, mid)
    return 2.0 * rejected - 1.0


def ratio(base: np.ndarray, head: np.ndarray, seed: int, variant: str = "gate") -> float:
    d = head - base
    n = d.size
    t_half = float(sps.t.ppf(1.0 - ALPHA, n - 1)) * float(d.std(ddof=1)) / math.sqrt(n)
    if variant == "gate":
        lo, _ = betting_lower(d, -1.0, 1.0, -0.03, ALPHA, seed)
    else:
        lo = _variant_lower(d, seed, variant)
    return (float(d.mean()) - lo) / t_half


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--variants", action="store_true", help="also the survey's variants")
    args = parser.parse_args()
    print(f"betting / paired-t width of the one-sided {1 - ALPHA:.0%} lower bound, median of "
          f"{args.runs} runs (items needed for the same width ≈ ratio²)")  # fmt: skip
    variants = ("gate", "markov", "x1.25", "x0.8", "avg20") if args.variants else ("gate",)
    for variant in variants:
        rng = np.random.default_rng(0)  # the same data for every variant
        for kind in ("k=4", "graded"):
            cells = []
            for n in (50, 200, 500):
                data = [draw(kind, n, rng) for _ in range(args.runs)]
                r = float(
                    np.median([ratio(*x, seed=s, variant=variant) for s, x in enumerate(data)])
                )
                cells.append(f"n={n}: {r:.2f} ({r * r:.1f}x items)")
            print(f"{variant:<7}{kind:<7} " + "   ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
