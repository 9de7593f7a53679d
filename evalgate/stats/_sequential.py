"""Group-sequential (Wang–Tsiatis) looks with repeated confidence intervals.

At look k of K the paired test of :func:`paired_compare` is run, unchanged, at the nominal level
α_k = 1 − Φ(b_k) of the design's boundary b_k; its inverted bounds are then repeated
confidence intervals (Jennison & Turnbull 1989, JRSS-B 51:305; 2000, ch. 9), which cover Δ at
every look simultaneously with probability ≥ 1 − α, so stopping at any look for PASS (L > −δ) or
FAIL (U < 0) keeps both error rates at α. The p-values are repeated p-values: the smallest
overall α at which the design's boundary would be crossed at this look, so "p ≤ α" is the same
decision as the bounds, and Holm across metrics applies to them directly.

Graded items, given the run's ``horizon``: the PASS side is not spent look by
look but is ONE betting capital process (:mod:`._betting`) over the items in the run's
data-independent order (:func:`evalgate.stats.item_order`), its bets tuned to the planned
number of items. A look's items are a prefix of that order, so each look reads the same
nonnegative supermartingale at a later time, and Ville's inequality bounds the chance that it
ever reaches 1/α by α: checking "lower bound > −margin" at the full α at every look keeps the
false-PASS rate ≤ α over all looks (re-betting each look at its nominal level could spend up to
the sum of the levels, 0.077 at 4 looks and α = .05). The FAIL side keeps its spending. With
groups (0/1 or graded items) the run goes whole group by whole group in a keyed order of the
groups, and the PASS side over groups is likewise one betting process over the complete groups
seen, tuned to the planned number of groups, read at full α at every look.

The boundary is Wang & Tsiatis (1987), b_k = c·(k/K)^(Δ − 1/2), with Δ = 0.25 (``SHAPE``),
between O'Brien–Fleming (Δ = 0: almost no early stopping, the full α at the end) and Pocock
(Δ = 1/2: a constant level). Why not O'Brien–Fleming: when a PR only breaks items (greedy
decoding, c = 0), the discordant count b grows like a Poisson count and the exact test's z like
√b, so O'Brien–Fleming's first two looks (levels 0.0003, 0.0071) almost never fire and a clear
regression ran 69–70 % of its items; at Δ = 0.25 the same runs stop at 59–64 % (exactly
computed, n = 50–500) and a normal shift at 2 × MDE at 40 % instead of 49 %, for a 2 % larger
MDE (bench/gate_calibration.py).

There is no curtailment: with exact tests, checking every outcome of the remaining items costs
more than it saves, and the looks already stop early when the effect is large.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import math
import operator
from collections.abc import Callable, Hashable, Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from evalgate.stats._common import _as_pair, _check_alpha, _is_binary, _scipy_stats
from evalgate.stats._design import Design
from evalgate.stats._exact_regions import noninferiority_edge, regression_edge
from evalgate.stats._paired import INCONCLUSIVE, PairedResult, _compare, _Reading, verdict

SHAPE = 0.25
"""The Wang–Tsiatis Δ of the gate's design (0: O'Brien–Fleming, 0.5: Pocock)."""


def _shape(looks: int, shape: float) -> list[float]:
    """b_k / c for k = 1..K: (k/K)^(Δ − 1/2)."""
    return [(k / looks) ** (shape - 0.5) for k in range(1, looks + 1)]


def _crossing_probability(
    c: float, looks: int, shape: float, step: float = 0.01, drift: float = 0.0
) -> float:
    """P(some look crosses) for the boundaries b_k = c·(k/K)^(Δ − 1/2), under H0 (``drift``
    0) or when the last look's z has mean ``drift``.

    On the partial-sum scale S_k = sqrt(k)·Z_k (independent N(μ, 1) increments for equally
    spaced information, μ = drift/sqrt(K)) the boundary is c·(k/K)^(Δ − 1/2)·sqrt(k); the
    sub-density of not-yet-crossed paths is propagated look by look by numerical convolution
    (Armitage, McPherson & Rowe 1969; Jennison & Turnbull 2000, ch. 19), trapezoid rule.
    """
    sps = _scipy_stats()
    mu = drift / math.sqrt(looks)
    tops = [c * f * math.sqrt(k) for k, f in enumerate(_shape(looks, shape), start=1)]
    # Paths more than 9 SD below every boundary can never come back in K − 1 looks (P < 1e-18).
    bottom = min(tops) - 9.0 * math.sqrt(looks) - max(mu, 0.0) * looks
    m = math.ceil((max(tops) - bottom) / step) + 1
    x = max(tops) - step * np.arange(m)[::-1]
    weights = np.full(m, step)
    weights[[0, -1]] = step / 2.0
    half = math.ceil(9.0 / step)
    kernel = sps.norm.pdf(step * np.arange(-half, half + 1) - mu)
    density = np.where(x < tops[0], sps.norm.pdf(x - mu), 0.0)
    crossed = float(sps.norm.sf(tops[0] - mu))
    for top in tops[1:]:
        mass = weights * density
        crossed += float(np.sum(mass * sps.norm.sf(top - x - mu)))
        density = np.where(x < top, np.convolve(mass, kernel)[half : half + m], 0.0)
    return crossed


@functools.lru_cache(maxsize=64)
def _bounds_cached(looks: int, alpha: float, shape: float) -> tuple[float, ...]:
    sps = _scipy_stats()
    z_final = float(sps.norm.isf(alpha))
    if looks == 1:
        return (z_final,)
    factors = _shape(looks, shape)
    # Bracket for c: the smallest boundary at z_{1−α} crosses with prob ≥ α on its own; every
    # boundary at z_{1−α/K} crosses with prob ≤ α (Bonferroni).
    from scipy import optimize  # lazy, like scipy.stats (see _scipy_stats)

    c = optimize.brentq(
        lambda cc: _crossing_probability(cc, looks, shape) - alpha,
        z_final / max(factors),
        float(sps.norm.isf(alpha / looks)) / min(factors) + 1e-6,
        xtol=1e-8,
    )
    return tuple(c * f for f in factors)


def wang_tsiatis_bounds(looks: int = 4, alpha: float = 0.05, shape: float = SHAPE) -> list[float]:
    """One-sided Wang & Tsiatis (1987) z boundaries c·(k/K)^(Δ − 1/2) at k/K of the items.

    c is solved so that the probability of crossing at any look under H0 equals alpha. Δ = 0
    is O'Brien–Fleming, Δ = 0.5 Pocock. For 4 looks at alpha = .05 and Δ = 0.25 this gives
    ≈ 2.59, 2.18, 1.97, 1.83.
    """
    _check_alpha(alpha)
    looks = operator.index(looks)
    if looks < 1:
        raise ValueError("looks must be ≥ 1")
    if not 0.0 <= shape <= 0.5:
        raise ValueError(f"shape must be in [0, 0.5], got {shape!r}")
    return list(_bounds_cached(looks, float(alpha), float(shape)))


def obrien_fleming_bounds(looks: int = 4, alpha: float = 0.05) -> list[float]:
    """One-sided O'Brien & Fleming (1979) z boundaries c·sqrt(K/k): Wang–Tsiatis with Δ = 0.

    For 4 looks at alpha = .05 this gives ≈ 3.47, 2.45, 2.00, 1.73.
    """
    return wang_tsiatis_bounds(looks, alpha, 0.0)


def look_sizes(n_total: int, looks: int, groups: Sequence[int] | None = None) -> list[int]:
    """Items seen at each of ``looks`` equally spaced looks (the last is n_total).

    ``groups``: the sizes of the run's groups in the order they run (whole groups, contiguous;
    they sum to n_total): each look then ends at the group end nearest its equal slice (the
    later on a tie), never before the previous look's, so every look sees complete groups only,
    which the betting process over groups needs (part of a group is not a draw of a group). A
    group larger than a slice can make two looks the same: the later one sees nothing new.
    """
    n_total, looks = operator.index(n_total), operator.index(looks)
    if n_total < 1 or looks < 1:
        raise ValueError("n_total and looks must be ≥ 1")
    sizes = [math.ceil(k * n_total / looks) for k in range(1, looks + 1)]
    if groups is None:
        return sizes
    ends = list(itertools.accumulate(operator.index(g) for g in groups))
    if not ends or ends[-1] != n_total or min(groups) < 1:
        raise ValueError(f"group sizes must be ≥ 1 and sum to n_total ({n_total})")
    out: list[int] = []
    for size in sizes:
        at = bisect.bisect_left(ends, size)  # ends[at] ≥ size
        best = ends[at]
        if at and size - ends[at - 1] < best - size:
            best = ends[at - 1]
        out.append(max(best, out[-1] if out else 0))
    return out


def nominal_alpha(look: int, looks: int, alpha: float) -> float:
    """The nominal one-sided level 1 − Φ(b_k) of look ``look`` of ``looks`` in the gate's
    design (4 looks at α = .05: 0.0048, 0.0146, 0.0244, 0.0334)."""
    bounds = wang_tsiatis_bounds(looks, alpha)
    return float(_scipy_stats().norm.sf(bounds[look - 1]))


@functools.lru_cache(maxsize=64)
def design_level(looks: int, alpha: float, power: float = 0.8) -> float:
    """The one-look level whose test has, in the normal limit, the power of the whole
    ``looks``-look design (:data:`SHAPE`) at every look: the level at which the MDE of one test
    on all the items is the design's MDE.

    The design reaches ``power`` at the drift θ (the last look's expected z) solving
    P(some look crosses | θ) = power; one test at level α* has that power at θ when
    z_{1−α*} = θ − z_power. 4 looks at α = .05, power .8: α* ≈ 0.040, an MDE 1.04 × the fixed
    design's (the last look's level alone, 0.0334, gives 1.075 ×).
    """
    _check_alpha(alpha)
    _check_alpha(power, "power")
    looks = operator.index(looks)
    if looks == 1:
        return float(alpha)
    from scipy import optimize  # lazy, like scipy.stats (see _scipy_stats)

    sps = _scipy_stats()
    bounds = wang_tsiatis_bounds(looks, alpha)
    c = bounds[-1]  # b_k = c·(k/K)^(Δ − 1/2): c is the last look's boundary
    z_power = float(sps.norm.ppf(power))
    theta = optimize.brentq(
        lambda t: _crossing_probability(c, looks, SHAPE, drift=t) - power,
        float(sps.norm.isf(alpha)) + z_power - 1.0,
        c + z_power + 1.0,
        xtol=1e-6,
    )
    return float(sps.norm.sf(theta - z_power))


def repeated_p(p_nominal: float, look: int, looks: int) -> float:
    """The repeated p-value at look k: the smallest overall α whose boundary b_k(α) the
    nominal p would cross (Jennison & Turnbull 2000, §9.2).

    b_k(α) = c(α)·(k/K)^(Δ − 1/2), so p_nominal crosses it iff c(α) ≤ z·(k/K)^(1/2 − Δ),
    z = Φ⁻¹(1 − p): the repeated p is the crossing probability of that constant c. Monotone in
    p_nominal, ≥ p_nominal, and ≤ α exactly when p_nominal ≤ nominal_alpha(k, K, α).
    """
    if looks == 1 or p_nominal >= 0.5:
        return float(min(1.0, max(p_nominal, 0.0)))
    if p_nominal <= 0.0:
        return 0.0
    c = float(_scipy_stats().norm.isf(p_nominal)) * (look / looks) ** (0.5 - SHAPE)
    return float(min(1.0, max(p_nominal, _crossing_probability(c, looks, SHAPE))))


def fail_crossing_probability(
    n_total: int,
    looks: int,
    alpha: float,
    discordance: float,
    *,
    levels: Sequence[float] | None = None,
) -> float:
    """Exact P(the FAIL boundary is crossed at some look) for paired 0/1 items when the PR
    changes nothing: each item is discordant with probability ``discordance`` (ψ), either way
    equally likely, so Δ = 0.

    The (b, c) counts are carried look by look as a distribution over the not-yet-stopped paths
    (the discrete analogue of Armitage, McPherson & Rowe 1969); at look k the exact test's
    rejection region at the nominal level (``levels``, default the design's α_k) is
    removed and its mass counted. Stopping for PASS is ignored and so is the decision's probe
    beyond Δ0 = 0 (see ``_exact_interval._envelope``): both only make FAIL rarer, so this is
    an upper bound on the design's A/A false-FAIL rate at this ψ; the design keeps α when it is
    ≤ α for every ψ.
    """
    _check_alpha(alpha)
    if not 0.0 < discordance <= 1.0:
        raise ValueError(f"discordance must be in (0, 1], got {discordance!r}")
    if levels is None:
        levels = [nominal_alpha(k, looks, alpha) for k in range(1, looks + 1)]

    def fails(b: np.ndarray, m: np.ndarray, size: int, level: float) -> np.ndarray:
        return b >= regression_edge(size, level)[m]  # FAIL ⇔ b ≥ edge[b + c]

    half = discordance / 2.0
    return _crossed(look_sizes(n_total, looks), levels, (half, half), fails)


def pass_crossing_probability(
    n_total: int,
    looks: int,
    alpha: float,
    margin: float,
    discordance: float,
    *,
    levels: Sequence[float] | None = None,
) -> float:
    """Exact P(the PASS boundary is crossed at some look) for paired 0/1 items when the PR is
    worse by exactly the margin: each item is (base right, PR wrong) with probability
    (ψ + δ)/2 and (base wrong, PR right) with (ψ − δ)/2, ψ = ``discordance`` ≥ δ, so Δ = −δ.

    The companion of :func:`fail_crossing_probability`: the (b, c) counts are carried look by
    look, and at look k the mass in the exact non-inferiority test's rejection region at the
    look's nominal level (:func:`evalgate.stats._exact_regions.noninferiority_edge`) is removed and
    counted. Stops for FAIL and the decision's probe beyond −δ are ignored (both only make
    PASS rarer), so this bounds the design's false-PASS rate at this ψ from above; the repeated
    tests keep α when it is ≤ α for every ψ in [δ, 1].
    """
    _check_alpha(alpha)
    if not 0.0 < margin < 1.0:
        raise ValueError(f"margin must be in (0, 1), got {margin!r}")
    if not margin <= discordance <= 1.0:
        raise ValueError(f"discordance must be in [margin, 1], got {discordance!r}")
    if levels is None:
        levels = [nominal_alpha(k, looks, alpha) for k in range(1, looks + 1)]

    def passes(b: np.ndarray, m: np.ndarray, size: int, level: float) -> np.ndarray:
        return b <= noninferiority_edge(size, float(margin), level)[m]  # PASS ⇔ b ≤ edge[b + c]

    cells = ((discordance + margin) / 2.0, (discordance - margin) / 2.0)
    return _crossed(look_sizes(n_total, looks), levels, cells, passes)


def _crossed(
    sizes: Sequence[int],
    levels: Sequence[float],
    cells: tuple[float, float],
    region: Callable[[np.ndarray, np.ndarray, int, float], np.ndarray],
) -> float:
    """P(the (b, c) counts fall in a look's ``region`` at some look), each item (1, 0) with
    probability ``cells[0]`` and (0, 1) with ``cells[1]``: the counts are carried look by look
    as a distribution over the not-yet-stopped paths, and at each look the mass in the region
    (``region(b, b + c, items, level)``, for b + c ≤ items) is removed and counted."""
    from scipy.signal import fftconvolve  # lazy, like scipy.stats

    alive, seen, crossed = np.ones((1, 1)), 0, 0.0
    for size, level in zip(sizes, levels, strict=True):
        step = _trinomial_cells(size - seen, *cells)
        alive = np.clip(fftconvolve(alive, step), 0.0, None)
        seen = size
        b = np.arange(size + 1)[:, None]
        m = b + np.arange(size + 1)[None, :]
        inside = (m <= size) & region(b, np.minimum(m, size), size, float(level))
        crossed += float(alive[inside].sum())
        alive[inside] = 0.0
    return crossed


def _trinomial_cells(step: int, p_b: float, p_c: float) -> np.ndarray:
    """P(b, c) of ``step`` items, each (1, 0) with probability p_b and (0, 1) with p_c."""
    from scipy import special  # lazy, like scipy.stats (see _scipy_stats)

    b = np.arange(step + 1, dtype=float)[:, None]
    c = np.arange(step + 1, dtype=float)[None, :]
    rest = np.maximum(step - b - c, 0.0)
    log_p = (
        special.gammaln(step + 1.0)
        - special.gammaln(b + 1.0)
        - special.gammaln(c + 1.0)
        - special.gammaln(rest + 1.0)
        + special.xlogy(b, p_b)
        + special.xlogy(c, p_c)
        + special.xlog1py(rest, -(p_b + p_c))
    )
    return np.where(b + c <= step, np.exp(log_p), 0.0)


def sequential_compare(
    base: ArrayLike,
    head: ArrayLike,
    design: Design,
    *,
    look: int,
    clusters: Sequence[Hashable] | ArrayLike | None = None,
) -> PairedResult:
    """:func:`paired_compare` at look ``look`` of the design's ``looks`` (:data:`SHAPE`).

    The bounds are the repeated confidence bounds (level ``result.level`` = the look's nominal
    α), the p-values are repeated p-values and ``result.alpha`` is the design's overall α, so
    :func:`verdict` on the result is the design's decision at this look.

    With the design's ``horizon`` (the planned number of items; the items given are the first
    of them in the run's order, :func:`evalgate.stats.item_order`), for graded items the PASS
    side is ONE betting capital process over the whole run, tuned to ``horizon`` and read at
    this look's prefix. Ville's inequality bounds the chance that it EVER reaches 1/α by α, so
    the lower bound and p_noninferiority are at the full α at every look (an anytime-valid
    p = 1 / max capital, no spending), and the false-PASS rate over all looks is ≤ α. With
    ``clusters`` (0/1 or graded items) the items must be whole groups, contiguous, in the run's
    order, and the PASS side over groups is likewise one betting process over the groups, tuned
    to the design's ``groups_total`` planned groups and scaled by its ``group_size``, the largest
    planned group (defaults: the groups given, right only at the last look); the test on items
    beside it (both must reject) is the items' process for graded items and the exact test at
    the look's level for 0/1 ones. Without a horizon both sides are at the look's nominal level;
    the PASS side's worst case is then the sum of the looks' levels.
    """
    look, looks = operator.index(look), design.looks
    if not 1 <= look <= looks:
        raise ValueError(f"look must be in 1..{looks}, got {look}")
    alpha = float(design.alpha)
    level = nominal_alpha(look, looks, alpha)
    b, h = _as_pair(base, head)
    graded = not (_is_binary(b) and _is_binary(h))
    anytime = design.horizon is not None and graded
    grouped = design.horizon is not None and clusters is not None
    reading = _Reading(
        level,
        pass_alpha=alpha if anytime else None,
        group_pass_alpha=alpha if grouped else None,
        adjust=lambda p: repeated_p(p, look, looks),
    )
    result = _compare(b, h, clusters, design, reading)
    notes = [result.note]
    if grouped:
        notes.append("lower bound: one betting process over the looks' groups, at the overall α")
    elif anytime:
        notes.append("lower bound: one betting process over the looks, at the overall α")
    return dataclasses.replace(
        result,
        alpha=alpha,
        level=level,
        p_regression=repeated_p(result.p_regression, look, looks),
        note="; ".join(x for x in notes if x),
    )


def sequential_decision(
    base: ArrayLike,
    head: ArrayLike,
    design: Design,
    *,
    look: int,
    clusters: Sequence[Hashable] | ArrayLike | None = None,
) -> Literal["PASS", "FAIL", "INCONCLUSIVE"] | None:
    """Group-sequential verdict at look ``look`` (1-based) of the design's ``looks``, or None
    to continue.

    ``base`` / ``head`` are the items seen so far, the first of the run's ``horizon`` (the
    design's, required) in its data-independent order (:func:`evalgate.stats.item_order`),
    ideally ``look_sizes(horizon, looks)[look - 1]`` of them; with ``clusters``, whole groups of
    the design's ``groups_total`` planned ones (required; the largest of ``group_size`` items),
    contiguous. PASS if the repeated lower bound clears −margin, else FAIL if the repeated upper
    bound is below 0 (see :func:`sequential_compare`: the PASS side is one betting process over
    the looks for graded items and over groups). The design's ``bounds``: the range of the
    metric's scale (:func:`evalgate.stats.metric_scale`), as ``evalgate compare`` uses it.
    Otherwise None before the last look and INCONCLUSIVE at it.
    """
    if design.horizon is None:
        raise ValueError("a sequential decision needs the design's horizon (the planned items)")
    b, h = _as_pair(base, head)
    if b.size == 0 or b.size > design.horizon:
        raise ValueError(f"need 1..{design.horizon} items seen, got {b.size}")
    if clusters is not None and design.groups_total is None:
        # Tuned to the groups seen, each look would be a process of its own (the PASS side's
        # worst case the sum of the looks' levels): the plan must say how many there are.
        raise ValueError("groups_total (the planned number of groups) is needed with clusters")
    decision = verdict(sequential_compare(b, h, design, look=look, clusters=clusters))
    if decision == INCONCLUSIVE and look < design.looks:
        return None
    return decision
