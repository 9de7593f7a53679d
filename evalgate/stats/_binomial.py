"""Binomial tails and the Clopper–Pearson bound on plain floats: a threshold's exact test.

The gate tests "score ≥ threshold" on 0/1 items with the exact binomial test; that needs two
numbers (a tail probability and the one-sided Clopper–Pearson bound), and importing scipy for them
costs about a quarter of a second at the end of every thresholded run. Here each tail is summed
directly in log space (``math.lgamma``), from its largest term outwards until the terms no longer
change the sum, so a tail of 1e-200 is as accurate as one of 0.5; the bound is the bisection root
of the tail. tests/test_stats.py checks both against scipy.
"""

from __future__ import annotations

import math

__all__ = ["binom_cdf", "binom_sf", "clopper_pearson_lower"]

_NEGLIGIBLE = 1e-20  # a term this small relative to the running sum no longer changes it
_SCIPY_ABOVE = 100_000  # items: past this, scipy's routines beat summing ~√n terms per call


def _tail(lo: int, hi: int, n: int, p: float) -> float:
    """Σ_{i=lo}^{hi} C(n, i) p^i (1 − p)^(n − i), for 0 < p < 1 and 0 ≤ lo ≤ hi ≤ n."""
    log_p, log_q, log_nf = math.log(p), math.log1p(-p), math.lgamma(n + 1)

    def term(i: int) -> float:
        return math.exp(
            log_nf - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        )

    # The pmf rises to its mode and falls after it: start at the range's largest term.
    start = min(max(math.floor((n + 1) * p), lo), hi)
    terms = [term(start)]
    total = terms[0]
    for step in (-1, 1):
        i = start + step
        while lo <= i <= hi:
            t = term(i)
            terms.append(t)
            total += t
            if t <= total * _NEGLIGIBLE:
                break
            i += step
    return min(math.fsum(terms), 1.0)


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X ≤ k) for X ~ Binomial(n, p) (scipy.special.bdtr)."""
    return _side(k, n, p, upper=False)


def binom_sf(k: int, n: int, p: float) -> float:
    """P(X > k) for X ~ Binomial(n, p) (scipy.special.bdtrc), summed directly: no 1 − cdf."""
    return _side(k, n, p, upper=True)


def _side(k: int, n: int, p: float, *, upper: bool) -> float:
    """P(X > k) if ``upper``, else P(X ≤ k): each summed on its own side, so a tail of 1e-200
    is not lost in 1 − (1 − 1e-200)."""
    if k < 0 or k >= n or p <= 0.0 or p >= 1.0:  # all the mass on one side: 0 or 1
        below = 1.0 if k >= 0 and (k >= n or p <= 0.0) else 0.0
        return 1.0 - below if upper else below
    if n > _SCIPY_ABOVE:
        from scipy import special

        return float((special.bdtrc if upper else special.bdtr)(k, n, p))
    return _tail(k + 1, n, n, p) if upper else _tail(0, k, n, p)


def clopper_pearson_lower(k: int, n: int, alpha: float) -> float:
    """The one-sided (1 − alpha) lower bound on p from k successes in n: the p at which
    P(X ≥ k | n, p) = alpha (scipy.special.betaincinv(k, n − k + 1, alpha)); 0 when k = 0."""
    if k <= 0:
        return 0.0
    if n > _SCIPY_ABOVE:
        from scipy import special

        return float(special.betaincinv(k, n - k + 1, alpha))
    lo, hi = 0.0, 1.0  # P(X ≥ k | p) rises with p: bisect until the interval is a few ulps
    for _ in range(2000):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        if binom_sf(k - 1, n, mid) < alpha:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0
