"""Exact unconditional test for a paired difference of proportions, and its inverted interval.

Paired binary data (k = 1 rollout, 0/1 scores): n items, b = base right & PR wrong, c = base
wrong & PR right; (b, c, n − b − c) ~ Multinomial(n; p_b, p_c, 1 − p_b − p_c) and Δ = p_c − p_b.
The nuisance parameter is the discordance ψ = p_b + p_c.

For H0: Δ = Δ0 the statistic is Tango's (1998, Stat Med 17:891) score z, the difference
standardised by its variance at the restricted maximum-likelihood estimate under Δ0. The p-value
is exact and unconditional: the largest tail probability of z over every nuisance value ψ
compatible with Δ0 (Suissa & Shuster 1985, JRSS-A 148:317; Chan 1998, Stat Med 17:1403 for
non-inferiority; Fagerland, Lydersen & Laake 2013, BMC Med Res Methodol 13:91 compare the
methods). Taking the supremum over ψ is what holds the size in the "PR only breaks items" corner
(ψ = δ, p_c = 0), where the Wald test gives ≈ 0.15 and the asymptotic score test ≈ 0.058 at
n = 200. The rejection region is made monotone in b for each discordant count m (a region
{b ≤ b*(m)} nested in the observed z), so the tail probability is a sum over m of binomial CDFs
and the whole computation is a (ψ grid) x (m) array.

The one-sided (1 − α) bounds are the inversion of the same test: L is the infimum of the Δ0 that
H0: Δ ≤ Δ0 does not reject, U the supremum of the Δ0 that H0: Δ ≥ Δ0 does not reject. The
decision points (−δ and 0) are tested directly and the search is bracketed by them, so
"L > −δ ⇔ p_noninferiority ≤ α" and "U < 0 ⇔ p_regression ≤ α" hold by construction. A discrete
test's p(Δ0) is not quite monotone, so the search probes 0.1 pp steps beyond each crossing and
beyond a decision point whose p is near α, and keeps the outermost crossing it finds; pockets
narrower than a probe step may still exceed α by a few % of α.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

# Nuisance grid: ψ = |Δ0| + (1 − |Δ0|)·u², denser near the boundary ψ = |Δ0| where the supremum
# sits in the "PR only breaks items" corner; the best grid point is then refined locally.
_PSI_POINTS = 31
_REFINE_POINTS = 8
# Bounds are found to this precision on the Δ scale (the scorecard shows 0.1 pp); the decision
# never depends on it.
_BOUND_TOL = 2e-4
# Points probed beyond a bound found by bisection, and beyond a decision point whose p is near α
# (see _bisect, _envelope): p(Δ0) of a discrete test wiggles by a few % of itself.
_PROBES = 3
_PROBE_STEP = 1e-3
# Two z values closer than this are the same value computed in a different order.
_Z_TIES = 1e-9


def _special():
    from scipy import special

    return special


def score_z(b: np.ndarray, c: np.ndarray, n: int, d0: float) -> np.ndarray:
    """Tango's score statistic for H0: p_c − p_b = d0 (large when Δ̂ > d0), vectorised.

    The restricted MLE of p_b under Δ = d0 solves 2n·x² − [(b + c) + d0(c − b − 2n)]·x −
    b·d0·(1 − d0) = 0 (its larger root); Var(Δ̂) = (ψ̃ − d0²)/n with ψ̃ = 2x + d0. A zero
    variance (no discordance at d0 = 0) gives z = 0: no evidence either way.
    """
    b = np.asarray(b, dtype=float)
    c = np.asarray(c, dtype=float)
    lin = (b + c) + d0 * (c - b - 2.0 * n)
    disc = np.maximum(lin * lin + 8.0 * n * b * d0 * (1.0 - d0), 0.0)
    x = (lin + np.sqrt(disc)) / (4.0 * n)
    var = np.maximum((2.0 * x + d0 - d0 * d0) / n, 0.0)
    num = (c - b) / n - d0
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0.0, num / np.sqrt(var), np.sign(num) * np.inf)
    return np.where((var <= 0.0) & (np.abs(num) < 1e-12), 0.0, z)


def _region_edge(z_obs: float, n: int, d0: float, m: np.ndarray) -> np.ndarray:
    """b*(m) = the largest b with z(b, m − b; d0) ≥ z_obs, for each m given (−1 if none).

    For fixed m, z falls as b rises (c = m − b falls; tests/test_stats.py checks this over the
    whole (b, m) triangle), so the rejection region for "large z" is {b ≤ b*(m)}: nested in
    z_obs and containing the observed point. At d0 = 0, z = (m − 2b)/√m, so b*(m) has a closed
    form (checked against z and corrected by one where rounding moved it); otherwise a binary
    search runs for every m at once.
    """
    threshold = z_obs - _Z_TIES * (1.0 + abs(z_obs))
    if d0 == 0.0 and math.isfinite(threshold):
        edge = np.clip(np.floor((m - threshold * np.sqrt(m)) / 2.0), -1.0, m)
        up = (edge < m) & (score_z(edge + 1.0, m - edge - 1.0, n, 0.0) >= threshold)
        edge = edge + up
        down = (edge >= 0.0) & (score_z(edge, m - edge, n, 0.0) < threshold)
        return edge - down
    shape = np.shape(m)
    m = np.asarray(m, dtype=float).ravel()

    def ok(b: np.ndarray, trials: np.ndarray) -> np.ndarray:  # b = −1 is always "in" the region
        return (b < 0.0) | (score_z(b, trials - b, n, d0) >= threshold)

    # Bracket b* near the normal-theory solution of z = threshold, (m − 2b − n·d0)/√(n·ψ − n·d0²)
    # ≈ threshold, so that the binary search below needs a few steps, not log2(n); where the
    # bracket misses, the whole range [−1, m] is searched.
    if math.isfinite(threshold):
        spread = np.sqrt(np.maximum(m - n * d0 * d0, 1.0))
        guess = np.floor((m - n * d0 - threshold * spread) / 2.0)
        lo = np.clip(guess - 8.0, -1.0, m)
        hi = np.clip(guess + 8.0, -1.0, m)
        good = ok(lo, m) & ((hi >= m) | ~ok(np.minimum(hi + 1.0, m), m))
        lo, hi = np.where(good, lo, -1.0), np.where(good, hi, m)
    else:
        lo, hi = np.full(m.shape, -1.0), m.copy()
    active = np.nonzero(lo < hi)[0]
    while active.size:
        a_lo, a_hi, a_m = lo[active], hi[active], m[active]
        mid = np.floor((a_lo + a_hi + 1.0) / 2.0)
        yes = ok(mid, a_m)
        lo[active], hi[active] = np.where(yes, mid, a_lo), np.where(yes, a_hi, mid - 1.0)
        active = active[lo[active] < hi[active]]
    return lo.reshape(shape)


def _windows(n: int, psi: np.ndarray) -> np.ndarray:
    """For each ψ, the discordant counts m that carry its Binomial(n, ψ) probability, as a
    (len(ψ), W) array of counts in [0, n].

    Each row spans nψ ± (9 SD + 30): by Bernstein's inequality the mass beyond is below e^−39,
    so the sums below are exact to far better than any decision needs, and memory and time
    grow like √n per ψ instead of n (n = 10⁶ items: ~9,000 counts per ψ, not 10⁶).
    """
    half = np.ceil(9.0 * np.sqrt(n * psi * (1.0 - psi)) + 30.0)
    width = int(min(n + 1, 2 * int(half.max()) + 1))
    start = np.clip(np.floor(n * psi) - half, 0, n + 1 - width)
    return start[:, None] + np.arange(width, dtype=float)[None, :]


def _tail(z_obs: float, n: int, d0: float, psi: np.ndarray) -> np.ndarray:
    """P_{Δ0, ψ}(b ≤ b*(M)) for each ψ: Σ_m Bin(m; n, ψ)·Bin-CDF(b*(m); m, p_b/ψ), the sum
    over the window of m that carries the probability (see _windows)."""
    sp = _special()
    psi = np.clip(psi, 1e-300, 1.0)
    m = _windows(n, psi)
    edge = _region_edge(z_obs, n, d0, m)
    psi = psi[:, None]
    log_pmf = (
        sp.gammaln(n + 1.0)
        - sp.gammaln(m + 1.0)
        - sp.gammaln(n - m + 1.0)
        + sp.xlogy(m, psi)
        + sp.xlog1py(n - m, -psi)
    )
    weight = np.exp(log_pmf)
    q = np.broadcast_to(np.clip((psi - d0) / (2.0 * psi), 0.0, 1.0), weight.shape)
    # Only cells that carry probability and are neither empty nor full need a binomial CDF.
    partial = (weight > 1e-16) & (edge >= 0) & (edge < m)
    total = np.sum(np.where(edge >= m, weight, 0.0), axis=1)
    cdf = sp.bdtr(edge[partial].astype(np.int64), m[partial].astype(np.int64), q[partial])
    np.add.at(total, np.nonzero(partial)[0], weight[partial] * cdf)
    return total


def _sup_tail(z_obs: float, n: int, d0: float) -> float:
    """Supremum over ψ ∈ [|d0|, 1] of the tail probability (grid, then a local refinement)."""
    low = abs(d0)
    if low >= 1.0:
        return float(_tail(z_obs, n, d0, np.array([1.0]))[0])
    u = np.linspace(0.0, 1.0, _PSI_POINTS)
    grid = low + (1.0 - low) * u * u
    values = _tail(z_obs, n, d0, grid)
    best = int(np.argmax(values))
    near = np.linspace(grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)], _REFINE_POINTS)
    return float(min(1.0, max(values.max(), _tail(z_obs, n, d0, near).max())))


def p_greater(b: int, c: int, n: int, d0: float) -> float:
    """Exact unconditional p-value of H0: Δ ≤ d0 against H1: Δ > d0."""
    z_obs = float(score_z(np.array(b), np.array(c), n, d0))
    return _sup_tail(z_obs, n, d0)


def p_less(b: int, c: int, n: int, d0: float) -> float:
    """Exact unconditional p-value of H0: Δ ≥ d0 against H1: Δ < d0 (b and c swapped)."""
    return p_greater(c, b, n, -d0)


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

    @functools.cache
    def p_lower(d0: float) -> float:
        return p_greater(b, c, n, d0)

    @functools.cache
    def p_upper(d0: float) -> float:
        return p_less(b, c, n, d0)

    p_ni, at_ni = _envelope(p_lower, -margin, -1.0, alpha)
    p_reg, at_reg = _envelope(p_upper, 0.0, 1.0, alpha)

    def lower_rejects(d0: float) -> bool:
        return p_lower(d0) <= alpha

    def upper_rejects(d0: float) -> bool:
        return p_upper(d0) <= alpha

    # Lower bound: the decision point −margin brackets the search on one side.
    if p_ni <= alpha:
        accepted = est if not lower_rejects(est) else min(1.0, est + 4.0 * se)
        lo = _bisect(p_lower, alpha, -margin, max(accepted, -margin + _BOUND_TOL))
        lo = max(lo, math.nextafter(-margin, math.inf))
    else:
        far = max(-1.0, min(est, at_ni) - 3.0 * se)  # most bounds lie within 2.5 SE
        while far > -1.0 and not lower_rejects(far):
            far = max(-1.0, far - 3.0 * se)
        lo = -1.0 if not lower_rejects(far) else _bisect(p_lower, alpha, far, at_ni)
    # Upper bound: bracketed by the decision point 0.
    if p_reg <= alpha:
        accepted = est if not upper_rejects(est) else max(-1.0, est - 4.0 * se)
        hi = _bisect(p_upper, alpha, 0.0, min(accepted, -_BOUND_TOL))
        hi = min(hi, math.nextafter(0.0, -math.inf))
    else:
        far = min(1.0, max(est, at_reg) + 3.0 * se)
        while far < 1.0 and not upper_rejects(far):
            far = min(1.0, far + 3.0 * se)
        hi = 1.0 if not upper_rejects(far) else _bisect(p_upper, alpha, far, at_reg)
    return lo, hi, p_ni, p_reg


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
        return _sup_tail(-z0, n, 0.0)

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
    z_crit = lo + _Z_TIES * (1.0 + abs(lo))
    with np.errstate(invalid="ignore", divide="ignore"):
        first = np.ceil((m - z_crit * np.sqrt(m)) / 2.0)
    first = np.clip(np.nan_to_num(first, nan=0.0), 0.0, m + 1.0)
    # Rounding: step to the exact smallest b with z(b) ≤ z_crit (z falls as b rises).
    below = (first >= 1.0) & (score_z(first - 1.0, m - first + 1.0, n, 0.0) <= z_crit)
    first = first - below
    above = (first <= m) & (score_z(first, m - first, n, 0.0) > z_crit)
    return np.minimum(first + above, m + 1.0)


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
    m = np.arange(n + 1, dtype=float)

    def p_ni(z: float) -> float:
        return _sup_tail(z, n, d0)

    bound = 2.0 * math.sqrt(n) / max(math.sqrt(1.0 - d0 * d0), 1e-6) + 10.0
    if p_ni(bound) > alpha:  # not even the most extreme table rejects
        return np.full(n + 1, -1.0)
    lo, hi = -bound, bound
    while hi - lo > 1e-8 * (1.0 + abs(hi)):
        mid = (lo + hi) / 2.0
        lo, hi = (lo, mid) if p_ni(mid) <= alpha else (mid, hi)
    return _region_edge(hi, n, d0, m)
