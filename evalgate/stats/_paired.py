"""The paired PR-vs-base comparison and its three-valued verdict.

Exact McNemar (binary scores) or a (cluster) sign-flip permutation test (anything else) for
regression and non-inferiority; :func:`verdict` turns the two one-sided p-values into PASS /
FAIL / INCONCLUSIVE.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from evalgate.stats._common import (
    _as_pair,
    _check_alpha,
    _cluster_codes,
    _clustered_se,
    _is_binary,
    _plain_se,
    _scipy_stats,
)

PASS = "PASS"
FAIL = "FAIL"
INCONCLUSIVE = "INCONCLUSIVE"

# Sign-flip matrices are built in chunks of about this many entries (8 MiB of float64), so
# 10,000 resamples x 500 items never materialise a 40 MB matrix at once.
_CHUNK_ENTRIES = 1 << 20


@dataclass(frozen=True)
class PairedResult:
    """PR (head) vs base on the same items; Δ = head − base."""

    n: int
    base_mean: float
    head_mean: float
    delta: float
    se: float  # standard error of Δ (clustered when clusters were given)
    lo: float  # one-sided (1 − alpha) lower bound on Δ
    hi: float  # one-sided (1 − alpha) upper bound on Δ
    p_regression: float  # H0: Δ ≥ 0 vs H1: Δ < 0
    p_noninferiority: float  # H0: Δ ≤ −margin vs H1: Δ > −margin
    method: str  # "mcnemar-exact" | "sign-flip-permutation" | "cluster-sign-flip-permutation"
    discordant: tuple[int, int] | None  # (b, c) = (base 1 & head 0, base 0 & head 1) if binary
    margin: float
    alpha: float
    n_clusters: int | None = None
    n_resamples: int = 0  # sign-flip patterns used; 0 for McNemar
    exact: bool = True  # False when the p-values are Monte-Carlo estimates


def _mcnemar_p(b: ArrayLike, c: ArrayLike) -> np.ndarray:
    """Exact one-sided McNemar p = P(X ≥ b), X ~ Binomial(b + c, 1/2); 1 when b + c = 0.

    Identical to scipy.stats.binomtest(b, b + c, 0.5, alternative="greater").pvalue, but
    vectorised (curtailment evaluates it on a whole grid of outcomes).
    """
    b_arr = np.asarray(b, dtype=float)
    n_disc = b_arr + np.asarray(c, dtype=float)
    p = _scipy_stats().binom.sf(b_arr - 1.0, np.maximum(n_disc, 1.0), 0.5)
    return np.where(n_disc > 0, np.minimum(p, 1.0), 1.0)


def _binary_delta_se(b: ArrayLike, c: ArrayLike, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Δ and its Wald SE sqrt(((b + c)/n − Δ²)/n) for paired binary data.

    The Wald variance is exactly 0 when there are no discordant pairs (or all n pairs are
    discordant one way); there we use the Agresti & Min (2005, Stat Med 24:729) adjustment —
    add 1/2 to every cell of the 2x2 table — so 5 agreeing items cannot "prove" anything.
    """
    b_arr = np.asarray(b, dtype=float)
    c_arr = np.asarray(c, dtype=float)
    delta = (c_arr - b_arr) / n
    # n²·var·n written in counts so that the degenerate case is an exact 0, not a rounding error.
    num = (b_arr + c_arr) * n - (c_arr - b_arr) ** 2
    var = num / float(n) ** 3
    n2 = n + 2.0
    var_adj = ((b_arr + c_arr + 1.0) * n2 - (c_arr - b_arr) ** 2) / n2**3
    return delta, np.sqrt(np.where(num > 0, var, var_adj))


def _binary_noninferiority_p(b: ArrayLike, c: ArrayLike, n: int, margin: float) -> np.ndarray:
    # Wald z-test of H0: Δ ≤ −margin on the paired difference (the Wald-type test of Liu et al.
    # 2002, Stat Med 21:231); reproduces the notes' worked example (26/18, δ = 5 pp: p ≈ 0.38).
    delta, se = _binary_delta_se(b, c, n)
    return _scipy_stats().norm.sf((delta + margin) / se)


def _sign_flip_pvalues(
    units: np.ndarray, n_resamples: int, seed: int
) -> tuple[np.ndarray, int, bool]:
    """One-sided ("greater") sign-flip p-values for each column of ``units`` (C x m).

    Under H0 each unit's value is symmetric about 0, so flipping signs of whole units
    (items, or cluster sums) generates the null distribution of the column sum (Fisher 1935;
    Good 2005 ch. 3). When 2^C ≤ n_resamples we enumerate every pattern (an exact p);
    otherwise a seeded Monte-Carlo sample with p = (count + 1) / (R + 1) (Phipson & Smyth 2010),
    which is never 0 and keeps the test valid.
    """
    n_units = units.shape[0]
    observed = units.sum(axis=0)
    # Sums of the same numbers in another order differ by rounding; count those as ties.
    threshold = observed - 1e-9 * (1.0 + np.abs(units).sum(axis=0))
    rows = max(1, _CHUNK_ENTRIES // n_units)
    count = np.zeros(units.shape[1], dtype=np.int64)
    if n_units < 62 and (1 << n_units) <= n_resamples:
        total = 1 << n_units
        shifts = np.arange(n_units, dtype=np.int64)
        for start in range(0, total, rows):
            patterns = np.arange(start, min(total, start + rows), dtype=np.int64)
            signs = 1.0 - 2.0 * ((patterns[:, None] >> shifts) & 1)
            count += np.count_nonzero(signs @ units >= threshold, axis=0)
        return count / total, total, True
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, rows):
        size = min(rows, n_resamples - start)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(size, n_units), dtype=np.int8)
        count += np.count_nonzero(signs @ units >= threshold, axis=0)
    return (count + 1) / (n_resamples + 1), n_resamples, False


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

    Binary scores without clusters: exact McNemar for the regression test; a Wald z-test for
    non-inferiority and Wald bounds with the same SE (so ``lo > -margin`` ⇔ ``p_noninferiority
    < alpha`` exactly). Anything else (fractional scores from k > 1 rollouts, graded rewards,
    clusters): a sign-flip permutation test on d_i = head_i − base_i (regression) and on
    d_i + margin (non-inferiority), flipping whole clusters; bounds from a t interval with the
    (clustered) SE — deterministic, and unlike a percentile bootstrap it does not undercover at
    small n (the bootstrap's sqrt((n−1)/n) narrowness; Hesterberg 2015, Am Stat 69:371).

    Raises ValueError on a length mismatch, on no items, or on non-finite scores.
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
    delta = float(d.mean())
    discordant = None
    if _is_binary(b) and _is_binary(h):
        discordant = (int(np.sum((b == 1.0) & (h == 0.0))), int(np.sum((b == 0.0) & (h == 1.0))))

    if discordant is not None and clusters is None:
        n_b, n_c = discordant
        _, se_arr = _binary_delta_se(n_b, n_c, n)
        se = float(se_arr)
        z = float(_scipy_stats().norm.ppf(1.0 - alpha))
        return PairedResult(
            n=n,
            base_mean=float(b.mean()),
            head_mean=float(h.mean()),
            delta=delta,
            se=se,
            lo=delta - z * se,
            hi=delta + z * se,
            p_regression=float(_mcnemar_p(n_b, n_c)),
            p_noninferiority=float(_binary_noninferiority_p(n_b, n_c, n, margin)),
            method="mcnemar-exact",
            discordant=discordant,
            margin=float(margin),
            alpha=float(alpha),
        )

    if clusters is not None:
        codes, n_units = _cluster_codes(clusters, n)
        sums = np.bincount(codes, weights=d, minlength=n_units)
        sizes = np.bincount(codes, minlength=n_units).astype(float)
        se, df = _clustered_se(d, codes, n_units), n_units - 1
        method = "cluster-sign-flip-permutation"
    else:
        sums, sizes, n_units = d, np.ones(n), n
        se, df = _plain_se(d), n - 1
        method = "sign-flip-permutation"
    # Column 0: −d (large when head regressed); column 1: d + margin (large when non-inferior).
    units = np.column_stack([-sums, sums + margin * sizes])
    pvals, used, exact = _sign_flip_pvalues(units, n_resamples, seed)
    p_reg, p_ni = float(pvals[0]), float(pvals[1])
    if not np.any(d):
        # All differences are exactly zero: no evidence of regression at all. (The
        # non-inferiority p from the flips of +margin is already right: 2^-C or 1/(R+1).)
        p_reg = 1.0
    if df >= 1 and math.isfinite(se):
        t = float(_scipy_stats().t.ppf(1.0 - alpha, df))
        lo, hi = delta - t * se, delta + t * se
    else:
        lo = hi = math.nan
    return PairedResult(
        n=n,
        base_mean=float(b.mean()),
        head_mean=float(h.mean()),
        delta=delta,
        se=se,
        lo=lo,
        hi=hi,
        p_regression=p_reg,
        p_noninferiority=p_ni,
        method=method,
        discordant=discordant,
        margin=float(margin),
        alpha=float(alpha),
        n_clusters=n_units if clusters is not None else None,
        n_resamples=used,
        exact=exact,
    )


def verdict(
    result: PairedResult, *, margin: float | None = None, alpha: float | None = None
) -> str:
    """PASS if non-inferior, else FAIL if a significant regression, else INCONCLUSIVE.

    Decided on the p-values (PASS: p_noninferiority ≤ alpha; FAIL: p_regression ≤ alpha), which
    is the "L > −margin / U < 0" rule of the design notes whenever the bounds come from the
    same test. ``margin`` / ``alpha`` default to those the result was computed with; a different
    margin is an error because p_noninferiority depends on it.
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
