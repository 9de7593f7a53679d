"""Minimum detectable effects: the normal-theory formula, and the one calibrated to the
gate's own tests (:func:`mde_for_test`, what the scorecard reports)."""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Sequence
from fractions import Fraction

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
