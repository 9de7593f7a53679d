"""Minimum detectable effects: the normal-theory formula, and the one calibrated to the
gate's own tests (:func:`mde_for_test`, what the scorecard reports)."""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Sequence
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from evalgate.stats._brent import brentq
from evalgate.stats._common import (
    _as_pair,
    _check_alpha,
    _cluster_codes,
    _clustered_se,
    _is_binary,
    _plain_se,
    _scipy_stats,
)
from evalgate.stats._exact_regions import regression_edge

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


def _exact_mde(
    n: int, psi0: float, rho: float, alpha: float, power: float, edge: np.ndarray
) -> float:
    """Smallest Δ at which the exact unconditional test on n pairs rejects with ``power``.

    Cells: p_b = P(base 1, head 0), p_c = P(base 0, head 1), with p_b − p_c = Δ and the
    discordance ψ = p_b + p_c = psi0 + rho·Δ (see mde_for_test), at least Δ (p_c ≥ 0). The
    number of discordant pairs is M ~ Binomial(n, ψ) and b | M ~ Binomial(M, p_b/ψ), so the
    power is Σ_m P(M = m)·P(b ≥ b*(m) | m), with b*(m) the rejection edge of the gate's exact
    unconditional test (``edge``; Suissa & Shuster 1991, Biometrics 47:361).
    Only m within 8 SD of nψ is summed (the rest is negligible).
    Returns inf when no Δ ≤ 1 reaches the power (too few pairs for the test ever to reject).
    """
    from scipy import special  # lazy, like scipy.stats (see _scipy_stats)

    crit = edge  # b*(m), the smallest b the test rejects with m discordant pairs

    def shortfall(delta: float) -> float:
        psi = min(1.0, max(delta, psi0 + rho * delta))
        if psi <= 0.0:
            return -power
        spread = 8.0 * math.sqrt(n * psi * (1.0 - psi)) + 1.0
        first, last = max(0, math.floor(n * psi - spread)), min(n, math.ceil(n * psi + spread))
        m = np.arange(first, last + 1, dtype=float)
        known = crit[first : last + 1]
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
    return brentq(shortfall, lo, hi, xtol=1e-6 * lo, rtol=1e-6)


def mde_for_test(
    base: ArrayLike,
    head: ArrayLike,
    *,
    clusters: Sequence[Hashable] | ArrayLike | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> float:
    """The regression (true Δ = −MDE) that the gate's FAIL test detects with probability ``power``.

    This is the MDE the scorecard reports. :func:`mde` / :func:`mde_paired` give the
    normal-theory (z_{1−α} + z_power)·SE, which overstates the power of the tests that
    :func:`paired_compare` runs (``p_regression`` at one-sided ``alpha``). This function
    accounts, for data like ``base`` / ``head`` (aligned per-item scores), for:

    1. Discreteness: exact and sign-flip tests on lumpy data reject with probability below
       alpha under H0, and so less often under the alternative too.
    2. Small samples: the sign-flip test behaves as a t-test with C − 1 degrees of freedom
       (C = items, or groups).
    3. How the variance grows under the alternative. The assumption (stated on the
       scorecard): the regression only lowers items' scores, by the same amount on every item
       (uniform) or in proportion to each item's score (proportional), or anything between.
       Lowering an item's pass rate p by Δ_i changes the discordance P(base ≠ head) by
       Δ_i·(2p − 1) ≤ |Δ_i|, so ψ = ψ̂ + ρΔ with ρ = 1 bounds every such drop (the "PR only
       breaks items" corner attains it). For fractional scores the within-item share φ of
       Var(d) grows by at most φ(|Δ| − Δ²) and the spread of a proportional drop across
       items adds (1 − φ)·Δ²·(1 − p̄)/p̄ (Var(p_i) ≤ p̄(1 − p̄)); both are included.
    4. Groups: the gate FAILs grouped data only when the item test and the group sign-flip both
       reject, so the MDE is the larger of the two.

    Binary scores: the exact power of the exact unconditional test, summed over the binomial
    distribution of the discordant count, solved for ``power``. Otherwise: Δ = λ·SE(Δ) with λ
    the t-test noncentrality giving ``power`` at the continuity-corrected critical value of the
    sign-flip test. Returns a positive effect on the score scale; ``math.inf`` when the test
    cannot reach the power at any effect (too few items or groups). Raises ValueError on a
    length mismatch, on no items, or on non-finite scores.
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
    scaled = ((b - low) / width, (h - low) / width)
    if _is_binary(b) and _is_binary(h):
        item = _exact_mde(n, float(np.mean(d != 0.0)), 1.0, alpha, power, regression_edge(n, alpha))
    else:
        item = width * _sign_flip_mde(
            d / width, d / width, _plain_se(d) / width, scaled, alpha, power
        )
    if clusters is None:
        return item
    codes, n_units = _cluster_codes(clusters, n)
    units = np.bincount(codes, weights=d, minlength=n_units) / width
    se0 = _clustered_se(d, codes, n_units) / width
    group = _sign_flip_mde(units, d / width, se0, scaled, alpha, power)
    return max(item, width * group)


def _sign_flip_mde(
    units: np.ndarray,
    d: np.ndarray,
    se0: float,
    scaled: tuple[np.ndarray, np.ndarray],
    alpha: float,
    power: float,
) -> float:
    """MDE of the sign-flip regression test on ``units`` (item differences or group sums),
    everything on the [0, 1] score scale; see :func:`mde_for_test`."""
    n_units, n = units.size, d.size
    var_d = float(d.var(ddof=1)) if n > 1 else 0.0
    sum_sq = float(np.sum(units**2))
    if n_units < 2 or not (se0 > 0.0 and var_d > 0.0 and sum_sq > 0.0):
        # Nothing to scale (no differences, or none that survive summing by group): take the
        # worst-case shape, a regression that turns whole units from full marks to none. Then
        # the sign-flip test is the sign test on the hit units (conditional McNemar, ψ0 = 0).
        edge = _mcnemar_critical(np.arange(n_units + 1, dtype=float), alpha)
        return _exact_mde(n_units, 0.0, 0.0, alpha, power, edge)
    u_b, u_h = scaled
    within = float(np.mean(d**2)) / 2.0
    spread = (float(np.mean(u_b * (1.0 - u_b))) + float(np.mean(u_h * (1.0 - u_h)))) / 2.0
    phi = within / (within + spread)  # > 0: d is not all zero here
    p_bar = min(max(float(np.mean(u_b)), 0.05), 1.0)
    kappa = (1.0 - phi) * (1.0 - p_bar) / p_bar
    if n_units <= _ENUMERATED_UNITS:
        # Var(Δ_u) of a proportional drop is Δ²·Var(p_u)/p̄² ≤ Δ²(1 − p̄)/p̄: with this few
        # units an estimate of Var(p_u) would be too noisy to promise the power, so the bound.
        return _few_units_mde(units, n, var_d, phi, (1.0 - p_bar) / p_bar, alpha, power)
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
    # Noncentrality λ with P(noncentral t_df(λ) > t_crit) = power (Abramowitz & Stegun 26.7.10).
    lam = t_crit * (1.0 - 1.0 / (4.0 * df)) + float(sps.norm.ppf(power)) * math.sqrt(
        1.0 + t_crit * t_crit / (2.0 * df)
    )
    # Var(d) under the alternative: var_d + φ(Δ − Δ²) + κΔ² (see mde_for_test, point 3).
    # Solve Δ² = s²·(1 + (φΔ + (κ − φ)Δ²)/var_d), s = λ·SE₀, for its positive root.
    s2 = (lam * se0) ** 2
    quad = 1.0 - s2 * (kappa - phi) / var_d
    lin = s2 * phi / var_d
    if quad <= 0.0:
        return math.inf
    delta = (lin + math.sqrt(lin * lin + 4.0 * quad * s2)) / (2.0 * quad)
    return delta if delta < 1.0 else math.inf


# Up to this many units the sign-flip test's power is computed over every sign pattern (the t
# approximation understates the MDE of, e.g., 5 groups, where only "all 5 negative" rejects).
_ENUMERATED_UNITS = 10
_POWER_DRAWS = 500


def _few_units_mde(
    units: np.ndarray,
    n: int,
    var_d: float,
    phi: float,
    spread_bound: float,
    alpha: float,
    power: float,
) -> float:
    """MDE of the enumerated sign-flip test on G ≤ _ENUMERATED_UNITS unit sums, by a seeded
    Monte-Carlo power over normal unit sums e_u ~ N(−Δ·m_u, v_u(Δ)).

    v_u(Δ) = s²·(1 + φ(Δ − Δ²)/var d) + m_u²·Δ²·spread_bound: the units' observed spread s²
    with the within-item growth of the alternative, plus the spread a proportional drop puts
    between the units' means, Var(Δ_u) = Δ²·Var(p_u)/p̄² (see mde_for_test).
    """
    n_units = units.size
    sizes = np.full(n_units, n / n_units)  # equal shares: the spread below is per unit anyway
    spread = float(np.var(units, ddof=1)) if n_units > 1 else 0.0
    if n_units < 2 or spread <= 0.0:
        return math.inf
    patterns = 1.0 - 2.0 * ((np.arange(1 << n_units)[:, None] >> np.arange(n_units)) & 1)
    draws = np.random.default_rng(0).standard_normal((_POWER_DRAWS, n_units))
    allowed = math.floor(alpha * (1 << n_units) + 1e-9)  # patterns at or above T, at most

    def reached(delta: float) -> float:
        within = spread * max(1.0 + phi * (delta - delta * delta) / var_d, 0.0)
        sd = np.sqrt(within + (sizes * delta) ** 2 * spread_bound)
        t = delta * sizes - draws * sd  # −e: large when the PR regressed
        above = np.count_nonzero(t @ patterns.T >= t.sum(axis=1)[:, None] - 1e-12, axis=1)
        return float(np.mean(above <= allowed)) - power

    if allowed < 1 or reached(1.0) < 0.0:
        return math.inf
    return brentq(reached, 0.0, 1.0, xtol=1e-3)
