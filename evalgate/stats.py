"""Paired statistics for gating a pull request on per-item eval results.

Pure functions: estimates with confidence intervals, the paired PR-vs-base comparison, the
three-valued verdict, Holm's multiplicity correction, minimum detectable effects, pass@k /
pass^k, and group-sequential (O'Brien-Fleming) stopping with deterministic curtailment.

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

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize
from scipy import stats as sps

__all__ = [
    "Estimate",
    "PairedResult",
    "curtailed",
    "holm",
    "item_scores",
    "look_sizes",
    "mde",
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
        z = float(sps.norm.ppf(1.0 - alpha / 2.0))
        denom = 1.0 + z * z / n
        centre = (mean + z * z / (2.0 * n)) / denom
        half = z / denom * math.sqrt(mean * (1.0 - mean) / n + z * z / (4.0 * n * n))
        lo, hi = centre - half, centre + half
        # All right (or all wrong): the Wilson bound is exactly 1 (0); avoid 0.9999999999999999.
        lo, hi = (0.0 if mean == 0.0 else lo), (1.0 if mean == 1.0 else hi)
    elif df >= 1 and math.isfinite(se):
        t = float(sps.t.ppf(1.0 - alpha / 2.0, df))
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
    p = sps.binom.sf(b_arr - 1.0, np.maximum(n_disc, 1.0), 0.5)
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
    return sps.norm.sf((delta + margin) / se)


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
        z = float(sps.norm.ppf(1.0 - alpha))
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
        t = float(sps.t.ppf(1.0 - alpha, df))
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
    z_final = float(sps.norm.ppf(1.0 - alpha))
    if looks == 1:
        return [z_final]
    # Bracket: c = z_{1−α} crosses with prob ≥ α at the last look alone; c = z_{1−α/K} crosses
    # with prob ≤ α by Bonferroni.
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
    final_alpha = float(sps.norm.sf(bounds[-1]))
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
