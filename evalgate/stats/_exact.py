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


@functools.lru_cache(maxsize=64)
def _triangle(n: int) -> tuple[np.ndarray, np.ndarray]:
    """All (b, m) with 0 ≤ b ≤ m ≤ n as a (n + 1) x (n + 1) grid; cells with b > m are masked."""
    m = np.arange(n + 1, dtype=float)[:, None]
    b = np.arange(n + 1, dtype=float)[None, :]
    return np.broadcast_to(b, (n + 1, n + 1)), np.broadcast_to(m, (n + 1, n + 1))


def _region_edge(z_obs: float, n: int, d0: float) -> np.ndarray:
    """b*(m) = the largest b with z(b, m − b; d0) ≥ z_obs, for each m (−1 if none).

    For fixed m, z falls as b rises (c = m − b falls; tests/test_stats.py checks this over the
    whole (b, m) triangle), so the rejection region for "large z" is {b ≤ b*(m)}: nested in
    z_obs and containing the observed point. Found by a binary search run for every m at once.
    """
    m = np.arange(n + 1, dtype=float)
    threshold = z_obs - _Z_TIES * (1.0 + abs(z_obs))
    lo, hi = np.full(n + 1, -1.0), m.copy()
    while np.any(lo < hi):
        mid = np.floor((lo + hi + 1.0) / 2.0)
        ok = score_z(mid, m - mid, n, d0) >= threshold
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid - 1.0)
    return lo


@functools.lru_cache(maxsize=64)
def _log_choose(n: int) -> np.ndarray:
    """log C(n, m) for m = 0..n."""
    sp = _special()
    m = np.arange(n + 1, dtype=float)
    return sp.gammaln(n + 1.0) - sp.gammaln(m + 1.0) - sp.gammaln(n - m + 1.0)


def _tail(edge: np.ndarray, n: int, d0: float, psi: np.ndarray) -> np.ndarray:
    """P_{Δ0, ψ}(b ≤ b*(M)) for each ψ: Σ_m Bin(m; n, ψ)·Bin-CDF(b*(m); m, p_b/ψ)."""
    sp = _special()
    m = np.arange(n + 1, dtype=float)
    psi = np.clip(psi, 1e-300, 1.0)[:, None]
    log_pmf = _log_choose(n) + sp.xlogy(m, psi) + sp.xlog1py(n - m, -psi)
    weight = np.exp(log_pmf)
    q = np.broadcast_to(np.clip((psi - d0) / (2.0 * psi), 0.0, 1.0), weight.shape)
    k = np.broadcast_to(edge, weight.shape)
    trials = np.broadcast_to(m, weight.shape)
    # Only cells that carry probability and are neither empty nor full need a binomial CDF.
    partial = (weight > 1e-16) & (k >= 0) & (k < trials)
    total = np.sum(np.where(k >= trials, weight, 0.0), axis=1)
    cdf = sp.bdtr(k[partial].astype(np.int64), trials[partial].astype(np.int64), q[partial])
    np.add.at(total, np.nonzero(partial)[0], weight[partial] * cdf)
    return total


def _sup_tail(edge: np.ndarray, n: int, d0: float) -> float:
    """Supremum over ψ ∈ [|d0|, 1] of the tail probability (grid, then a local refinement)."""
    low = abs(d0)
    if low >= 1.0:
        return float(_tail(edge, n, d0, np.array([1.0]))[0])
    u = np.linspace(0.0, 1.0, _PSI_POINTS)
    grid = low + (1.0 - low) * u * u
    values = _tail(edge, n, d0, grid)
    best = int(np.argmax(values))
    near = np.linspace(grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)], _REFINE_POINTS)
    return float(min(1.0, max(values.max(), _tail(edge, n, d0, near).max())))


def p_greater(b: int, c: int, n: int, d0: float) -> float:
    """Exact unconditional p-value of H0: Δ ≤ d0 against H1: Δ > d0."""
    z_obs = float(score_z(np.array(b), np.array(c), n, d0))
    return _sup_tail(_region_edge(z_obs, n, d0), n, d0)


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


@functools.lru_cache(maxsize=256)
def regression_edge(n: int, alpha: float) -> np.ndarray:
    """For each discordant count m, the smallest b that the regression test rejects at alpha.

    The exact unconditional p of H0: Δ ≥ 0 depends on the data only through z0 = (c − b)/√m and
    is increasing in it, so the test rejects iff z0 ≤ z_crit; z_crit is the largest attainable
    z0 with p ≤ alpha. m + 1 where no b rejects. Used for the power (MDE) of the FAIL test.
    """
    b, m = _triangle(n)
    z = score_z(b, m - b, n, 0.0)
    values = np.unique(np.round(z[(b <= m)], 12))
    lo, hi = 0, values.size - 1  # values ascending; find the largest index with p ≤ alpha
    if _sup_tail(_region_edge(-values[0], n, 0.0), n, 0.0) > alpha:
        return np.arange(n + 1, dtype=float) + 1.0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        # p_less at z0 = values[mid] is p_greater at −z0 with b, c swapped (same region shape).
        if _sup_tail(_region_edge(-values[mid], n, 0.0), n, 0.0) <= alpha:
            lo = mid
        else:
            hi = mid - 1
    z_crit = values[lo]
    hit = (b <= m) & (z <= z_crit + _Z_TIES * (1.0 + abs(z_crit)))
    return np.where(hit, b, np.inf).min(axis=1).clip(max=np.arange(n + 1) + 1.0)
