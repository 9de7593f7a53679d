"""Group-sequential (O'Brien-Fleming) stopping with deterministic curtailment."""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from evalgate.stats._common import _as_pair, _check_alpha, _cluster_codes, _is_binary, _scipy_stats
from evalgate.stats._paired import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    _binary_delta_se,
    _binary_noninferiority_p,
    _mcnemar_p,
    paired_compare,
    verdict,
)

# Exhaustive curtailment checks at most this many (extra b, extra c) outcomes; beyond it we
# decline to curtail, which is always safe (it only costs items).
_CURTAIL_MAX_OUTCOMES = 2_000_000


def _obf_crossing_probability(c: float, looks: int, step: float = 0.01) -> float:
    """P(some look crosses) under H0 for the boundaries c·sqrt(K/k).

    On the partial-sum scale S_k = sqrt(k)·Z_k (independent N(0, 1) increments for equally
    spaced information) the O'Brien-Fleming boundary is the constant c·sqrt(K), so we propagate
    the sub-density of not-yet-crossed paths look by look by numerical convolution
    (Armitage, McPherson & Rowe 1969; Jennison & Turnbull 2000, ch. 19), trapezoid rule.
    """
    top = c * math.sqrt(looks)
    # Paths more than 9 SD below the boundary can never come back in K − 1 looks (P < 1e-18).
    m = math.ceil(9.0 * math.sqrt(looks) / step) + 1
    x = top - step * np.arange(m)[::-1]
    weights = np.full(m, step)
    weights[[0, -1]] = step / 2.0
    sps = _scipy_stats()
    half = math.ceil(9.0 / step)
    kernel = sps.norm.pdf(step * np.arange(-half, half + 1))
    density = sps.norm.pdf(x)
    crossed = float(sps.norm.sf(top))
    for _ in range(2, looks + 1):
        mass = weights * density
        crossed += float(np.sum(mass * sps.norm.sf(top - x)))
        density = np.convolve(mass, kernel)[half : half + m]
    return crossed


def obrien_fleming_bounds(looks: int = 4, alpha: float = 0.05) -> list[float]:
    """One-sided O'Brien & Fleming (1979) z boundaries c·sqrt(K/k) at k/K of the items.

    c is solved so that the probability of crossing at any look under H0 equals alpha. For 4
    looks at alpha = .05 this gives ≈ 3.47, 2.45, 2.00, 1.73.
    """
    _check_alpha(alpha)
    looks = operator.index(looks)
    if looks < 1:
        raise ValueError("looks must be ≥ 1")
    sps = _scipy_stats()
    z_final = float(sps.norm.ppf(1.0 - alpha))
    if looks == 1:
        return [z_final]
    # Bracket: c = z_{1−α} crosses with prob ≥ α at the last look alone; c = z_{1−α/K} crosses
    # with prob ≤ α by Bonferroni.
    from scipy import optimize  # lazy, like scipy.stats (see _scipy_stats)

    c = optimize.brentq(
        lambda cc: _obf_crossing_probability(cc, looks) - alpha,
        z_final,
        float(sps.norm.ppf(1.0 - alpha / looks)) + 1e-6,
        xtol=1e-8,
    )
    return [c * math.sqrt(looks / k) for k in range(1, looks + 1)]


def look_sizes(n_total: int, looks: int) -> list[int]:
    """Items seen at each of ``looks`` equally spaced looks (the last is n_total)."""
    n_total, looks = operator.index(n_total), operator.index(looks)
    if n_total < 1 or looks < 1:
        raise ValueError("n_total and looks must be ≥ 1")
    return [math.ceil(k * n_total / looks) for k in range(1, looks + 1)]


def sequential_z(
    base: ArrayLike,
    head: ArrayLike,
    *,
    margin: float,
    clusters: Sequence[Hashable] | ArrayLike | None = None,
) -> tuple[float, float]:
    """(z_noninferiority, z_regression) for the items seen so far; large values reject H0.

    Binary, no clusters: z_ni = (Δ + margin)/SE_Wald (the fixed-sample non-inferiority test) and
    McNemar's z_reg = (b − c)/sqrt(b + c). Otherwise the normal approximation to the (cluster)
    sign-flip test used at the final look: z = Σ_u e_u / sqrt(Σ_u e_u²), with unit values
    e_u = cluster sums of d + margin (resp. −d) — the exact null mean and variance of the
    sign-flip sum (Efron 1969, JASA 64:1278).
    """
    b, h = _as_pair(base, head)
    n = int(b.size)
    if n == 0:
        raise ValueError("no items")
    d = h - b
    if clusters is None and _is_binary(b) and _is_binary(h):
        n_b = int(np.sum((b == 1.0) & (h == 0.0)))
        n_c = int(np.sum((b == 0.0) & (h == 1.0)))
        delta, se = _binary_delta_se(n_b, n_c, n)
        z_ni = float((delta + margin) / se)
        z_reg = (n_b - n_c) / math.sqrt(n_b + n_c) if n_b + n_c else 0.0
        return z_ni, float(z_reg)
    if clusters is not None:
        codes, n_units = _cluster_codes(clusters, n)
        sums = np.bincount(codes, weights=d, minlength=n_units)
        sizes = np.bincount(codes, minlength=n_units).astype(float)
    else:
        sums, sizes = d, np.ones(n)

    def self_normalised(e: np.ndarray) -> float:
        ss = float(np.sum(e**2))
        return float(np.sum(e)) / math.sqrt(ss) if ss > 0.0 else 0.0

    return self_normalised(sums + margin * sizes), self_normalised(-sums)


def _binary_verdict_codes(
    b: np.ndarray, c: np.ndarray, n: int, margin: float, alpha: float
) -> np.ndarray:
    # 2 = PASS, 0 = FAIL, 1 = INCONCLUSIVE, by exactly the rules paired_compare + verdict use.
    passed = _binary_noninferiority_p(b, c, n, margin) <= alpha
    failed = _mcnemar_p(b, c) <= alpha
    return np.where(passed, 2, np.where(failed, 0, 1))


_VERDICT_NAMES = {0: FAIL, 1: INCONCLUSIVE, 2: PASS}


def curtailed(
    base_seen: ArrayLike,
    head_seen: ArrayLike,
    n_total: int,
    margin: float = 0.03,
    alpha: float = 0.05,
) -> str | None:
    """The fixed-sample verdict on all n_total items if no outcome of the rest can change it.

    Binary scores only (returns None otherwise). The final verdict depends on the remaining
    items only through how many become new b (base 1, head 0) and new c pairs. Cheap check
    first: if "all remaining differences −1" and "all +1" disagree, continue. If they agree,
    every (extra b, extra c) split is checked — the Wald non-inferiority z is not monotone in
    the discordant count, so agreeing extremes alone would not prove the verdict is fixed.
    May return INCONCLUSIVE when that outcome is certain.
    """
    _check_alpha(alpha)
    b, h = _as_pair(base_seen, head_seen)
    n_total = operator.index(n_total)
    remaining = n_total - b.size
    if remaining < 0:
        raise ValueError(f"saw {b.size} items but n_total is {n_total}")
    if n_total == 0 or not (_is_binary(b) and _is_binary(h)):
        return None
    n_b = int(np.sum((b == 1.0) & (h == 0.0)))
    n_c = int(np.sum((b == 0.0) & (h == 1.0)))
    extremes = _binary_verdict_codes(
        np.array([n_b + remaining, n_b]), np.array([n_c, n_c + remaining]), n_total, margin, alpha
    )
    if extremes[0] != extremes[1]:
        return None
    if remaining > 0:
        if (remaining + 1) * (remaining + 2) // 2 > _CURTAIL_MAX_OUTCOMES:
            return None
        extra_b, extra_c = np.triu_indices(remaining + 1)  # pairs x ≤ y; use (x, y − x)
        outcomes = _binary_verdict_codes(
            n_b + extra_b, n_c + (extra_c - extra_b), n_total, margin, alpha
        )
        if np.any(outcomes != extremes[0]):
            return None
    return _VERDICT_NAMES[int(extremes[0])]


def sequential_decision(
    base: ArrayLike,
    head: ArrayLike,
    *,
    look: int,
    looks: int,
    margin: float,
    alpha: float,
    n_total: int,
    clusters: Sequence[Hashable] | ArrayLike | None = None,
    bounds: Sequence[float] | None = None,
    curtail: bool = True,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> str | None:
    """Group-sequential verdict at look ``look`` (1-based) of ``looks``, or None to continue.

    ``base`` / ``head`` are the items seen so far, in a fixed seeded order, ideally
    ``look_sizes(n_total, looks)[look - 1]`` of them. Interim looks: PASS if z_ni ≥ b_k, else
    FAIL if z_reg ≥ b_k (see :func:`sequential_z`), with b_k the one-sided O'Brien-Fleming
    boundaries (pass ``bounds`` to avoid recomputing them); then, for binary unclustered scores,
    deterministic curtailment (may return INCONCLUSIVE). The final look always returns the
    fixed-sample verdict (exact McNemar / permutation), run at the nominal level of the last
    boundary, α_K = 1 − Φ(b_K) (≈ 0.042 for 4 looks): running it at the full α instead would
    spend α twice and inflate both error rates.
    """
    _check_alpha(alpha)
    look, looks = operator.index(look), operator.index(looks)
    if not 1 <= look <= looks:
        raise ValueError(f"look must be in 1..{looks}, got {look}")
    b, h = _as_pair(base, head)
    if b.size == 0 or b.size > n_total:
        raise ValueError(f"need 1..{n_total} items seen, got {b.size}")
    bounds = list(obrien_fleming_bounds(looks, alpha) if bounds is None else bounds)
    if len(bounds) != looks:
        raise ValueError(f"expected {looks} boundaries, got {len(bounds)}")
    final_alpha = float(_scipy_stats().norm.sf(bounds[-1]))
    if look == looks:
        result = paired_compare(
            b,
            h,
            clusters=clusters,
            margin=margin,
            alpha=final_alpha,
            n_resamples=n_resamples,
            seed=seed,
        )
        return verdict(result)
    z_ni, z_reg = sequential_z(b, h, margin=margin, clusters=clusters)
    if z_ni >= bounds[look - 1]:
        return PASS
    if z_reg >= bounds[look - 1]:
        return FAIL
    if curtail and clusters is None:
        return curtailed(b, h, n_total, margin, final_alpha)
    return None
