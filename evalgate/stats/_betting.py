"""A lower confidence bound on a bounded mean that holds for any distribution: betting.

The sign-flip test of non-inferiority assumes that the differences, shifted by the margin, are
symmetric; a PR that breaks a few items of a fractional benchmark gives many zero differences and
a few large negative ones, and there the sign-flip PASSes far more often than α (the bench's
"breaks k = 4" cells). The non-inferiority side for fractional scores therefore uses the betting
confidence bound of Waudby-Smith & Ramdas (2024, JRSS-B 86:1, "Estimating means of bounded
random variables by betting"): for data in [0, 1] and a candidate mean m, the capital
K_t(m) = Π_{i ≤ t} (1 + λ_i·(x_i − m)) is a nonnegative supermartingale when the mean is ≤ m,
so by Ville's inequality P(max_t K_t(m) ≥ 1/α) ≤ α: a valid test for every n, skew and number
of distinct values. The bets are their predictable plug-in λ_i (a function of x_1..x_{i−1}
only), truncated at 0.75/m so that no factor can reach 0 (WSR 2024, §5); the bound is found by
bisection on the rejection of each m.

The items have no natural order. Given a ``horizon`` (what ``evalgate compare`` and the
sequential looks pass), they are betted on in the order given, which must be fixed before any
score is seen (:func:`evalgate.stats.item_order`), and the bets are tuned to ``horizon`` items:
the bound over the first t ≤ horizon items of that order is then one capital process read at
time t, and by Ville's inequality it is valid at α at every t at once, so a sequential run may
check it at every look at the full α (see :func:`evalgate.stats.sequential_compare`). Without a
horizon they are betted on in a seeded random order, tuned to their number.

A fixed design (``fixed_n``: all n items are in hand and the bound is read once, at n) bets
to reach 1/α by item n, not to grow fastest: with capital K after i − 1 items and r = n − i + 1
items left, λ_i = 1.3·φ(u) / (α·K · σ̂ · √r), u = Φ̄⁻¹(α·K), capped at 0.99/m, and no more bets
once K ≥ 1/α (:func:`_tracking_log_capital`). Without the 1.3 this is the capital process of the
one-sided z-test read as a bet: in the normal limit K_t = P(the z-test at n rejects | the first
t items) / α is a martingale under the null that starts at 1 and ends at 1/α exactly when the
z-test rejects, and its bets are the λ above (they do not depend on the alternative, as the
z-test does not). It bets boldly while behind and stops once the level is reached; the factor
1.3 (:data:`_BOLDNESS`) was fitted at finite n on data apart from the bench's. Validity does not
rest on the limit or the fit: every λ_i is a function of the items before i (K, σ̂) and of
constants of the design (n, α), in [0, 0.99/m], so K is a nonnegative supermartingale under any
distribution with mean ≤ m and Ville's inequality holds for every n, skew and number of distinct
values. What it buys (bench/pass_bound_width.py, k = 4 / graded): 1.11 / 1.10 paired-t widths
at n = 200 and 1.08 / 1.07 at n = 500, where flat bets give 1.34 / 1.35 and 1.36 / 1.33, and the
best schedule of bets fixed in advance (fitted in the normal limit) 1.27 / 1.26 and 1.22 / 1.16:
the cap below 1/m binds late in any fixed schedule, and a bet that depends on the capital needs
the large bets only on the paths that are behind. A sequential run's process (``horizon`` below
n) keeps the flat bets and the 0.75/m cap: its looks read it before n, where a process aimed at
n has barely started.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from evalgate.stats._pure import _special

# Bets are capped at this fraction of the most they could be without risking ruin (1/m).
_MAX_BET = 0.75
# A fixed design's cap: its bets track the capital (module docstring); a factor as low as 0.01
# (an item at the bottom of the range) is taken only on paths that are behind.
_FIXED_MAX_BET = 0.99
# A fixed design's bound is searched on grids of this many candidates at a time (one pass over
# the items each): the bets depend on the capital, so each candidate has its own process.
_GRID = 160
# The tracking bets are the z-test's times this: flat from 1.2 to 1.4 and lowest at 1.3 in the
# median width on data apart from the bench's (k = 2 rollouts, p ~ Beta(3, 2), and graded
# Beta(5p, 5(1 − p)); n = 50 / 200 / 500), against 1.0: 1.255 → 1.145 t widths on average
# (bench/pass_bound_width.py --fit-boldness). Any constant keeps the bets predictable.
_BOLDNESS = 1.3
_BOUND_TOL = 1e-4


def _bets(x: np.ndarray, alpha: float, horizon: int | None = None) -> np.ndarray:
    """Predictable plug-in bets λ_i = sqrt(2 log(1/α) / (n σ̂²_{i−1})) (WSR 2024, eq. 26), n the
    ``horizon`` (the planned number of items; default the number given): a constant of the
    design, so the bets stay predictable when the process is read before its end."""
    n = max(x.size, horizon or 0)
    return np.sqrt(2.0 * math.log(1.0 / alpha) / (n * _plugin_variance(x)))


def _tracking_log_capital(
    base: np.ndarray,
    slope: np.ndarray | None,
    thetas: np.ndarray,
    means: np.ndarray,
    alpha: float,
) -> np.ndarray:
    """log max_t K_t for each candidate θ_g of a fixed design: x_i(θ) = base_i + slope_i·θ on
    [0, 1] (slope None: the same x for every candidate), null mean ``means``_g, and the bets
    that track the z-test at n (module docstring), with σ̂ the predictable plug-in of
    :func:`_bets` (of x(θ) when it depends on θ). One pass over the items, vectorised over the
    candidates."""
    n, target = base.size, math.log(1.0 / alpha)
    log_k, best = np.zeros(thetas.size), np.zeros(thetas.size)
    limit = _FIXED_MAX_BET / np.maximum(means, 1e-12)
    root_left = np.sqrt(np.arange(n, 0, -1, dtype=float))  # √r, r = n − i + 1 items left
    norm = math.sqrt(2.0 * math.pi) / _BOLDNESS
    size = thetas.size
    total, square, var = np.zeros(size), np.zeros(size), np.full(size, 0.25)
    if slope is None:  # σ̂ does not depend on the candidate: all of it at once
        root_left = np.sqrt(_plugin_variance(base)) * root_left
    ndtri = _special().ndtri
    x: float | np.ndarray
    scale: float | np.ndarray
    for i in range(n):
        if slope is None:
            x, scale = float(base[i]), float(root_left[i])
        else:
            x = np.clip(base[i] + slope[i] * thetas, 0.0, 1.0)
            scale = np.sqrt(var) * root_left[i]
        # α·K, kept inside (0, 1): below 1e-300 the bet is at the cap anyway.
        z = log_k - target
        np.maximum(np.minimum(z, -1e-12, out=z), -690.0, out=z)
        share = np.exp(z)
        u = ndtri(share)  # −u: only u² is used
        bets = np.minimum(np.exp(-0.5 * u * u) / (norm * share * scale), limit)
        bets *= best < target  # the level is reached: nothing left to win
        log_k += np.log1p(bets * (x - means))
        np.maximum(best, log_k, out=best)
        if slope is not None:  # σ̂ of x(θ) from the items so far, as _bets computes it
            total += x
            square += (x - (0.5 + total) / (i + 2.0)) ** 2
            var = (0.25 + square) / (i + 2.0)
    return best


def _plugin_variance(x: np.ndarray) -> np.ndarray:
    """σ̂²_{i−1} for i = 1..n: the variance of the items before i, with a prior of 0.25 (one
    pseudo-item of the largest variance on [0, 1]; WSR 2024, eq. 26)."""
    i = np.arange(1, x.size + 1, dtype=float)
    mu = (0.5 + np.cumsum(x)) / (i + 1.0)
    var = (0.25 + np.cumsum((x - mu) ** 2)) / (i + 1.0)
    return np.r_[0.25, var[:-1]]


def _grid_bound(
    log_capital: Callable[[np.ndarray], np.ndarray],
    low: float,
    top: float,
    d0: float,
    alpha: float,
    near: float,
) -> tuple[float, float]:
    """(lower bound, p-value at d0) from a vectorised test of candidate bounds on [low, top]:
    the largest candidate below which every candidate tried is rejected, to _BOUND_TOL, found on
    the side of d0 its own test is on (so "bound > d0 ⇔ p ≤ alpha" exactly, as the bisection of
    :func:`betting_lower` keeps it). The first grid spans [near, top], ``near`` a few standard
    errors below the estimate, where the bound almost always is: with many items one pass then
    finds it (each pass is a pass over the items); elsewhere the search goes on below ``near``."""
    level = math.log(1.0 / alpha)
    floor = low + 1e-12
    first = np.r_[d0, floor, np.linspace(max(floor, min(near, top)), top, _GRID)]
    found = log_capital(first)
    p = min(1.0, math.exp(-float(found[0])))
    if found[0] >= level:  # e^(−log(1/α)) can round above α
        p = min(p, alpha)
    if p <= alpha:
        rejected, accepted = d0, top
        keep = first[1:] > d0
    else:
        if found[1] < level:
            return low, p
        rejected, accepted = floor, d0
        keep = (first[1:] > floor) & (first[1:] < d0)
    grid, hits = first[1:][keep], found[1:][keep] >= level
    while True:
        order = np.argsort(grid)
        grid, hits = grid[order], hits[order]
        misses = np.flatnonzero(~hits)
        if misses.size:
            accepted = float(grid[misses[0]])
        if misses.size and misses[0] > 0:
            rejected = float(grid[misses[0] - 1])
        elif not misses.size and grid.size:
            rejected = float(grid[-1])
        if p <= alpha and rejected >= top:  # the estimate itself is rejected: a conservative bound
            rejected = top
            break
        if accepted - rejected <= _BOUND_TOL:
            break
        grid = np.linspace(rejected, accepted, _GRID + 1)[1:-1]
        hits = log_capital(grid) >= level
    if p <= alpha:
        rejected = max(rejected, math.nextafter(d0, math.inf))
    return rejected, p


def _bisect_bound(
    log_capital: Callable[[float], float], low: float, top: float, d0: float, alpha: float
) -> tuple[float, float]:
    """(lower bound, p-value at d0) of the flat bets' test: the infimum of the candidates in
    [low, top] it does not reject, by bisection with d0 as one end, so "bound > d0 ⇔ p ≤ alpha"
    exactly (the fixed design's vectorised search: :func:`_grid_bound`)."""
    level = math.log(1.0 / alpha)
    p = min(1.0, math.exp(-log_capital(d0)))
    if p <= alpha:
        rejected, accepted = d0, top
    else:
        rejected, accepted = low, d0
        if log_capital(rejected + 1e-12) < level:
            return low, p
    while accepted - rejected > _BOUND_TOL:
        mid = (rejected + accepted) / 2.0
        rejected, accepted = (mid, accepted) if log_capital(mid) >= level else (rejected, mid)
    if p <= alpha:
        rejected = max(rejected, math.nextafter(d0, math.inf))
    return rejected, p


def _log_capital(x: np.ndarray, bets: np.ndarray, m: float, cap: float = _MAX_BET) -> float:
    """log max_t K_t(m), the bets truncated at cap / m (cap < 1: no factor reaches 0)."""
    capped = np.minimum(bets, cap / max(m, 1e-12))
    return float(np.max(np.cumsum(np.log1p(capped * (x - m)))))


def betting_lower(
    values: np.ndarray,
    low: float,
    high: float,
    d0: float,
    alpha: float,
    seed: int,
    horizon: int | None = None,
    *,
    fixed_n: bool = False,
) -> tuple[float, float]:
    """(lower bound, p-value of H0: mean ≤ d0) for values in [low, high].

    The p-value is 1 / max_t K_t(d0) (capped at 1); the bound is the infimum of the m that are
    not rejected, found by bisection with d0 as one end (``fixed_n``: :func:`_grid_bound`), so
    "bound > d0 ⇔ p ≤ alpha" exactly. ``horizon``: bet on the values in the order given, tuned
    to that many items (the module docstring); None: in a random order of ``seed``, tuned to
    their number. ``fixed_n``: the fixed design's bets that track the capital (the module
    docstring), for a bound read once, at the end: without a horizon, or with one equal to the
    number of values (a fixed run's items in its keyed order, all of them).
    """
    if fixed_n and horizon is not None and horizon != values.size:
        raise ValueError("fixed_n bets are for a bound read once at n: horizon must be n")
    width = high - low
    if horizon is None:
        values = values[np.random.default_rng(seed).permutation(values.size)]
    x = (values - low) / width
    if fixed_n:
        top = max(float(values.mean()), d0)
        near = float(values.mean()) - 6.0 * float(values.std()) / math.sqrt(values.size)
        return _grid_bound(
            lambda ms: _tracking_log_capital(x, None, ms, (ms - low) / width, alpha),
            low, top, d0, alpha, near,
        )  # fmt: skip
    bets = _bets(x, alpha, horizon)

    def log_capital(m: float) -> float:  # m on the original scale
        return _log_capital(x, bets, (m - low) / width)

    return _bisect_bound(log_capital, low, float(values.mean()), d0, alpha)


def betting_lower_groups(
    sums: np.ndarray,
    sizes: np.ndarray,
    width: float,
    d0: float,
    alpha: float,
    seed: int,
    horizon: int | None = None,
    size: float | None = None,
    *,
    fixed_n: bool = False,
) -> tuple[float, float]:
    """(lower bound, p-value of H0: Δ ≤ d0) for the item-weighted mean difference Δ = E[S]/E[m]
    of independent groups (group sums S_g of m_g item differences, each in [−width, width]).

    Groups, not items, are the independent units (cluster sampling: the groups are a sample of
    the groups the benchmark could have had; items within a group share whatever they share).
    Under H0, X_g = S_g − d0·m_g has mean ≤ 0, and X_g ∈ [−(width + d0)·M, (width − d0)·M] with
    M the largest group, so y_g = (X_g + (width + d0)·M) / (2·width·M) ∈ [0, 1] has mean
    ≤ (width + d0) / (2·width): the betting test above applies to y, valid for any number of
    groups and any pattern of change inside them (whole groups broken, a few items each, or
    uniform shifts). With equal groups y does not depend on d0 (y = (S_g/M + width)/(2·width))
    and the bound is the betting bound on the group means. Found by bisection with d0 as one
    end, so "bound > d0 ⇔ p ≤ alpha" exactly.

    ``horizon`` (the planned number of groups) and ``size`` (the planned largest group, M): the
    groups are betted on in the order given, which must be fixed before any score is seen
    (whole groups in :func:`evalgate.stats.item_order`'s order), with bets tuned to ``horizon``
    groups and y scaled by the planned M: every quantity of the bet is then a constant of the
    design or a function of the groups before, so the groups given are a prefix of ONE capital
    process, valid at α at every prefix at once (Ville), as the items' is. None: a random order
    of ``seed``, tuned to the groups given, M their largest. ``fixed_n`` (no horizon, or one
    equal to the number of groups: read once, at the end): the fixed design's bets that track the
    capital, over the groups, as :func:`betting_lower`'s over items (the number of groups is known
    before the first bet, so it is a design constant).
    """
    if fixed_n and horizon is not None and horizon != sums.size:
        raise ValueError("fixed_n bets are for a bound read once at n: horizon must be n")
    if horizon is None:
        order = np.random.default_rng(seed).permutation(sums.size)
        s, m = sums[order], sizes[order]
    else:
        s, m = sums, sizes
    # A planned M below a group seen cannot come from a plan of these groups; the largest seen
    # keeps y in [0, 1] (valid at this reading, no longer one process with the others).
    big = max(float(m.max()), float(size or 0.0))
    estimate = float(s.sum() / m.sum())
    if fixed_n:  # y = base + slope·δ: the same y for every δ when the groups are equal
        base, slope = (s + width * big) / (2.0 * width * big), (big - m) / (2.0 * width * big)
        spread = float(np.std(s - estimate * m)) / (float(m.mean()) * math.sqrt(s.size))
        return _grid_bound(
            lambda ds: _tracking_log_capital(
                np.clip(base, 0.0, 1.0) if not slope.any() else base,
                slope if slope.any() else None,
                ds,
                (width + ds) / (2.0 * width),
                alpha,
            ),
            -width, max(estimate, d0), d0, alpha, estimate - 6.0 * spread,
        )  # fmt: skip

    def log_capital(delta: float) -> float:
        y = (s - delta * m + (width + delta) * big) / (2.0 * width * big)
        y = np.clip(y, 0.0, 1.0)  # rounding only: the bounds above hold exactly
        return _log_capital(y, _bets(y, alpha, horizon), (width + delta) / (2.0 * width))

    return _bisect_bound(log_capital, -width, max(estimate, d0), d0, alpha)
