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
and the whole computation is a (ψ grid) x (m) array. The supremum itself is bounded from above
(:func:`_sup_tail`: branch and bound over ψ with bounds on every interval), so the reported p is
never below the true one (a grid's maximum was, by up to 2.2 % relative near α).

The inversion of this test into bounds is :mod:`._exact_interval` (:func:`exact_paired`), its
rejection regions for power and sequential designs :mod:`._exact_regions`.
"""

from __future__ import annotations

import functools
import math

import numpy as np

# Nuisance grid: ψ = |Δ0| + (1 − |Δ0|)·u², denser near the boundary ψ = |Δ0| where the supremum
# sits in the "PR only breaks items" corner; the best grid point is then refined locally.
_PSI_POINTS = 31
_REFINE_POINTS = 8
# The supremum is then bounded from above on every interval between evaluated points, and the
# intervals whose bound is above the best value by more than this (relative) are halved, up
# to this many times (see _sup_tail): p is never below the true supremum, and above it by at
# most this much.
_SUP_RTOL = 5e-4
_SUP_ATOL = 1e-6
_SUP_LEVELS = 60
# A tail's cells of less probability than this are left out of its sum, and a tail computed
# may be below the true one by at most _TAIL_SLACK (the windows' e^−39 ≈ 1.2e-17 plus at most
# 10^6 cells below the floor): the bounds on the supremum allow for it.
_CELL_FLOOR = 1e-24
_TAIL_SLACK = 1e-16
# Two z values closer than this are the same value computed in a different order.
_Z_TIES = 1e-9
# Rows of a tail's block computed at once (_tail): their temporaries, not the block's.
_ROWS_AT_ONCE = 8


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
    if b.ndim or c.ndim:  # arrays: the same operations in place (a third less time)
        return _score_z_arrays(b, c, n, d0)
    lin = (b + c) + d0 * (c - b - 2.0 * n)
    disc = np.maximum(lin * lin + 8.0 * n * b * d0 * (1.0 - d0), 0.0)
    x = (lin + np.sqrt(disc)) / (4.0 * n)
    var = np.maximum((2.0 * x + d0 - d0 * d0) / n, 0.0)
    num = (c - b) / n - d0
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0.0, num / np.sqrt(var), np.sign(num) * np.inf)
    return np.where((var <= 0.0) & (np.abs(num) < 1e-12), 0.0, z)


def _score_z_arrays(b: np.ndarray, c: np.ndarray, n: int, d0: float) -> np.ndarray:
    """:func:`score_z` of arrays, each operation of its formula in the same order on the same
    operands (a + b and a·b commute exactly), into few temporaries: the binary searches for the
    rejection edges evaluate it on ~10^5 cells at a time, a million items."""
    diff = c - b
    lin = diff - 2.0 * n
    lin *= d0
    lin += b + c  # (b + c) + d0·(c − b − 2n)
    disc = b * (8.0 * n)
    disc *= d0
    disc *= 1.0 - d0  # 8n·b·d0·(1 − d0)
    x = lin * lin
    x += disc
    del disc
    np.maximum(x, 0.0, out=x)
    np.sqrt(x, out=x)
    x += lin
    del lin
    x /= 4.0 * n  # the root x
    var = x
    var *= 2.0
    var += d0
    var -= d0 * d0
    var /= n
    np.maximum(var, 0.0, out=var)  # (2x + d0 − d0²)/n
    num = diff
    num /= n
    num -= d0  # (c − b)/n − d0
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


def _windows(n: int, psi: np.ndarray) -> tuple[np.ndarray, int]:
    """For each ψ, the discordant counts m that carry its Binomial(n, ψ) probability: (the
    first count of each row, the rows' common width W), the counts in [0, n].

    Each row spans nψ ± (9 SD + 30): by Bernstein's inequality the mass beyond is below e^−39,
    so the sums below are exact to far better than any decision needs, and memory and time
    grow like √n per ψ instead of n (n = 10⁶ items: ~9,000 counts per ψ, not 10⁶).
    """
    half = np.ceil(9.0 * np.sqrt(n * psi * (1.0 - psi)) + 30.0)
    width = int(min(n + 1, 2 * int(half.max()) + 1))
    start = np.clip(np.floor(n * psi) - half, 0, n + 1 - width)
    return start, width


@functools.lru_cache(maxsize=8)
def _log_choose(n: int) -> np.ndarray:
    """log C(n, m) for m = 0..n: looked up by every tail evaluation, computed once per n."""
    sp = _special()
    m = np.arange(n + 1, dtype=float)
    return sp.gammaln(n + 1.0) - sp.gammaln(m + 1.0) - sp.gammaln(n - m + 1.0)


class _Edges:
    """b*(m) of one test (z_obs, n, d0), found on demand and kept: it does not depend on ψ, and
    a branch and bound evaluates many ψ whose windows overlap."""

    def __init__(self, z_obs: float, n: int, d0: float) -> None:
        self.z_obs, self.n, self.d0 = z_obs, n, d0
        self.known = np.full(n + 1, np.nan)

    def __call__(self, m: np.ndarray) -> np.ndarray:
        index = m.astype(np.intp)
        gaps = index[np.isnan(self.known[index])]
        if not gaps.size:
            return self.known[index]
        low = int(gaps.min())
        span = int(gaps.max()) - low + 1
        if span <= 4 * gaps.size:  # the rows' counts overlap: marked, not sorted
            need = np.zeros(span, dtype=bool)
            need[gaps - low] = True
            missing = np.flatnonzero(need) + low  # = np.unique(gaps)
        else:
            missing = np.unique(gaps)
        if missing.size:
            found = _region_edge(self.z_obs, self.n, self.d0, missing.astype(float))
            self.known[missing] = found
        return self.known[index]


def _tail(
    z_obs: float,
    n: int,
    d0: float,
    psi: np.ndarray,
    edges: _Edges | None = None,
    above: float | None = None,
) -> np.ndarray:
    """P_{Δ0, ψ}(b ≤ b*(M)) for each ψ: Σ_m Bin(m; n, ψ)·Bin-CDF(b*(m); m, p_b/ψ), the sum
    over the window of m that carries the probability (see _windows). ``edges``: b*(m), kept
    across calls (it does not depend on ψ). ``above``: only whether some tail exceeds it is
    wanted; the tails are then those of the first ψ, up to the first rows that exceed it (the
    rows computed are the same bits as without it)."""
    psi = np.clip(psi, 1e-300, 1.0)
    # Many ψ at once (a branch and bound's level): in blocks of about 2^20 cells, so memory
    # stays that of a few windows whatever the number of points.
    rows = max(1, (1 << 20) // (2 * int(9.0 * math.sqrt(n / 4.0) + 31.0) + 1))
    if psi.size > rows:
        blocks = []
        for i in range(0, psi.size, rows):
            blocks.append(_tail(z_obs, n, d0, psi[i : i + rows], edges, above))
            if above is not None and blocks[-1].max() > above:
                break
        return np.concatenate(blocks)
    # The rows' window width is the block's (the widest row's): a row's cells, and so its
    # sum, are those of the whole block. The rows are then summed a few at a time, which gives
    # each row the same sum (a row's cells are summed on their own) with temporaries of a few
    # rows, not of the whole block (a million items: ~50 MB of them).
    start, width = _windows(n, psi)
    cells = np.arange(width, dtype=float)
    total = np.empty(psi.size)
    for at in range(0, psi.size, _ROWS_AT_ONCE):
        part = slice(at, at + _ROWS_AT_ONCE)
        total[part] = _window_sums(z_obs, n, d0, psi[part], start[part, None] + cells, edges)
        if above is not None and total[part].max() > above:
            return total[: at + _ROWS_AT_ONCE]
    return total


def _window_sums(
    z_obs: float, n: int, d0: float, psi: np.ndarray, m: np.ndarray, edges: _Edges | None
) -> np.ndarray:
    """The tail of each ψ over its row of counts ``m`` (see :func:`_tail`)."""
    sp = _special()
    edge = _region_edge(z_obs, n, d0, m) if edges is None else edges(m)
    psi = psi[:, None]
    log_choose = _log_choose(n)[m.astype(np.intp)]
    log_pmf = log_choose + sp.xlogy(m, psi) + sp.xlog1py(n - m, -psi)
    weight = np.exp(log_pmf)
    q = np.broadcast_to(np.clip((psi - d0) / (2.0 * psi), 0.0, 1.0), weight.shape)
    # Only cells that carry probability and are neither empty nor full need a binomial CDF.
    partial = (weight > _CELL_FLOOR) & (edge >= 0) & (edge < m)
    total = np.sum(np.where(edge >= m, weight, 0.0), axis=1)
    # b*(m) as a float: the loop bdtr takes for any integer k casts it to one (exact).
    cdf = sp.bdtr(edge[partial], m[partial].astype(np.int64), q[partial])
    np.add.at(total, np.nonzero(partial)[0], weight[partial] * cdf)
    return total


def _hellinger_scale(n: int, d0: float, psi: np.ndarray) -> np.ndarray:
    """J(ψ): an antiderivative of an upper bound on √I(ψ)/2, I the Fisher information of the
    trinomial (b, c, rest) along the null curve p_b = (ψ − d0)/2, p_c = (ψ + d0)/2.

    For any region R, |d/dψ P_ψ(R)| ≤ √(P_ψ(R)·I(ψ)) (Cauchy–Schwarz on the score), so √P_ψ(R)
    moves by at most J(b) − J(a) between a and b. I = n·Σ p_k'²/p_k and √ of a sum is at most
    the sum of the √s: J = (√n/2)·(√(2(ψ − d0)) + √(2(ψ + d0)) − 2√(1 − ψ)), finite on
    [|d0|, 1] although I is not at the ends.
    """
    psi = np.clip(psi, abs(d0), 1.0)
    return (math.sqrt(n) / 2.0) * (
        np.sqrt(2.0 * (psi - d0)) + np.sqrt(2.0 * (psi + d0)) - 2.0 * np.sqrt(1.0 - psi)
    )


def _cells(psi: np.ndarray, d0: float) -> np.ndarray:
    """The trinomial's cell probabilities (p_b, p_c, 1 − ψ) at each ψ, as rows."""
    return np.column_stack([(psi - d0) / 2.0, (psi + d0) / 2.0, 1.0 - psi]).clip(0.0, 1.0)


def _interval_bounds(
    n: int, d0: float, a: np.ndarray, b: np.ndarray, ta: np.ndarray, tb: np.ndarray
) -> np.ndarray:
    """An upper bound on sup over ψ ∈ [a, b] of P_ψ(R), for each interval, from the tail
    probabilities ``ta`` / ``tb`` at its ends: the least of

    * the Lipschitz bound on √P (see :func:`_hellinger_scale`): √P ≤ (√ta + √tb + J(b) − J(a))/2;
    * Hölder's bound from either end r: P_ψ(R) ≤ P_r(R)^(1−1/p) · (E_r[L^p])^(1/p), L the
      likelihood ratio, E_r[L^p] = S(ψ)^n with S(ψ) = Σ_k p_k(ψ)^p p_k(r)^(1−p). The p_k are
      affine in ψ, so S is convex and its maximum over the interval is at the other end. Tight
      far from the maximum, where the tail is tiny and the Lipschitz bound is not.

    The tails are windowed sums (_windows: the mass left out is below e^−39), so each is
    raised by _TAIL_SLACK before Hölder's bound uses it (the windows' e^−39, and the cells
    below _CELL_FLOOR each window leaves out: at most 10^6 of them).
    """
    sa, sb = np.sqrt(np.maximum(ta, 0.0)), np.sqrt(np.maximum(tb, 0.0))
    span = _hellinger_scale(n, d0, b) - _hellinger_scale(n, d0, a)
    best = np.maximum(((sa + sb + span) / 2.0) ** 2, np.maximum(ta, tb))
    # The curvature bound. P'' = Σ_R f·(s² + s') with s = Σ_i u_i the score of a cell, a sum
    # over the n trials, and s' = −Σ_i u_i², so s² + s' = Σ_{i≠j} u_i·u_j, a degenerate
    # U-statistic with E[(s² + s')²] = 2n(n − 1)·E[u²]² ≤ 2·I². By Cauchy–Schwarz on R,
    # |P''| ≤ √(2·P)·I: with P at most the Lipschitz bound above and I (convex) at most its
    # value at an end, P is below the chord plus M·(ψ − a)(b − ψ)/2.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        info = n * np.maximum(
            1.0 / (2.0 * (a - d0)) + 1.0 / (2.0 * (a + d0)) + 1.0 / (1.0 - a),
            1.0 / (2.0 * (b - d0)) + 1.0 / (2.0 * (b + d0)) + 1.0 / (1.0 - b),
        )
        curve, width = np.sqrt(2.0 * best) * info, b - a
        at = np.clip(width / 2.0 + (tb - ta) / (curve * width), 0.0, width)
        chord = ta + (tb - ta) * at / width + curve * at * (width - at) / 2.0
    chord = np.where(
        np.isfinite(chord) & (width > 0.0), np.maximum(chord, np.maximum(ta, tb)), np.inf
    )
    best = np.minimum(best, chord)
    cells_a, cells_b = _cells(a, d0), _cells(b, d0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for ref, other, t_ref in ((cells_a, cells_b, ta), (cells_b, cells_a, tb)):
            # A cell with no probability at the reference end but some at the other: S = ∞.
            usable = np.all((ref > 0.0) | (other <= 0.0), axis=1)
            log_t = np.log(np.maximum(t_ref, 0.0) + _TAIL_SLACK)
            for p in (2.0, 8.0, 64.0):
                terms = np.where(
                    other > 0.0, other**p * np.where(ref > 0.0, ref, 1.0) ** (1 - p), 0.0
                )
                log_s = np.log(np.sum(terms, axis=1))
                bound = np.exp((1.0 - 1.0 / p) * log_t + (n / p) * log_s)
                best = np.where(usable & np.isfinite(bound), np.minimum(best, bound), best)
    return np.minimum(best, 1.0)  # a probability


def _grid_tail(z_obs: float, n: int, d0: float, above: float | None = None) -> float:
    """The grid's maximum of the tail probability: a value the tail reaches (so a lower bound
    on the supremum, within a few % of it), cheap. It steers the searches for the bounds;
    every decision they return is checked against :func:`_sup_tail`.

    ``above``: only whether that maximum exceeds it is wanted (a search that compares it with a
    level): the first grid value found above it is returned, without the rest of the grid
    (at 10^6 items most of the rows: the grid runs from the corner ψ = |d0|, where a tail
    above the level usually is). The comparison with ``above`` is the maximum's."""
    return _sup_tail(z_obs, n, d0, grid_only=True, above=above)


def _sup_tail(
    z_obs: float,
    n: int,
    d0: float,
    decide: float | None = None,
    *,
    grid_only: bool = False,
    above: float | None = None,
    atol: float = _SUP_ATOL,
    rtol: float = _SUP_RTOL,
) -> float:
    """Supremum over ψ ∈ [|d0|, 1] of the tail probability, from above.

    A grid, refined near its best point, gives values of the tail; then every interval
    between two evaluated points is bounded from above (:func:`_interval_bounds`), and those
    whose bound exceeds the best value found by more than ``_SUP_RTOL`` relative (and
    ``_SUP_ATOL``) are halved, their midpoints evaluated, until none is left (branch and
    bound). The result is the largest bound over the intervals: never below the true
    supremum (up to the windows' e^−39), above it by at most that tolerance (``atol``: its
    absolute part; ``rtol``: its relative part).

    ``decide``: only whether the supremum is at most ``decide`` is wanted (a test at that
    level), which takes far fewer intervals. A result ≤ ``decide`` is then an upper bound on
    the supremum (the test rejects); a result above it is a value the tail reaches, or an
    upper bound within the tolerance of one (it does not reject): the decision is never
    less conservative than the exact supremum's, and the value can still steer a search.

    ``grid_only``: the grid's maximum, not bounded (:func:`_grid_tail`, with its ``above``).
    """
    low = abs(d0)
    if low >= 1.0:
        return float(_tail(z_obs, n, d0, np.array([1.0]))[0])
    # b*(m) does not depend on ψ: kept across the branch and bound's many points.
    edges = None if grid_only else _Edges(z_obs, n, d0)
    u = np.linspace(0.0, 1.0, _PSI_POINTS)
    grid = low + (1.0 - low) * u * u
    if grid_only:  # the grid's maximum (its first value above ``above``, where one is given)
        values = _tail(z_obs, n, d0, grid, None, above)
        found = float(values.max())
        if above is None or found <= above:
            best = int(np.argmax(values))
            near = np.linspace(
                grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)], _REFINE_POINTS
            )
            found = float(np.concatenate([values, _tail(z_obs, n, d0, near, None, above)]).max())
        return float(min(1.0, found))
    values = _tail(z_obs, n, d0, grid, edges)
    best = int(np.argmax(values))
    near = np.linspace(grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)], _REFINE_POINTS)
    psi = np.concatenate([grid, near])
    values = np.concatenate([values, _tail(z_obs, n, d0, near, edges)])
    order = np.argsort(psi, kind="stable")
    psi, values = psi[order], values[order]
    found = float(values.max())
    a, b, ta, tb = psi[:-1], psi[1:], values[:-1], values[1:]
    settled = 0.0
    for _ in range(_SUP_LEVELS):
        if decide is not None and found > decide:
            return found  # the tail reaches above the level: the test does not reject
        bound = _interval_bounds(n, d0, a, b, ta, tb)
        enough = found * (1.0 + rtol) + atol
        if decide is not None:
            enough = max(enough, decide)
        open_ = (bound > enough) & (b - a > 1e-15)
        settled = max(settled, float(bound[~open_].max(initial=0.0)))
        if not open_.any():
            return float(min(1.0, max(found, settled)))
        a, b, ta, tb = a[open_], b[open_], ta[open_], tb[open_]
        mid = (a + b) / 2.0
        tm = _tail(z_obs, n, d0, mid, edges)
        found = max(found, float(tm.max()))
        a, b = np.concatenate([a, mid]), np.concatenate([mid, b])
        ta, tb = np.concatenate([ta, tm]), np.concatenate([tm, tb])
    # Not settled in _SUP_LEVELS halvings (never seen): the bounds still hold, only looser.
    bound = _interval_bounds(n, d0, a, b, ta, tb)
    return float(min(1.0, max(found, settled, float(bound.max(initial=0.0)))))


def p_greater(
    b: int,
    c: int,
    n: int,
    d0: float,
    decide: float | None = None,
    *,
    atol: float = _SUP_ATOL,
    rtol: float = _SUP_RTOL,
) -> float:
    """Exact unconditional p-value of H0: Δ ≤ d0 against H1: Δ > d0 (``decide``: only
    whether it is at most that level, see :func:`_sup_tail`; ``atol`` and ``rtol``: how far
    above the supremum the value may be)."""
    z_obs = float(score_z(np.array(b), np.array(c), n, d0))
    return _sup_tail(z_obs, n, d0, decide, atol=atol, rtol=rtol)


def p_less(b: int, c: int, n: int, d0: float, decide: float | None = None) -> float:
    """Exact unconditional p-value of H0: Δ ≥ d0 against H1: Δ < d0 (b and c swapped)."""
    return p_greater(c, b, n, -d0, decide)


__all__ = ["p_greater", "p_less", "score_z"]
