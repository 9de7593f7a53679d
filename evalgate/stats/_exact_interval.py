"""The bounds of the exact unconditional test for paired 0/1 scores: its inversion.

The one-sided (1 − α) bounds are the inversion of the same test: L is the infimum of the Δ0 that
H0: Δ ≤ Δ0 does not reject, U the supremum of the Δ0 that H0: Δ ≥ Δ0 does not reject. The
decision points (−δ and 0) are tested directly and the search is bracketed by them, so
"L > −δ ⇔ p_noninferiority ≤ α" and "U < 0 ⇔ p_regression ≤ α" hold by construction. A discrete
test's p(Δ0) is not quite monotone, so the search probes 0.1 pp steps beyond each crossing and
beyond a decision point whose p is near α, and keeps the outermost crossing it finds; pockets
narrower than a probe step may still exceed α by a few % of α.

The regression side is the non-inferiority side of the mirrored table: H0: Δ ≥ Δ0 for (b, c) is
H0: −Δ ≤ −Δ0 for (c, b), so one search (:func:`_bound`) finds both bounds, the upper one on the
mirror and negated (negation is exact in floating point).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evalgate.stats._exact import (
    _SUP_ATOL,
    _SUP_RTOL,
    _grid_tail,
    _special,
    p_greater,
    score_z,
)

# From this many items on, the bounded supremum costs O(n) a point (the bounds on an interval
# need ~√n intervals of ~√n cells each where the tail is flat in ψ, as the score test's is at
# large n: 25 s for one point near α at 10^6 items). There the bounds' points are checked on
# the grid's p with an allowance (the grid is below the supremum by a few % at most:
# _GRID_ALLOWANCE is 4 x the largest gap seen), and the p-values at the decision points (-δ, 0)
# are bounded from above to 1 % + _LARGE_ATOL (the scorecard shows two digits), a decision
# within that of α settled as exactly as before
# (_sup_tail's ``decide``): the verdicts are the bounded supremum's at every n, the shown
# bounds a little wider (tests/test_exact_large.py).
_LARGE_N = 20_000
_LARGE_ATOL = 1e-4
_LARGE_RTOL = 1e-2
_GRID_ALLOWANCE = 0.1
# Bounds are found to this precision on the Δ scale (the scorecard shows 0.1 pp); the decision
# never depends on it.
_BOUND_TOL = 2e-4
# Points probed beyond a bound found by bisection, and beyond a decision point whose p is near α
# (see _bisect, _envelope): p(Δ0) of a discrete test wiggles by a few % of itself.
_PROBES = 3
_PROBE_STEP = 1e-3


def _bisect(
    pvalue: Callable[[float], float], alpha: float, rejected: float, accepted: float
) -> float:
    """The rejected end of the outermost crossing of p = alpha between the two points.

    Regula falsi on Φ⁻¹(p) (nearly linear in Δ0), Illinois-modified so that both ends move
    (Dowell & Jarratt 1971), falling back to halving when an end stalls. Exact tests are
    discrete, so p(Δ0) can wiggle across α near the bound: a few points just beyond the bound
    are then probed, and the search moves out past any that is accepted.
    """
    ndtri = _special().ndtri
    target = float(ndtri(alpha))

    def g(x: float) -> float:
        return float(ndtri(min(max(pvalue(x), 1e-300), 1.0 - 1e-16))) - target

    outer = rejected
    while True:
        g_r, g_a, side = g(rejected), g(accepted), 0
        while abs(accepted - rejected) > _BOUND_TOL:
            x = rejected - g_r * (accepted - rejected) / (g_a - g_r) if g_a != g_r else math.nan
            span = accepted - rejected
            if not math.isfinite(x) or not 0.05 < (x - rejected) / span < 0.95:
                x = rejected + span / 2.0
            g_x = g(x)
            if g_x <= 0.0:  # rejected
                rejected, g_r = x, g_x
                g_a, side = (g_a / 2.0 if side == -1 else g_a), -1
            else:
                accepted, g_a = x, g_x
                g_r, side = (g_r / 2.0 if side == 1 else g_r), 1
        step = math.copysign(_PROBE_STEP, outer - accepted)
        probes = [rejected + k * step for k in range(1, _PROBES + 1)]
        probes = [x for x in probes if (x - outer) * step < 0.0]  # stay inside the bracket
        again = [x for x in probes if pvalue(x) > alpha]
        if not again:
            return rejected
        rejected, accepted = outer, again[-1]


def _rejected_end(rejects: Callable[[float], bool], x: float, known: float, se: float) -> float:
    """``x`` (a bound found on the grid's p), moved towards ``known`` (a point the exact test
    rejects) until the test, with its supremum bounded from above, rejects there too: steps
    of _BOUND_TOL or SE/20 (the smaller), doubling, and ``known`` itself at the latest."""
    # The search ends where the grid's p is at alpha, and the supremum is a little above it:
    # a step out first (deciding at the very crossing would need the supremum to 0.1 %).
    step = math.copysign(min(_BOUND_TOL, se / 20.0), known - x)
    x = x + step
    while (known - x) * step > 0.0 and not rejects(x):
        step = 2.0 * step
        x = x + step
    return x if (known - x) * step > 0.0 else known


def _envelope(
    pvalue: Callable[[float], float], d0: float, beyond: float, alpha: float
) -> tuple[float, float]:
    """(p, where): p at the decision point d0, raised to the largest p a few steps beyond it
    (towards the null) when it is near alpha, and the point where that p was found.

    The test that decides then rejects at d0 only if it also rejects just beyond, so the bound
    (the outermost crossing, see _bisect) lies on the same side of d0 as the decision says.
    """
    worst, where = pvalue(d0), d0
    if alpha / 3.0 <= worst <= alpha:
        for k in range(1, _PROBES + 1):
            x = d0 + beyond * k * _PROBE_STEP
            if -1.0 <= x <= 1.0 and pvalue(x) > worst:
                worst, where = pvalue(x), x
    return worst, where


@dataclass(frozen=True)
class _Side:
    """One one-sided test of a table, H0: Δ ≤ d0 against Δ > d0, at alpha: what the search
    for its bound asks of it, each answer kept (the searches ask for the same points often)."""

    p: Callable[[float], float]  # the decision's p-value: the supremum bounded from above
    search: Callable[[float], float]  # the grid's p (a lower bound on the supremum): steers
    rejects: Callable[[float], bool]  # the test, with the supremum bounded, rejects at d0


def _side(b: int, c: int, n: int, alpha: float) -> _Side:
    """The test of H0: Δ ≤ d0 for the counts (b, c) of n items, at ``alpha``.

    The searches for a bound run on the grid's p (a lower bound on the supremum, within a few
    %: cheap), and every point they return as rejected is checked with the supremum bounded
    from above, settled only as far as "≤ alpha?" needs (_sup_tail's ``decide``), and moved
    outwards until it is (_rejected_end): a bound is never narrower than the exact supremum's
    test gives. From _LARGE_N items on, p is bounded more loosely and a decision within that
    tolerance of alpha is settled as the tighter bound would settle it."""
    large = n >= _LARGE_N
    atol, rtol = (_LARGE_ATOL, _LARGE_RTOL) if large else (_SUP_ATOL, _SUP_RTOL)

    @functools.cache
    def p(d0: float) -> float:
        found = p_greater(b, c, n, d0, atol=atol, rtol=rtol)
        if large and alpha < found <= alpha * (1.0 + rtol) + atol:
            closer = p_greater(b, c, n, d0, alpha)
            return closer if closer <= alpha else found
        return found

    @functools.cache
    def search(d0: float) -> float:
        return _grid_tail(float(score_z(np.array(b), np.array(c), n, d0)), n, d0)

    @functools.cache
    def rejects(d0: float) -> bool:
        if large:  # the grid's p with an allowance (see _LARGE_N); the decision is p's
            return search(d0) <= alpha * (1.0 - _GRID_ALLOWANCE)
        return p_greater(b, c, n, d0, alpha) <= alpha

    return _Side(p, search, rejects)


def _bound(side: _Side, point: float, est: float, se: float, alpha: float) -> tuple[float, float]:
    """(p at the decision point, lower bound) of one side: the decision point ``point`` (−δ)
    brackets the search on one side, so "bound > point ⇔ p ≤ alpha" holds by construction."""
    p, at = _envelope(side.p, point, -1.0, alpha)
    if p <= alpha:
        accepted = est if not side.rejects(est) else min(1.0, est + 4.0 * se)
        lo = _bisect(side.search, alpha, point, max(accepted, point + _BOUND_TOL))
        lo = _rejected_end(side.rejects, lo, point, se)
        return p, max(lo, math.nextafter(point, math.inf))
    far = max(-1.0, min(est, at) - 3.0 * se)  # most bounds lie within 2.5 SE
    while far > -1.0 and not side.rejects(far):
        far = max(-1.0, far - 3.0 * se)
    if not side.rejects(far):
        return p, -1.0
    return p, _rejected_end(side.rejects, _bisect(side.search, alpha, far, at), far, se)


@functools.lru_cache(maxsize=65_536)
def exact_paired(
    b: int, c: int, n: int, margin: float, alpha: float
) -> tuple[float, float, float, float]:
    """(lower, upper, p_noninferiority, p_regression) for paired binary counts.

    lower / upper are one-sided (1 − alpha) bounds on Δ = (c − b)/n's population value, from
    inverting the exact unconditional score test; p_noninferiority tests H0: Δ ≤ −margin,
    p_regression H0: Δ ≥ 0. Cached: simulations and sequential looks ask for the same counts often.
    """
    est = (c - b) / n
    se = math.sqrt(max((b + c) / n, 1.0 / n) / n)
    p_ni, lo = _bound(_side(b, c, n, alpha), -margin, est, se, alpha)
    # The upper bound is the mirrored table's lower bound, negated (module docstring).
    p_reg, mirrored = _bound(_side(c, b, n, alpha), -0.0, -est, se, alpha)
    return lo, -mirrored, p_ni, p_reg


__all__ = ["exact_paired"]
