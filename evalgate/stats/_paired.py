"""The paired PR-vs-base comparison and its three-valued verdict.

One method per kind of data, and the bounds shown are the inversion of the test that decides, so
PASS ⇔ lower bound > −margin and FAIL ⇔ upper bound < 0 hold by construction:

* binary scores (k = 1), no groups: the exact unconditional score test (:mod:`._exact`);
* fractional or graded scores: non-inferiority by the betting confidence bound (valid for any
  bounded data, see :mod:`._betting`), regression by a sign-flip permutation test on the
  per-item differences, inverted exactly (a step function of the shift, see :func:`_sign_flip`);
* grouped items: the test on the items AND the test on groups (both must reject, so a
  ``group`` column can only make the gate stricter). Over groups, non-inferiority is the betting
  bound on the groups' differences (:func:`._betting.betting_lower_groups`: groups are the
  independent units, valid for any number of groups and any pattern of change inside them) and
  regression the sign-flip on group sums;
* differences without any variance are never evidence: the exact and betting tests need no
  special rule for them (a betting bound on identical differences is as wide as n allows).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike

from evalgate.stats._betting import betting_lower, betting_lower_groups
from evalgate.stats._coherent import coherent
from evalgate.stats._common import (
    _as_pair,
    _check_alpha,
    _cluster_codes,
    _clustered_se,
    _is_binary,
    _plain_se,
    _scipy_stats,
)
from evalgate.stats._design import Design
from evalgate.stats._exact_interval import exact_paired

PASS: Final = "PASS"
FAIL: Final = "FAIL"
INCONCLUSIVE: Final = "INCONCLUSIVE"

# Sign-flip matrices are built in chunks of about this many entries (8 MiB of float64), so
# 10,000 resamples x 500 items never materialise a 40 MB matrix at once.
_CHUNK_ENTRIES = 1 << 20
# Up to this many (resample, unit) entries Monte-Carlo patterns are a dense 0/1 matrix (the
# calibrated sizes, n ≤ 500, keep their seeded patterns); above, random bytes and table look-ups.
_DENSE_ENTRIES = 1 << 24

# The sign-flip test of non-inferiority assumes the group differences shifted by the margin are
# symmetric about 0; a PR that breaks a few whole groups breaks that (false PASS 0.19 with 20
# groups), so the PASS side over groups is the betting bound, valid for any number of groups.
# Below this many groups it can rarely reject, and the note says why the bound is wide.
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
    # Level of hi (and lo) when not alpha: a sequential look's nominal α. A look's betting lo
    # with a horizon stays at alpha (one capital process over the looks; the note says so).
    level: float | None = None
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


def _byte_tables(both: np.ndarray, bits: int) -> tuple[np.ndarray, int]:
    """(tables, blocks): for each block of ``bits`` consecutive units, the (Σ s, Σ m) of every
    subset of the block (2^bits of them), so a random pattern's sums are one table look-up per
    block instead of one multiply-add per unit."""
    n_units = both.shape[0]
    blocks = -(-n_units // bits)
    padded = np.zeros((blocks * bits, 2))
    padded[:n_units] = both
    subsets = ((np.arange(1 << bits)[:, None] >> np.arange(bits)[None, :]) & 1).astype(float)
    tables = np.einsum("kb,jbc->jkc", subsets, padded.reshape(blocks, bits, 2))
    return tables.reshape(blocks * (1 << bits), 2), blocks


def _pattern_sums(codes: np.ndarray, tables: np.ndarray, bits: int) -> np.ndarray:
    """(Σ_F s, Σ_F m) of the patterns whose block subsets are ``codes`` (rows x blocks), bit j
    of block b's code flipping unit bits·b + j."""
    offsets = (np.arange(codes.shape[1], dtype=np.intp) << bits)[None, :]
    flat = codes.astype(np.intp) + offsets
    return np.column_stack([tables[flat, 0].sum(axis=1), tables[flat, 1].sum(axis=1)])


def _flip_ratios(
    sums: np.ndarray, sizes: np.ndarray, n_resamples: int, seed: int
) -> tuple[np.ndarray, int, int, int, bool]:
    """Σ_F s / Σ_F m over the sign patterns F (F = the flipped units), sorted.

    Returns (ratios of the non-empty patterns, empty patterns, patterns, +1 if Monte-Carlo,
    exact). Every pattern is enumerated when there are at most ``n_resamples`` of them.
    Monte-Carlo patterns flip each unit with probability 1/2; with many units they are drawn
    as random bytes and summed by table look-up per 8 units (4 above 2^17 units, to keep the
    tables small), ~8x less work than a multiply-add per unit and no float matrix of patterns.
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
    elif n_units * n_resamples <= _DENSE_ENTRIES:
        rng = np.random.default_rng(seed)
        total = n_resamples
        for start in range(0, n_resamples, rows):
            size = min(rows, n_resamples - start)
            parts.append(rng.integers(0, 2, size=(size, n_units)).astype(float) @ both)
        exact, extra = False, 1
    else:
        rng = np.random.default_rng(seed)
        bits = 8 if n_units <= 1 << 17 else 4
        tables, blocks = _byte_tables(both, bits)
        total, rows = n_resamples, max(1, _CHUNK_ENTRIES // (2 * blocks))
        for start in range(0, n_resamples, rows):
            size = min(rows, n_resamples - start)
            codes = rng.integers(0, 1 << bits, size=(size, blocks), dtype=np.uint8)
            parts.append(_pattern_sums(codes, tables, bits))
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


@dataclass(frozen=True)
class _Reading:
    """How one comparison reads the design's tests: a fixed design's, or one look's.

    ``level``: the level of the tests (the design's α, or a look's nominal α); ``pass_alpha``:
    the level of the betting (PASS) bound on items when not ``level`` (a sequential look: the
    FAIL side at the look's level, the PASS side one capital process at the full α, see
    :func:`evalgate.stats.sequential_compare`); ``group_pass_alpha``: the same for the betting
    bound over groups. ``adjust`` maps a non-inferiority p-value of a test run at ``level`` (not
    at a ``pass_alpha``) onto the scale of the result's α (a look's repeated p-value) before the
    item and group tests' are combined. ``fixed_n``: a fixed design, read once, at its end
    (without a horizon, or with a horizon of all the items given, the betting bound's bets track
    the capital, :mod:`._betting`); a sequential look's bounds are not.
    """

    level: float
    pass_alpha: float | None = None
    group_pass_alpha: float | None = None
    adjust: Callable[[float], float] | None = None
    fixed_n: bool = False


def _item_bounds(
    b: np.ndarray, h: np.ndarray, design: Design, reading: _Reading, width: float
) -> tuple[_Bounds, str]:
    """The test on items: exact unconditional (binary) or sign-flip; (bounds, method)."""
    n, margin, alpha = b.size, design.margin, reading.level
    if _is_binary(b) and _is_binary(h):
        n_b, n_c = int(np.sum((b == 1.0) & (h == 0.0))), int(np.sum((b == 0.0) & (h == 1.0)))
        lo, hi, p_ni, p_reg = exact_paired(n_b, n_c, n, float(margin), float(alpha))
        return _Bounds(lo, hi, p_ni, p_reg), "exact-unconditional"
    d = h - b
    # Non-inferiority: the betting bound, valid for any bounded data (a few broken items make d
    # skewed, and the sign-flip's symmetry fails there). Regression: the sign-flip, exact when
    # the PR changes nothing (base and PR exchangeable within each item).
    flip = _sign_flip(d, np.ones(n), margin, alpha, design.n_resamples, design.seed)
    level = alpha if reading.pass_alpha is None else reading.pass_alpha
    # Bets aimed at n need the process read once, at its end: no horizon, or all of it (a fixed
    # run's items in its keyed order); a sequential look reads a prefix.
    horizon = design.horizon
    at_end = reading.fixed_n and (horizon is None or horizon == n)
    lo, p_ni = betting_lower(d, -width, width, -margin, level, design.seed, horizon, fixed_n=at_end)
    found = _Bounds(lo, flip.hi, p_ni, flip.p_reg, flip.used, flip.exact)
    return found, "betting / sign-flip-permutation"


def _group_bounds(
    d: np.ndarray,
    codes: np.ndarray,
    n_units: int,
    design: Design,
    reading: _Reading,
    width: float,
) -> tuple[_Bounds, str]:
    """The test on groups: non-inferiority by the betting bound over groups (valid for any
    number of groups and any pattern of change inside them), regression by the sign-flip on
    group sums (exact when the PR changes nothing); (bounds, note).

    With a horizon the groups are in the run's order (codes by first appearance) and the bound
    is one capital process over the design's planned groups (at least those given), scaled by
    its planned largest group, read here at a prefix of complete groups
    (:func:`._betting.betting_lower_groups`)."""
    margin, alpha = design.margin, reading.level
    sums = np.bincount(codes, weights=d, minlength=n_units)
    sizes = np.bincount(codes, minlength=n_units).astype(float)
    flip = _sign_flip(sums, sizes, margin, alpha, design.n_resamples, design.seed)
    level = alpha if reading.group_pass_alpha is None else reading.group_pass_alpha
    horizon, size = None, None
    if design.horizon is not None:  # whole groups in the run's order: one process over groups
        horizon, size = max(design.groups_total or 0, n_units), design.group_size
    lo, p_ni = betting_lower_groups(
        sums, sizes, width, -margin, level, design.seed, horizon, size,
        fixed_n=reading.fixed_n and (horizon is None or horizon == n_units),
    )  # fmt: skip
    note = ""
    if n_units < MIN_GROUPS and p_ni > level:
        note = (
            f"few groups ({n_units} < {MIN_GROUPS}): the non-inferiority bound over groups is wide"
        )
    return _Bounds(lo, flip.hi, p_ni, flip.p_reg, flip.used, flip.exact), note


# The gate's defaults: α = .05, δ = 3 pp, scores in [0, 1], a seeded random order.
_FIXED = Design()


def paired_compare(
    base: ArrayLike,
    head: ArrayLike,
    design: Design = _FIXED,
    *,
    clusters: Sequence[Hashable] | ArrayLike | None = None,
) -> PairedResult:
    """Compare aligned per-item scores (same items, same order) of base and head under
    ``design`` (a fixed design: one look; its ``bounds``, ``horizon`` and group plan as
    :class:`~evalgate.stats.Design` says).

    With ``clusters`` and a horizon the items must be whole groups, contiguous
    (:func:`evalgate.stats.item_order` with groups), and the betting bound over groups bets on
    them in their order of first appearance, tuned to the design's ``groups_total`` planned
    groups (default: the groups given) and scaled by its ``group_size``, the largest planned
    group (default: the largest given).

    ``lo`` / ``hi`` are the one-sided (1 − alpha) bounds from inverting the tests whose p-values
    are ``p_noninferiority`` / ``p_regression`` (the module docstring lists the method for each
    kind of data), so :func:`verdict` agrees with the bounds. Raises ValueError on a length
    mismatch, on no items, on non-finite scores, and on a design of more than one look (read
    it with :func:`evalgate.stats.sequential_compare`).
    """
    if design.looks != 1:
        raise ValueError(
            f"a design of {design.looks} looks is read look by look: use sequential_compare"
        )
    return _compare(base, head, clusters, design, _Reading(design.alpha, fixed_n=True))


def _checked_pair(
    base: ArrayLike, head: ArrayLike, design: Design
) -> tuple[np.ndarray, np.ndarray]:
    """(base, head) as float arrays, checked: same length, at least one item, within the
    design's horizon."""
    b, h = _as_pair(base, head)
    n = int(b.size)
    if n == 0:
        raise ValueError("no items to compare")
    if design.horizon is not None and design.horizon < n:
        raise ValueError(f"horizon ({design.horizon}) is below the number of items ({n})")
    return b, h


def _discordant(b: np.ndarray, h: np.ndarray) -> tuple[int, int] | None:
    """(b, c) = (base 1 & head 0, base 0 & head 1) for 0/1 scores; None for others."""
    if _is_binary(b) and _is_binary(h):
        return int(np.sum((b == 1.0) & (h == 0.0))), int(np.sum((b == 0.0) & (h == 1.0)))
    return None


def _width(b: np.ndarray, h: np.ndarray, bounds: tuple[float, float] | None) -> float:
    """The range of the differences: scores on [low, high] (usually [0, 1]), widened to hold
    the scores given, have differences in ±(high − low)."""
    low, high = bounds if bounds is not None else (0.0, 1.0)
    width = max(high, float(b.max()), float(h.max())) - min(low, float(b.min()), float(h.min()))
    return width if width > 0.0 else 1.0


def _hull(found: _Bounds, group: _Bounds) -> _Bounds:
    """Both tests must reject (an intersection of rejection regions): the bounds are the hull."""
    return _Bounds(
        min(found.lo, group.lo),
        max(found.hi, group.hi),
        max(found.p_ni, group.p_ni),
        max(found.p_reg, group.p_reg),
        group.used,
        group.exact and found.exact,
    )


def _compare(
    base: ArrayLike,
    head: ArrayLike,
    clusters: Sequence[Hashable] | ArrayLike | None,
    design: Design,
    reading: _Reading,
) -> PairedResult:
    """:func:`paired_compare`, read as ``reading`` says (a fixed design, or one look)."""
    _check_alpha(reading.level)
    b, h = _checked_pair(base, head, design)
    n, d = int(b.size), h - b
    discordant = _discordant(b, h)
    width = _width(b, h, design.bounds)
    found, method = _item_bounds(b, h, design, reading, width)
    note, adjust = "", reading.adjust
    if adjust is not None and (reading.pass_alpha is None or discordant is not None):
        found = dataclasses.replace(found, p_ni=adjust(found.p_ni))
    n_clusters = None
    if clusters is not None:
        codes, n_clusters = _cluster_codes(clusters, n)
        group, note = _group_bounds(d, codes, n_clusters, design, reading, width)
        if adjust is not None and reading.group_pass_alpha is None:
            group = dataclasses.replace(group, p_ni=adjust(group.p_ni))
        found, method = _hull(found, group), "cluster-sign-flip-permutation"
        se = _clustered_se(d, codes, n_clusters)
    elif discordant is not None:
        se = float(_binary_delta_se(*discordant, n)[1])
    else:
        se = _plain_se(d)
    # The row holds its own estimate, and so does the verdict (L ≤ Δ̂ ≤ U: ._coherent).
    margin = float(design.margin)
    lo, hi, p_ni, p_reg = coherent(
        float(d.mean()), max(found.lo, -width), min(found.hi, width),
        float(found.p_ni), float(found.p_reg), margin,
    )  # fmt: skip
    return PairedResult(
        n=n,
        base_mean=float(b.mean()),
        head_mean=float(h.mean()),
        delta=float(d.mean()),
        se=se,
        lo=lo,
        hi=hi,
        p_regression=p_reg,
        p_noninferiority=p_ni,
        method=method,
        discordant=discordant,
        margin=margin,
        alpha=float(reading.level),
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
