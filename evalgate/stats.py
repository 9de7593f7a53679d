"""Paired statistics for gating a pull request on per-item eval results.

Pure functions: estimates with confidence intervals, the paired PR-vs-base comparison, the
three-valued verdict, Holm's multiplicity correction, minimum detectable effects (the
normal-theory formula, and the one calibrated to the gate's own tests), pass@k / pass^k, and
group-sequential (O'Brien-Fleming) stopping with deterministic curtailment.

Conventions used throughout:

* The unit of analysis is the item (Miller 2024, "Adding Error Bars to Evals", arXiv
  2411.00640): rollouts are averaged per item first, and items sharing a group id are resampled /
  sign-flipped together as one cluster.
* Δ = mean(head) − mean(base). ``lo`` / ``hi`` of a :class:`PairedResult` are the one-sided
  (1 − α) lower / upper bounds on Δ (the ends of a two-sided 1 − 2α interval).
* The verdict is decided by the two one-sided p-values; the bounds are for display. Where the
  two can disagree (exact McNemar vs a Wald bound, a permutation test vs a t bound) the p-value
  wins, because it is the test whose error rate the gate promises.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from types import ModuleType

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "Estimate",
    "PairedResult",
    "curtailed",
    "holm",
    "item_scores",
    "look_sizes",
    "mde",
    "mde_for_test",
    "mde_paired",
    "mean_ci",
    "obrien_fleming_bounds",
    "paired_compare",
    "pass_at_k",
    "pass_hat_k",
    "sequential_decision",
    "sequential_z",
    "verdict",
]

PASS = "PASS"
FAIL = "FAIL"
INCONCLUSIVE = "INCONCLUSIVE"

# Sign-flip matrices are built in chunks of about this many entries (8 MiB of float64), so
# 10,000 resamples x 500 items never materialise a 40 MB matrix at once.
_CHUNK_ENTRIES = 1 << 20
# Exhaustive curtailment checks at most this many (extra b, extra c) outcomes; beyond it we
# decline to curtail, which is always safe (it only costs items).
_CURTAIL_MAX_OUTCOMES = 2_000_000


@dataclass(frozen=True)
class Estimate:
    """A mean with its standard error and a two-sided (1 − α) confidence interval."""

    mean: float
    se: float
    lo: float
    hi: float
    n: int
    method: str = "t"  # "t", "cluster-t" or "wilson"
    n_clusters: int | None = None


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


# --------------------------------------------------------------------------- validation helpers


def _special() -> ModuleType:
    """scipy.special alone (~0.25 s to import, against ~0.85 s for scipy.stats): enough for the
    t quantile every run summary needs."""
    from scipy import special

    return special


def _scipy_stats() -> ModuleType:
    """scipy.stats, imported on first use rather than with this module.

    Importing scipy.stats takes most of a second (it pulls in scipy.linalg, scipy.optimize and
    the distribution zoo), which would dominate the CLI's start-up for commands that never
    compute a statistic (``validate``, ``schema``). After the first call this is a dictionary
    lookup in sys.modules.
    """
    from scipy import stats

    return stats


def _check_alpha(alpha: float, name: str = "alpha") -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {alpha!r}")


def _as_scores(values: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _as_pair(base: ArrayLike, head: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    b = _as_scores(base, "base")
    h = _as_scores(head, "head")
    if b.size != h.size:
        raise ValueError(
            f"base and head must score the same items: got {b.size} and {h.size} scores"
        )
    return b, h


def _is_binary(arr: np.ndarray) -> bool:
    return bool(np.all((arr == 0.0) | (arr == 1.0)))


def _cluster_codes(clusters: Sequence[Hashable] | ArrayLike, n: int) -> tuple[np.ndarray, int]:
    """Map arbitrary hashable group ids to 0..C−1 in order of first appearance."""
    labels = list(clusters)  # type: ignore[arg-type]
    if len(labels) != n:
        raise ValueError(f"clusters has {len(labels)} entries for {n} items")
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(c, len(index)) for c in labels), np.intp, count=n)
    return codes, len(index)


def _plain_se(values: np.ndarray) -> float:
    n = values.size
    return float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan


def _clustered_se(values: np.ndarray, codes: np.ndarray, n_clusters: int) -> float:
    # Miller 2024 eq. (4): SE_C = sqrt(Σ_c (Σ_{i∈c} (s_i − s̄))²) / n, times the small-sample
    # factor sqrt(C / (C − 1)) that inspect_ai applies (the CR1-style correction).
    if n_clusters < 2:
        return math.nan
    sums = np.bincount(codes, weights=values - values.mean(), minlength=n_clusters)
    return float(
        math.sqrt(float(np.sum(sums**2))) / values.size * math.sqrt(n_clusters / (n_clusters - 1))
    )


# --------------------------------------------------------------------------- estimates


def item_scores(rewards: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """Per-item mean reward over its rollouts; items may have different numbers of rollouts."""
    if isinstance(rewards, np.ndarray) and rewards.ndim == 2:
        if rewards.shape[1] == 0:
            raise ValueError("every item needs at least one rollout")
        return _as_scores(rewards.mean(axis=1), "rewards")
    out = np.empty(len(rewards))
    for i, item in enumerate(rewards):
        arr = _as_scores(np.asarray(item, dtype=float).reshape(-1), f"rewards[{i}]")
        if arr.size == 0:
            raise ValueError(f"item {i} has no rollouts")
        out[i] = arr.mean()
    return out


def mean_ci(
    scores: ArrayLike,
    *,
    clusters: Sequence[Hashable] | ArrayLike | None = None,
    alpha: float = 0.05,
) -> Estimate:
    """Mean with SE and a two-sided (1 − alpha) CI.

    * clusters given: clustered SE (Miller 2024) and a t interval with C − 1 df;
    * binary scores, no clusters: Wilson score interval (Wilson 1927), because the Wald interval
      collapses to zero width at 0 % / 100 % and undercovers for small n (Brown, Cai & DasGupta
      2001); ``se`` is still the plain sample SE, for display;
    * otherwise: sample SE and a t interval with n − 1 df.

    The interval is clipped to [0, 1] only when every score lies in [0, 1]. n = 0 gives NaN
    everywhere; n = 1 gives the mean with NaN se / lo / hi.
    """
    _check_alpha(alpha)
    s = _as_scores(scores, "scores")
    n = int(s.size)
    codes, n_clusters = _cluster_codes(clusters, n) if clusters is not None else (None, None)
    binary = n > 0 and _is_binary(s)
    method = "cluster-t" if codes is not None else ("wilson" if binary else "t")
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0, method, n_clusters)
    mean = float(s.mean())
    if n == 1:
        return Estimate(mean, math.nan, math.nan, math.nan, 1, method, n_clusters)
    if codes is not None and n_clusters is not None:
        se, df = _clustered_se(s, codes, n_clusters), n_clusters - 1
    else:
        se, df = _plain_se(s), n - 1
    if method == "wilson":
        z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
        denom = 1.0 + z * z / n
        centre = (mean + z * z / (2.0 * n)) / denom
        half = z / denom * math.sqrt(mean * (1.0 - mean) / n + z * z / (4.0 * n * n))
        lo, hi = centre - half, centre + half
        # All right (or all wrong): the Wilson bound is exactly 1 (0); avoid 0.9999999999999999.
        lo, hi = (0.0 if mean == 0.0 else lo), (1.0 if mean == 1.0 else hi)
    elif df >= 1 and math.isfinite(se):
        t = float(_special().stdtrit(df, 1.0 - alpha / 2.0))
        lo, hi = mean - t * se, mean + t * se
    else:
        lo = hi = math.nan
    if np.all((s >= 0.0) & (s <= 1.0)) and math.isfinite(lo):
        lo, hi = max(lo, 0.0), min(hi, 1.0)
    return Estimate(mean, se, lo, hi, n, method, n_clusters)


# --------------------------------------------------------------------------- paired tests


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


def holm(pvalues: Sequence[float] | ArrayLike, alpha: float = 0.05) -> list[bool]:
    """Holm (1979) step-down rejections, in input order.

    Sort p ascending; reject p_(i) while p_(i) ≤ alpha / (m − i + 1); stop at the first failure.
    Controls the family-wise error rate under any dependence between the tests.
    """
    _check_alpha(alpha)
    p = np.asarray(pvalues, dtype=float).reshape(-1)
    if np.any(np.isnan(p)) or np.any((p < 0.0) | (p > 1.0)):
        raise ValueError("p-values must lie in [0, 1]")
    m = p.size
    reject = [False] * m
    for rank, idx in enumerate(np.argsort(p, kind="stable")):
        if p[idx] > alpha / (m - rank):
            break
        reject[int(idx)] = True
    return reject


# --------------------------------------------------------------------------- power


def mde(var_d: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable effect (z_{1−α} + z_{power})·sqrt(var_d / n), one-sided α.

    var_d is the per-item variance of the paired difference (for an unpaired comparison of two
    proportions use 2·p(1 − p)).
    """
    _check_alpha(alpha)
    _check_alpha(power, "power")
    n = operator.index(n)
    if n < 1:
        raise ValueError("n must be ≥ 1")
    if not (math.isfinite(var_d) and var_d >= 0.0):
        raise ValueError(f"var_d must be a finite number ≥ 0, got {var_d!r}")
    sps = _scipy_stats()
    z_sum = float(sps.norm.ppf(1.0 - alpha) + sps.norm.ppf(power))
    return z_sum * math.sqrt(var_d / n)


def mde_paired(
    base: ArrayLike,
    head: ArrayLike,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    clusters: Sequence[Hashable] | ArrayLike | None = None,
) -> float:
    """MDE for this many items, with var_d estimated from the paired data.

    Binary: discordant fraction − Δ² (the Wald variance of McNemar's difference). Clustered:
    n·SE_C², i.e. the variance inflated by the design effect (Miller 2024). Otherwise the sample
    variance of d. NaN when it cannot be estimated (fewer than 2 items / clusters).

    This is the textbook figure; the tests the gate runs need a somewhat larger effect for the
    same power. The scorecard reports :func:`mde_for_test`.
    """
    b, h = _as_pair(base, head)
    n = int(b.size)
    if n == 0:
        raise ValueError("no items")
    d = h - b
    if clusters is not None:
        codes, n_units = _cluster_codes(clusters, n)
        var_d = n * _clustered_se(d, codes, n_units) ** 2
    elif _is_binary(b) and _is_binary(h):
        var_d = float(np.mean(d != 0.0) - d.mean() ** 2)
    else:
        var_d = float(d.var(ddof=1)) if n > 1 else math.nan
    if not math.isfinite(var_d):
        return math.nan
    return mde(max(var_d, 0.0), n, alpha=alpha, power=power)


# --------------------------------------------------------------------- power of the gate's own test

# Item scores are means of k rollouts (k varying where rollouts errored), so their differences lie
# on a grid 1/lcm(k_i); grids finer than 1/_LATTICE_MAX_DENOMINATOR are treated as continuous.
_LATTICE_MAX_DENOMINATOR = 5040


def _lattice_step(values: np.ndarray) -> float:
    """Largest g with every value an integer multiple of g (g = gcd / lcm of denominators).

    0.0 when the values are off any grid 1/K with K ≤ _LATTICE_MAX_DENOMINATOR (continuous
    scores) or all zero.
    """
    scale = 1
    magnitudes = np.unique(np.round(np.abs(values), 12))
    for value in magnitudes:
        frac = Fraction(float(value)).limit_denominator(_LATTICE_MAX_DENOMINATOR)
        if abs(float(frac) - value) > 1e-9:
            return 0.0
        scale = math.lcm(scale, frac.denominator)
        if scale > _LATTICE_MAX_DENOMINATOR:
            return 0.0
    steps = np.round(magnitudes * scale).astype(np.int64)
    gcd = int(np.gcd.reduce(steps[steps > 0])) if np.any(steps > 0) else 0
    return gcd / scale


def _mcnemar_critical(m: np.ndarray, alpha: float) -> np.ndarray:
    """Smallest b with exact one-sided McNemar p ≤ alpha given m discordant pairs; m + 1 if none.

    p = P(X ≥ b), X ~ Binomial(m, 1/2) (as _mcnemar_p). Start from the normal approximation
    and step to the exact boundary, which is at most a few steps away.
    """
    from scipy import special  # lazy, like scipy.stats (see _scipy_stats)

    z = float(special.ndtri(1.0 - alpha))
    crit = np.clip(np.ceil(m / 2.0 + z * np.sqrt(m) / 2.0), 1.0, m + 1.0)
    trials = m.astype(np.int64)
    while True:
        # P(X ≥ b) = bdtrc(b − 1, m, 1/2).
        down = (crit >= 2.0) & (special.bdtrc(crit - 2.0, trials, 0.5) <= alpha)
        up = (crit <= m) & (special.bdtrc(crit - 1.0, trials, 0.5) > alpha)
        if not (down.any() or up.any()):
            return crit
        crit = crit - down + up


def _mcnemar_mde(n: int, psi0: float, rho: float, alpha: float, power: float) -> float:
    """Smallest Δ at which exact McNemar on n pairs rejects with probability ``power``.

    Cells: p_b = P(base 1, head 0), p_c = P(base 0, head 1), with p_b − p_c = Δ and the
    discordance ψ = p_b + p_c = psi0 + rho·Δ (see mde_for_test), at least Δ (p_c ≥ 0). The
    number of discordant pairs is M ~ Binomial(n, ψ) and b | M ~ Binomial(M, p_b/ψ), so the
    power is Σ_m P(M = m)·P(b ≥ b*(m) | m): the exact unconditional power of the conditional
    test (Suissa & Shuster 1991, Biometrics 47:361; Fagerland, Lydersen & Laake 2013, BMC Med
    Res Methodol 13:91). Only m within 8 SD of nψ is summed (the rest is negligible).
    Returns inf when no Δ ≤ 1 reaches the power (too few pairs for the test ever to reject).
    """
    from scipy import optimize, special  # lazy, like scipy.stats (see _scipy_stats)

    crit = np.zeros(n + 1)  # b*(m), filled in as the root search reaches each m

    def shortfall(delta: float) -> float:
        psi = min(1.0, max(delta, psi0 + rho * delta))
        if psi <= 0.0:
            return -power
        spread = 8.0 * math.sqrt(n * psi * (1.0 - psi)) + 1.0
        first, last = max(0, math.floor(n * psi - spread)), min(n, math.ceil(n * psi + spread))
        m = np.arange(first, last + 1, dtype=float)
        known = crit[first : last + 1]  # a view: filling it fills the cache
        todo = known == 0.0
        if todo.any():
            known[todo] = _mcnemar_critical(m[todo], alpha)
        log_pmf = (
            special.gammaln(n + 1.0)
            - special.gammaln(m + 1.0)
            - special.gammaln(n - m + 1.0)
            + special.xlogy(m, psi)
            + special.xlog1py(n - m, -psi)
        )
        q = min(1.0, 0.5 + delta / psi / 2.0)  # P(b-type | discordant)
        reject = special.bdtrc(known - 1.0, m.astype(np.int64), q)
        return float(np.sum(np.exp(log_pmf) * reject)) - power

    smallest = 1e-9
    if shortfall(smallest) >= 0.0:  # asked for a power no larger than the test's size
        return 0.0
    if shortfall(1.0) < 0.0:  # too few items for the exact test ever to reject often enough
        return math.inf
    # Bracket the root near the normal-theory answer Δ = z·sqrt(ψ(Δ)/n) (a few fixed-point
    # steps), so that brentq needs a handful of evaluations rather than ~20 from (0, 1].
    z_sum = float(special.ndtri(1.0 - alpha) + special.ndtri(power))
    guess = z_sum * math.sqrt(max(psi0, 1.0 / n) / n)
    for _ in range(3):
        guess = z_sum * math.sqrt(min(1.0, max(guess, psi0 + rho * guess)) / n)
    lo, hi = smallest, 1.0
    if 0.9 * guess < 1.0:
        if shortfall(0.9 * guess) < 0.0:
            lo = 0.9 * guess
            if 1.25 * guess < 1.0 and shortfall(1.25 * guess) >= 0.0:
                hi = 1.25 * guess
        else:
            hi = 0.9 * guess
    return float(optimize.brentq(shortfall, lo, hi, xtol=1e-6 * lo, rtol=1e-6))


def mde_for_test(
    base: ArrayLike,
    head: ArrayLike,
    *,
    clusters: Sequence[Hashable] | ArrayLike | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> float:
    """The regression (true Δ = −MDE) that the gate's FAIL test detects with probability ``power``.

    This is the MDE to report on the scorecard. :func:`mde` / :func:`mde_paired` give the
    normal-theory (z_{1−α} + z_power)·SE, which overstates the power of the tests that
    :func:`paired_compare` actually runs (``p_regression``, one-sided ``alpha``; the
    non-inferiority margin plays no part in it). This function accounts, for data like
    ``base`` / ``head`` (aligned per-item scores, as for paired_compare), for:

    1. Discreteness. Exact McNemar and sign-flip tests on lumpy data (0/1 scores, means of k
       rollouts, cluster sums) reject with probability below alpha under H0, and so less often
       under the alternative too.
    2. Small samples. The sign-flip test behaves as a t-test with C − 1 degrees of freedom
       (C = items, or clusters): with 40 clusters the critical value is t_39, not z.
    3. The variance grows under the alternative. If an item's base arm scores 1 with
       probability p, lowering that by Δ_i changes the discordance P(base ≠ head) by exactly
       Δ_i·(2p − 1) (arms independent given the item), i.e. ρ·Δ on average, with ρ = 2·mean(base)
       − 1 when the drop is the same on every item (a logit shift, which concentrates it on
       middling items, gives a smaller ρ when mean(base) > 1/2). We use ρ̂ = 2·mean(base) − 1
       clipped to [0, 1], never assuming the discordance falls (ρ = 1 is the worst case: a
       regression that only turns passes into fails). For fractional scores only the
       within-item share φ of Var(d) responds (φ = 1/k for means of k rollouts), estimated as
       (mean d²/2) / (mean d²/2 + mean s(1 − s)) from the same data.

    Binary scores without clusters (exact McNemar): the exact power, summed over the binomial
    distribution of the discordant count with discordance ψ̂ + ρ̂·Δ (ψ̂ = observed discordant
    fraction), solved for ``power``. Otherwise (sign-flip on items or cluster sums): Δ = λ·SE,
    with SE² = SE₀²·(1 + φ̂(ρ̂Δ − Δ²)/var(d)) (scores scaled to [0, 1]; exact for 0/1 items,
    and assuming the drop is even across items otherwise), SE₀ the (clustered) SE paired_compare
    uses, and λ the t-test noncentrality giving ``power`` at the continuity-corrected critical
    value of the sign-flip test.

    Returns a positive effect on the score scale; ``math.inf`` when the test cannot reach the
    power at any possible effect (fewer than 5 items, or clusters, at alpha = .05). With no
    discordance at all (identical arms) the result is finite: it is the effect at which a
    regression that turns whole items (clusters) from pass to fail is detected. Takes about a
    millisecond for a few hundred items (under 30 ms at 200,000). Raises ValueError on a length
    mismatch, on no items, or on non-finite scores.
    """
    _check_alpha(alpha)
    _check_alpha(power, "power")
    b, h = _as_pair(base, head)
    n = int(b.size)
    if n == 0:
        raise ValueError("no items")
    d = h - b
    # Scores in [0, 1] (the usual case) are used as they are; any other range is mapped onto
    # [0, 1] by the smallest interval containing [0, 1] and the scores, and back at the end.
    low = min(0.0, float(b.min()), float(h.min()))
    width = max(1.0, float(b.max()), float(h.max())) - low
    rho = min(1.0, max(0.0, 2.0 * (float(b.mean()) - low) / width - 1.0))

    if clusters is None and _is_binary(b) and _is_binary(h):
        return _mcnemar_mde(n, float(np.mean(d != 0.0)), rho, alpha, power)

    if clusters is not None:
        codes, n_units = _cluster_codes(clusters, n)
        units = np.bincount(codes, weights=d, minlength=n_units)
        se0 = _clustered_se(d, codes, n_units)
    else:
        units, n_units, se0 = d, n, _plain_se(d)
    var_d = float(d.var(ddof=1)) if n > 1 else 0.0
    sum_sq = float(np.sum(units**2))
    if n_units < 2 or not (se0 > 0.0 and var_d > 0.0 and sum_sq > 0.0):
        # Nothing to scale (no differences, or none that survive summing by cluster): take the
        # worst-case shape, a regression that turns whole units from full marks to none. Then
        # the exact sign-flip test is the sign test on the hit units, as McNemar with ψ0 = 0.
        return width * _mcnemar_mde(n_units, 0.0, 0.0, alpha, power)

    sps = _scipy_stats()
    # Discreteness: the sign-flip sum T = Σ ε_u·e_u lives on a lattice of step 2g (g the
    # grid of the |e_u|); with the critical value at a random offset on that lattice, the test
    # rejects on average as a continuity-corrected normal test with z raised by half a step,
    # g / sqrt(Σ e²) (Yates 1934; Cox 1970, Biometrika 57:217). 0 for continuous scores.
    crit = float(sps.norm.isf(alpha)) + _lattice_step(units) / math.sqrt(sum_sq)
    if crit * crit >= n_units:  # S = Σe/sqrt(Σe²) ≤ sqrt(C): the test cannot reject
        return math.inf
    # Sign-flip ≈ t-test: S ≥ c ⇔ t ≥ c·sqrt((C − 1)/(C − c²)) exactly, t the one-sample t of
    # the C units (Efron 1969, JASA 64:1278); the permutation test has the t-test's power to
    # first order (Lehmann & Romano 2005, Testing Statistical Hypotheses, §15.2).
    df = n_units - 1
    t_crit = crit * math.sqrt(df / (n_units - crit * crit))
    # Noncentrality λ with P(noncentral t_df(λ) > t_crit) = power, by the normal approximation
    # of Abramowitz & Stegun (1964) 26.7.10.
    lam = t_crit * (1.0 - 1.0 / (4.0 * df)) + float(sps.norm.ppf(power)) * math.sqrt(
        1.0 + t_crit * t_crit / (2.0 * df)
    )
    # Variance under the alternative, on the [0, 1] scale: Var(d) changes by φ(ρΔ − Δ²) +
    # (1 − φ)·Var(Δ_i); the last term (uneven drops across fractional items) is dropped.
    u_b, u_h, u_d = (b - low) / width, (h - low) / width, d / width
    within = float(np.mean(u_d**2)) / 2.0
    spread = (float(np.mean(u_b * (1.0 - u_b))) + float(np.mean(u_h * (1.0 - u_h)))) / 2.0
    phi = within / (within + spread)  # > 0: d is not all zero here
    # Solve Δ² = s²·(1 + φ(width·ρ·Δ − Δ²)/var_d), s = λ·SE₀, for its positive root.
    s2 = (lam * se0) ** 2
    quad = 1.0 + s2 * phi / var_d
    lin = s2 * phi * width * rho / var_d
    delta = (lin + math.sqrt(lin * lin + 4.0 * quad * s2)) / (2.0 * quad)
    return delta if delta < width else math.inf


# --------------------------------------------------------------------------- pass@k


def _check_nck(n: int, c: int, k: int) -> tuple[int, int, int]:
    n, c, k = operator.index(n), operator.index(c), operator.index(k)
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"need n ≥ 1 and 0 ≤ c ≤ n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 ≤ k ≤ n, got k={k}, n={n}")
    return n, c, k


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021, arXiv 2107.03374).

    1 − C(n−c, k)/C(n, k), as the product 1 − Π_{i=n−c+1}^{n} (1 − k/i) to avoid huge binomials.
    """
    n, c, k = _check_nck(n, c, k)
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k = C(c, k)/C(n, k): chance that k draws are all correct (Yao et al. 2024, τ-bench)."""
    n, c, k = _check_nck(n, c, k)
    if c < k:
        return 0.0
    j = np.arange(k)
    return float(np.prod((c - j) / (n - j)))


# --------------------------------------------------------------------------- sequential


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
