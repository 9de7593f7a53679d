"""The rejection regions of the exact unconditional test for paired 0/1 scores, for every
discordant count at once: what the power of the FAIL test (:func:`evalgate.stats.mde_for_test`)
and the exact crossing probabilities of sequential designs
(:func:`evalgate.stats.fail_crossing_probability`, :func:`evalgate.stats.
pass_crossing_probability`) need, in O(n) memory."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from evalgate.stats._exact import _Z_TIES, _grid_tail, _region_edge, _special, _sup_tail, score_z


@functools.lru_cache(maxsize=32)
def regression_edge(n: int, alpha: float) -> np.ndarray:
    """For each discordant count m, the smallest b that the regression test rejects at alpha.

    The exact unconditional p of H0: Δ ≥ 0 depends on the data only through z0 = (c − b)/√m and
    is nondecreasing in it (a larger z0 has a larger region {z ≤ z0}), so the test rejects iff
    z0 ≤ z_crit, the largest z0 with p ≤ alpha. z_crit is found by bisection on the real line
    (p is a step function of z0 with steps at the attainable values, so the region at the
    bisection's lower end is the region at z_crit), and the edge is the smallest b with
    (m − 2b)/√m ≤ z_crit: O(n) memory, where listing the attainable z0 would take (n + 1)².
    m + 1 where no b rejects. Used for the power (MDE) of the FAIL test.
    """

    def p_reg(z0: float) -> float:  # = p_less at any table with this z0 (b and c swapped)
        return _grid_tail(-z0, n, 0.0, above=alpha)  # only compared with alpha

    m = np.arange(n + 1, dtype=float)
    floor, ceiling = -math.sqrt(n) - 1e-6, math.sqrt(n) + 1e-6  # every attainable z0 is inside
    if p_reg(floor + 2e-6) > alpha:  # not even the most extreme table (b = m = n) rejects
        return m + 1.0
    if p_reg(ceiling) <= alpha:
        return np.zeros(n + 1)
    # Bracket around the normal critical value, widened until it holds, then bisect.
    guess = float(_special().ndtri(alpha))
    lo, hi, step = guess - 0.125, guess + 0.125, 0.125
    while lo > floor and p_reg(lo) > alpha:
        lo, hi, step = max(floor, lo - 2.0 * step), lo, 2.0 * step
    lo = max(lo, floor)
    while hi < ceiling and p_reg(hi) <= alpha:
        lo, hi, step = hi, min(ceiling, hi + 2.0 * step), 2.0 * step
    while hi - lo > 1e-8 * (1.0 + abs(lo)):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if p_reg(mid) <= alpha else (lo, mid)
    # The grid's p, not the supremum bounded from above: the grid's is never above it, so
    # this region holds the gate's FAIL region (an outer bound: the A/A false-FAIL rates
    # computed from it are upper bounds, the MDE's power a hair generous), and the bound
    # would cost minutes at 10^6 items (the regression test's size is near α at every ψ
    # there, a plateau the bound must cover finely). The gate's own p-values and bounds
    # (exact_paired) use the bound.
    z_crit = lo + _Z_TIES * (1.0 + abs(lo))
    return _by_chunks(n, functools.partial(_regression_first, n, z_crit))


def _regression_first(n: int, z_crit: float, m: np.ndarray) -> np.ndarray:
    """The smallest b with z(b, m − b) ≤ z_crit for each count in ``m`` (m + 1: none)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        first = np.ceil((m - z_crit * np.sqrt(m)) / 2.0)
    first = np.clip(np.nan_to_num(first, nan=0.0), 0.0, m + 1.0)
    # Rounding: step to the exact smallest b with z(b) ≤ z_crit (z falls as b rises).
    below = (first >= 1.0) & (score_z(first - 1.0, m - first + 1.0, n, 0.0) <= z_crit)
    first = first - below
    above = (first <= m) & (score_z(first, m - first, n, 0.0) > z_crit)
    return np.minimum(first + above, m + 1.0)


# Discordant counts whose edges are computed at once: every step is elementwise, so the
# temporaries are a chunk's (a million items: ~80 MB of them at once otherwise).
_CHUNK = 1 << 16


def _by_chunks(n: int, edge: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``edge(m)`` for m = 0..n, a chunk of counts at a time."""
    out = np.empty(n + 1)
    for at in range(0, n + 1, _CHUNK):
        m = np.arange(at, min(n + 1, at + _CHUNK), dtype=float)
        out[at : at + m.size] = edge(m)
    return out


@functools.lru_cache(maxsize=32)
def noninferiority_edge(n: int, margin: float, alpha: float) -> np.ndarray:
    """For each discordant count m, the largest b that the non-inferiority test rejects at
    alpha (PASS ⇔ b ≤ edge[m]; −1 where no b does).

    The exact p of H0: Δ ≤ −margin is the supremum over ψ of P(z ≥ z_obs) with z Tango's score
    at d0 = −margin, nonincreasing in z_obs, so the test rejects iff z_obs ≥ z_crit, the
    smallest z with p ≤ alpha (bisection on the real line, as :func:`regression_edge` does), and
    the region is {b ≤ b*(m)} of :func:`_region_edge`. The decision raises p to the largest p
    just beyond −margin (``_envelope``), which only shrinks this region: it is an outer bound
    of the gate's PASS region. Used for the exact false-PASS rate of sequential designs.
    """
    d0 = -float(margin)

    def p_ni(z: float) -> float:
        # Steers the search (only compared with alpha); the end is checked exactly below.
        return _grid_tail(z, n, d0, above=alpha)

    bound = 2.0 * math.sqrt(n) / max(math.sqrt(1.0 - d0 * d0), 1e-6) + 10.0
    if p_ni(bound) > alpha:  # not even the most extreme table rejects
        return np.full(n + 1, -1.0)
    lo, hi = -bound, bound
    while hi - lo > 1e-8 * (1.0 + abs(hi)):
        mid = (lo + hi) / 2.0
        lo, hi = (lo, mid) if p_ni(mid) <= alpha else (mid, hi)
    # The grid's p is below the supremum by up to a few %: move up until the supremum, bounded
    # from above, rejects too (a step first: deciding at the very crossing would need the
    # supremum to a few 1e-5).
    step = 1e-3
    hi = min(bound, hi + step)
    while _sup_tail(hi, n, d0, alpha) > alpha:
        if hi >= bound:
            return np.full(n + 1, -1.0)
        step *= 2.0
        hi = min(bound, hi + step)
    return _by_chunks(n, functools.partial(_region_edge, hi, n, d0))


__all__ = ["noninferiority_edge", "regression_edge"]
