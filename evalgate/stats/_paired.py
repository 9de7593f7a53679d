"""The paired PR-vs-base comparison and its three-valued verdict.

One method per kind of data, and the bounds shown are the inversion of the test that decides, so
PASS ⇔ lower bound > −margin and FAIL ⇔ upper bound < 0 hold by construction:

* binary scores (k = 1), no groups: the exact unconditional score test (:mod:`._exact`);
* fractional or graded scores: non-inferiority by the betting confidence bound (valid for any
  bounded data, see :mod:`._betting`), regression by a sign-flip permutation test on the
  per-item differences, inverted exactly (a step function of the shift, see :func:`_sign_flip`);
* grouped items: the test on the items AND the sign-flip on group sums (both must reject, so a
  ``group`` column can only make the gate stricter); with fewer than ``MIN_GROUPS`` groups the
  non-inferiority side uses Hoeffding's distribution-free bound instead of the sign-flip, and
  ``note`` says so;
* differences without any variance are never evidence: group differences without variance get
  Hoeffding's bound; the exact and betting tests on items need no such rule.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike

from evalgate.stats._betting import betting_lower
from evalgate.stats._common import (
    _as_pair,
    _check_alpha,
    _cluster_codes,
    _clustered_se,
    _is_binary,
    _plain_se,
    _scipy_stats,
)
from evalgate.stats._exact import exact_paired

PASS: Final = "PASS"
FAIL: Final = "FAIL"
INCONCLUSIVE: Final = "INCONCLUSIVE"

# Sign-flip matrices are built in chunks of about this many entries (8 MiB of float64), so
# 10,000 resamples x 500 items never materialise a 40 MB matrix at once.
_CHUNK_ENTRIES = 1 << 20

# The sign-flip test of non-inferiority assumes the group differences shifted by the margin are
# symmetric about 0; a regression concentrated in a few groups breaks that, and with few groups
# nothing makes up for it (with 5 groups the smallest p is 1/32 whatever the data). Below this
# many groups the PASS side uses Hoeffding's bound (valid for any bounded data, and honestly
# wide); the FAIL side keeps the sign-flip, exact under the null that the PR changes nothing
# (base and PR labels exchangeable within each group).
MIN_GROUPS = 20


@dataclass(frozen=True)
class PairedResult:
    """PR (head) vs base on the same items; Δ = head − base."""

    n: int
    base_mean: float
    head_mean: float
    delta: float
    se: float  # standard error of Δ (clustered when clusters were given), for display
    lo: float  # one-sided (1 − level) lower bound on Δ: the inverted non-inferiority test
    hi: float  # one-sided (1 − level) upper bound on Δ: the inverted regression test
    p_regression: float  # H0: Δ ≥ 0 vs H1: Δ < 0
    p_noninferiority: float  # H0: Δ ≤ −margin vs H1: Δ > −margin
    method: str  # "exact-unconditional" | "betting / sign-flip-permutation" | "cluster-..."
    discordant: tuple[int, int] | None  # (b, c) = (base 1 & head 0, base 0 & head 1) if binary
    margin: float
    alpha: float
    n_clusters: int | None = None
    n_resamples: int = 0  # sign-flip patterns used; 0 for the exact binary test
    exact: bool = True  # False when the p-values are Monte-Carlo estimates
    level: float | None = None  # level of lo / hi when not alpha (a sequential look's nominal α)
    note: str = ""  # why a bound comes from a wider method (few groups, no variance)


def _mcnemar_p(b: ArrayLike, c: ArrayLike) -> np.ndarray:
    """Exact one-sided conditional McNemar p = P(X ≥ b), X ~ Binomial(b + c, 1/2); 1 if b + c = 0.

    For reference (the design notes' worked example); the gate runs the unconditional test.
    """
    b_arr = np.asarray(b, dtype=float)
    n_disc = b_arr + np.asarray(c, dtype=float)
    p = _scipy_stats().binom.sf(b_arr - 1.0, np.maximum(n_disc, 1.0), 0.5)
    return np.where(n_disc > 0, np.minimum(p, 1.0), 1.0)


def _binary_delta_se(b: ArrayLike, c: ArrayLike, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Δ and its Wald SE sqrt(((b + c)/n − Δ²)/n) for paired binary data (display only)."""
    b_arr = np.asarray(b, dtype=float)
    c_arr = np.asarray(c, dtype=float)
    delta = (c_arr - b_arr) / n
    var = np.maximum((b_arr + c_arr) * n - (c_arr - b_arr) ** 2, 0.0) / float(n) ** 3
    return delta, np.sqrt(var)


@dataclass(frozen=True)
class _Bounds:
    lo: float
    hi: float
    p_ni: float
    p_reg: float
    used: int = 0
    exact: bool = True


def _flip_ratios(
    sums: np.ndarray, sizes: np.ndarray, n_resamples: int, seed: int
) -> tuple[np.ndarray, int, int, int, bool]:
    """Σ_F s / Σ_F m over the sign patterns F (F = the flipped units), sorted.

    Returns (ratios of the non-empty patterns, empty patterns, patterns, +1 if Monte-Carlo,
    exact). Every pattern is enumerated when there are at most ``n_resamples`` of them.
    """
    n_units = sums.size
    both = np.column_stack([sums, sizes])
    rows = max(1, _CHUNK_ENTRIES // max(n_units, 1))
    parts = []
    if n_units < 62 and (1 << n_units) <= n_resamples:
        total, shifts = 1 << n_units, np.arange(n_units, dtype=np.int64)
        for start in range(0, total, rows):
            patterns = np.arange(start, min(total, start + rows), dtype=np.int64)
            parts.append(((patterns[:, None] >> shifts) & 1).astype(float) @ both)
        exact, extra = True, 0
    else:
        rng = np.random.default_rng(seed)
        total = n_resamples
        for start in range(0, n_resamples, rows):
            size = min(rows, n_resamples - start)
            parts.append(rng.integers(0, 2, size=(size, n_units)).astype(float) @ both)
        exact, extra = False, 1
    flipped = np.concatenate(parts)
    nonempty = flipped[:, 1] > 0
    ratios = np.sort(flipped[nonempty, 0] / flipped[nonempty, 1])
    return ratios, int(np.sum(~nonempty)), total, extra, exact


def _sign_flip(
    sums: np.ndarray, sizes: np.ndarray, margin: float, alpha: float, n_resamples: int, seed: int
) -> _Bounds:
    """Sign-flip tests of H0: Δ ≤ Δ0 and H0: Δ ≥ Δ0 on the unit values s_u − Δ0·m_u, inverted.

    Flipping the units in F moves the sum by −2·Σ_F (s_u − Δ0·m_u), so a pattern counts against
    H0: Δ ≤ Δ0 iff r_F = Σ_F s / Σ_F m ≤ Δ0: the p-value is a step function of Δ0 with steps at
    the r_F, and the bounds are order statistics of them (Fisher 1935; Good 2005, ch. 3). Exact
    when every pattern is enumerated, else Monte-Carlo with p = (count + 1)/(R + 1) (Phipson &
    Smyth 2010). The same patterns serve every Δ0, so p is monotone in Δ0.
    """
    ratios, empty, total, extra, exact = _flip_ratios(sums, sizes, n_resamples, seed)
    tol = 1e-9 * (1.0 + float(np.max(np.abs(ratios)))) if ratios.size else 1e-9

    def p_le(d0: float) -> float:  # H0: Δ ≤ d0
        count = empty + int(np.searchsorted(ratios, d0 + tol, side="right"))
        return (count + extra) / (total + extra)

    def p_ge(d0: float) -> float:  # H0: Δ ≥ d0
        count = empty + ratios.size - int(np.searchsorted(ratios, d0 - tol, side="left"))
        return (count + extra) / (total + extra)

    # p > alpha ⇔ count ≥ need: a bound is where the count of ratios first reaches need.
    need = math.floor(alpha * (total + extra) - extra) + 1 - empty
    if need <= 0 or need > ratios.size:
        lo, hi = -math.inf, math.inf
    else:
        lo, hi = float(ratios[need - 1]) - tol, float(ratios[ratios.size - need]) + tol
    return _Bounds(lo, hi, p_le(-margin), p_ge(0.0), total, exact)


def _hoeffding(
    sums: np.ndarray, sizes: np.ndarray, margin: float, alpha: float, width: float
) -> _Bounds:
    """Hoeffding (1963) bounds on the size-weighted mean of independent unit means in
    [−width, width]: valid for any distribution, however few units and whatever the skew.

    P(Δ̂ − Δ ≥ t) ≤ exp(−t² / (2·width²·Σ w_u²)), w_u = m_u / n.
    """
    weights = sizes / sizes.sum()
    scale = 2.0 * width * width * float(np.sum(weights**2))
    delta = float(sums.sum() / sizes.sum())
    half = math.sqrt(scale * math.log(1.0 / alpha))
    p_ni = math.exp(-((delta + margin) ** 2) / scale) if delta + margin > 0 else 1.0
    p_reg = math.exp(-(delta**2) / scale) if delta < 0 else 1.0
    return _Bounds(delta - half, delta + half, p_ni, p_reg)


def _item_bounds(
    b: np.ndarray,
    h: np.ndarray,
    margin: float,
    alpha: float,
    resamples: tuple[int, int],
    width: float,
) -> tuple[_Bounds, str, str]:
    """The test on items: exact unconditional (binary) or sign-flip; (bounds, method, note)."""
    n = b.size
    if _is_binary(b) and _is_binary(h):
        n_b, n_c = int(np.sum((b == 1.0) & (h == 0.0))), int(np.sum((b == 0.0) & (h == 1.0)))
        lo, hi, p_ni, p_reg = exact_paired(n_b, n_c, n, float(margin), float(alpha))
        return _Bounds(lo, hi, p_ni, p_reg), "exact-unconditional", ""
    d = h - b
    # Non-inferiority: the betting bound, valid for any bounded data (a few broken items make d
    # skewed, and the sign-flip's symmetry fails there). Regression: the sign-flip, exact when
    # the PR changes nothing (base and PR exchangeable within each item).
    flip = _sign_flip(d, np.ones(n), margin, alpha, *resamples)
    lo, p_ni = betting_lower(d, -width, width, -margin, alpha, resamples[1])
    found = _Bounds(lo, flip.hi, p_ni, flip.p_reg, flip.used, flip.exact)
    return found, "betting / sign-flip-permutation", ""


def _group_bounds(
    d: np.ndarray,
    codes: np.ndarray,
    n_units: int,
    margin: float,
    alpha: float,
    resamples: tuple[int, int],
    width: float,
) -> tuple[_Bounds, str]:
    """The test on groups: sign-flip on group sums; Hoeffding's bound where that cannot hold."""
    sums = np.bincount(codes, weights=d, minlength=n_units)
    sizes = np.bincount(codes, minlength=n_units).astype(float)
    flip = _sign_flip(sums, sizes, margin, alpha, *resamples)
    if n_units >= MIN_GROUPS and np.ptp(sums / sizes) > 0.0:
        return flip, ""
    hoeff = _hoeffding(sums, sizes, margin, alpha, width)
    why = (
        f"too few groups ({n_units} < {MIN_GROUPS}) to decide non-inferiority at α = {alpha:g}"
        if n_units < MIN_GROUPS
        else "every group differs by the same amount (no variance)"
    )
    note = f"{why}: Hoeffding lower bound; regression tested by sign-flip over groups"
    return _Bounds(hoeff.lo, flip.hi, hoeff.p_ni, flip.p_reg, flip.used, flip.exact), note


def paired_compare(
    base: ArrayLike,
    head: ArrayLike,
    *,
    clusters: Sequence[Hashable] | ArrayLike | None = None,
    margin: float = 0.03,
    alpha: float = 0.05,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> PairedResult:
    """Compare aligned per-item scores (same items, same order) of base and head.

    ``lo`` / ``hi`` are the one-sided (1 − alpha) bounds from inverting the tests whose p-values
    are ``p_noninferiority`` / ``p_regression`` (the module docstring lists the method for each
    kind of data), so :func:`verdict` agrees with the bounds. Raises ValueError on a length
    mismatch, on no items, or on non-finite scores.
    """
    _check_alpha(alpha)
    if not (math.isfinite(margin) and margin >= 0.0):
        raise ValueError(f"margin must be a finite number ≥ 0, got {margin!r}")
    n_resamples = operator.index(n_resamples)
    if n_resamples < 1:
        raise ValueError("n_resamples must be ≥ 1")
    b, h = _as_pair(base, head)
    n = int(b.size)
    if n == 0:
        raise ValueError("no items to compare")
    d = h - b
    discordant = None
    if _is_binary(b) and _is_binary(h):
        discordant = (int(np.sum((b == 1.0) & (h == 0.0))), int(np.sum((b == 0.0) & (h == 1.0))))
    # Scores on [low, high] (usually [0, 1]) have differences in ±(high − low).
    width = max(1.0, float(b.max()), float(h.max())) - min(0.0, float(b.min()), float(h.min()))
    resamples = (n_resamples, seed)
    found, method, note = _item_bounds(b, h, margin, alpha, resamples, width)
    n_clusters = None
    if clusters is not None:
        codes, n_clusters = _cluster_codes(clusters, n)
        group, note = _group_bounds(d, codes, n_clusters, margin, alpha, resamples, width)
        # Both tests must reject (an intersection of rejection regions): the bounds are the hull.
        found = _Bounds(
            min(found.lo, group.lo),
            max(found.hi, group.hi),
            max(found.p_ni, group.p_ni),
            max(found.p_reg, group.p_reg),
            group.used,
            group.exact and found.exact,
        )
        method = "cluster-sign-flip-permutation"
        se = _clustered_se(d, codes, n_clusters)
    elif discordant is not None:
        se = float(_binary_delta_se(*discordant, n)[1])
    else:
        se = _plain_se(d)
    return PairedResult(
        n=n,
        base_mean=float(b.mean()),
        head_mean=float(h.mean()),
        delta=float(d.mean()),
        se=se,
        lo=max(found.lo, -width),
        hi=min(found.hi, width),
        p_regression=float(found.p_reg),
        p_noninferiority=float(found.p_ni),
        method=method,
        discordant=discordant,
        margin=float(margin),
        alpha=float(alpha),
        n_clusters=n_clusters,
        n_resamples=found.used,
        exact=found.exact,
        note=note,
    )


def verdict(
    result: PairedResult, *, margin: float | None = None, alpha: float | None = None
) -> Literal["PASS", "FAIL", "INCONCLUSIVE"]:
    """PASS if non-inferior, else FAIL if a significant regression, else INCONCLUSIVE.

    Decided on the p-values (PASS: p_noninferiority ≤ alpha; FAIL: p_regression ≤ alpha), which
    is exactly "lo > −margin" / "hi < 0" at the level the bounds were computed at, because the
    bounds are the inversion of these tests. ``margin`` / ``alpha`` default to those of the
    result; a different margin is an error because p_noninferiority depends on it.
    """
    if margin is not None and not math.isclose(margin, result.margin, abs_tol=1e-12):
        raise ValueError(
            f"result was computed with margin {result.margin}, not {margin}; "
            "call paired_compare with the margin you gate on"
        )
    level = result.alpha if alpha is None else alpha
    _check_alpha(level)
    if result.p_noninferiority <= level:
        return PASS
    if result.p_regression <= level:
        return FAIL
    return INCONCLUSIVE
