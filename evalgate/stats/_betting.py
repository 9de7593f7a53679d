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

A fixed design (``fixed_n``: all n items are in hand and the bound is read once, at n) shapes the
bets over the run: λ_i is the plug-in bet times s(i/n), a fixed schedule that starts low, stays
near 1 and rises over the last items (:data:`_FIXED_SHAPE`), and the cap is 0.9/m. Ville's
inequality holds for ANY predictable bets in [0, 1/m], and s(i/n) is a constant of the design
(n is known before the first bet), so the bound stays valid for every distribution on the
range. What the shape buys: Ville counts the capital's running maximum, so a late, large bet
can add to the maximum but cannot take back a level already reached; the bets should therefore
grow towards n. The knots are the minimiser, over 8-knot piecewise-linear schedules, of the
median bound in the normal limit (Brownian motion with known σ; Nelder–Mead on 3,000 paths):
1.27 → 1.16 paired-t widths there, 1.34 → 1.27 at n = 200 and 1.36 → 1.22 at n = 500 on the
bench's data (bench/pass_bound_width.py). A sequential run's process (``horizon``) keeps flat
bets and the 0.75/m cap: its looks read it before n, where small early bets would cost power.
"""

from __future__ import annotations

import math

import numpy as np

# Bets are capped at this fraction of the most they could be without risking ruin (1/m).
_MAX_BET = 0.75
# A fixed design's cap: its capital is read once, at n, and its running maximum keeps what the
# early items won, so a factor as low as 0.1 (an item at the bottom of the range) costs less.
_FIXED_MAX_BET = 0.9
# The fixed design's bet schedule s(u), u = i/n: knots at u = 0, 1/7, ..., 1 (module docstring).
_FIXED_SHAPE = (0.42, 0.82, 0.92, 0.99, 1.01, 1.09, 1.42, 3.28)
_BOUND_TOL = 1e-4


def _bets(x: np.ndarray, alpha: float, horizon: int | None = None) -> np.ndarray:
    """Predictable plug-in bets λ_i = sqrt(2 log(1/α) / (n σ̂²_{i−1})) (WSR 2024, eq. 26), n the
    ``horizon`` (the planned number of items; default the number given): a constant of the
    design, so the bets stay predictable when the process is read before its end."""
    n = max(x.size, horizon or 0)
    i = np.arange(1, x.size + 1, dtype=float)
    mu = (0.5 + np.cumsum(x)) / (i + 1.0)
    var = (0.25 + np.cumsum((x - mu) ** 2)) / (i + 1.0)
    prev = np.r_[0.25, var[:-1]]  # σ̂² from the items before i only
    return np.sqrt(2.0 * math.log(1.0 / alpha) / (n * prev))


def _fixed_shape(size: int) -> np.ndarray:
    """s(i/n) for i = 1..n: the fixed design's schedule (:data:`_FIXED_SHAPE`)."""
    u = np.arange(1, size + 1, dtype=float) / size
    return np.interp(u, np.linspace(0.0, 1.0, len(_FIXED_SHAPE)), _FIXED_SHAPE)


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
    not rejected, found by bisection with d0 as one end, so "bound > d0 ⇔ p ≤ alpha" exactly.
    ``horizon``: bet on the values in the order given, tuned to that many items (the module
    docstring); None: in a random order of ``seed``, tuned to their number. ``fixed_n``: the
    fixed design's shaped bets and cap (the module docstring), for a bound read once, at the
    end: without a horizon, or with one equal to the number of values (a fixed run's items in
    its keyed order, all of them).
    """
    if fixed_n and horizon is not None and horizon != values.size:
        raise ValueError("fixed_n bets are for a bound read once at n: horizon must be n")
    width = high - low
    if horizon is None:
        values = values[np.random.default_rng(seed).permutation(values.size)]
    x = (values - low) / width
    bets = _bets(x, alpha, horizon)
    cap = _MAX_BET
    if fixed_n:
        bets, cap = bets * _fixed_shape(x.size), _FIXED_MAX_BET

    def log_capital(m: float) -> float:  # m on the original scale
        return _log_capital(x, bets, (m - low) / width, cap)

    def reject(m: float) -> bool:
        return log_capital(m) >= math.log(1.0 / alpha)

    p = min(1.0, math.exp(-log_capital(d0)))
    if p <= alpha:
        rejected, accepted = d0, float(values.mean())
        if reject(accepted):  # only with shaped bets: the mean is then a conservative bound
            return accepted, p
    else:
        rejected, accepted = low, d0
        if not reject(rejected + 1e-12):
            return low, p
    while accepted - rejected > _BOUND_TOL:
        mid = (rejected + accepted) / 2.0
        rejected, accepted = (mid, accepted) if reject(mid) else (rejected, mid)
    if p <= alpha:
        rejected = max(rejected, math.nextafter(d0, math.inf))
    return rejected, p


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
    equal to the number of groups: read once, at the end): the fixed design's shaped bets and
    cap over the groups, as :func:`betting_lower`'s over items (the number of groups is known
    before the first bet, so the schedule is a design constant).
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
    shape, cap = (_fixed_shape(s.size), _FIXED_MAX_BET) if fixed_n else (1.0, _MAX_BET)

    def log_capital(delta: float) -> float:
        y = (s - delta * m + (width + delta) * big) / (2.0 * width * big)
        y = np.clip(y, 0.0, 1.0)  # rounding only: the bounds above hold exactly
        bets = _bets(y, alpha, horizon) * shape
        return _log_capital(y, bets, (width + delta) / (2.0 * width), cap)

    def reject(delta: float) -> bool:
        return log_capital(delta) >= math.log(1.0 / alpha)

    p = min(1.0, math.exp(-log_capital(d0)))
    estimate = float(s.sum() / m.sum())
    if p <= alpha:
        rejected, accepted = d0, max(estimate, d0)
        if reject(accepted):  # only with shaped bets: the estimate is then a conservative bound
            return accepted, p
    else:
        rejected, accepted = -width, d0
        if not reject(rejected + 1e-12):
            return -width, p
    while accepted - rejected > _BOUND_TOL:
        mid = (rejected + accepted) / 2.0
        rejected, accepted = (mid, accepted) if reject(mid) else (rejected, mid)
    if p <= alpha:
        rejected = max(rejected, math.nextafter(d0, math.inf))
    return rejected, p
