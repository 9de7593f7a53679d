"""Tests for evalgate.stats: worked examples from the statistics notes, exact enumerations, edges.

Reference figures are copied from the design notes (statistics.md) on purpose: the notes do not
ship with the package, so nothing here reads them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from evalgate import stats
from evalgate.stats import (
    Design,
    Estimate,
    PairedResult,
    _exact,
    _exact_regions,
    holm,
    item_scores,
    look_sizes,
    mde,
    mde_for_test,
    mde_paired,
    mean_ci,
    obrien_fleming_bounds,
    paired_compare,
    pass_at_k,
    pass_hat_k,
    sequential_compare,
    sequential_decision,
    verdict,
)


def binary_pair(b: int, c: int, both_right: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-item 0/1 arrays with b (base 1, head 0) and c (base 0, head 1) discordant pairs."""
    both_wrong = n - both_right - b - c
    assert both_wrong >= 0
    base = np.r_[np.ones(both_right), np.ones(b), np.zeros(c), np.zeros(both_wrong)]
    head = np.r_[np.ones(both_right), np.zeros(b), np.ones(c), np.zeros(both_wrong)]
    return base, head


def notes_example(b: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    # Notes: n = 200, base 140/200, PR 132/200, so b − c = 8 and both-right = 140 − b.
    base, head = binary_pair(b, c, 140 - b, 200)
    assert base.sum() == 140 and head.sum() == 132
    return base, head


def brute_sign_flip(units: np.ndarray) -> float:
    """Exact one-sided ("greater") sign-flip p-value of sum(units) over all 2^n patterns."""
    signs = np.array(list(itertools.product([1.0, -1.0], repeat=units.size)))
    flipped = signs @ units
    return float(np.mean(flipped >= units.sum() - 1e-9))


def test_public_surface() -> None:
    for name in stats.__all__:
        assert hasattr(stats, name), name


# --------------------------------------------------------------------------- item_scores


def test_item_scores_ragged_and_dense() -> None:
    out = item_scores([[1, 0, 1, 1], [0.5], [0, 0]])
    np.testing.assert_allclose(out, [0.75, 0.5, 0.0])
    np.testing.assert_allclose(item_scores(np.array([[1.0, 0.0], [1.0, 1.0]])), [0.5, 1.0])
    assert item_scores([]).shape == (0,)


@pytest.mark.parametrize("bad", [[[1, 0], []], [[1, float("nan")]]])
def test_item_scores_rejects_empty_or_nan_items(bad: list[list[float]]) -> None:
    with pytest.raises(ValueError):
        item_scores(bad)


# --------------------------------------------------------------------------- mean_ci


def test_mean_ci_t_interval_matches_scipy() -> None:
    s = np.array([0.2, 0.4, 0.45, 0.6, 0.9, 0.75])
    est = mean_ci(s, alpha=0.1)
    lo, hi = sps.t.interval(0.9, df=s.size - 1, loc=s.mean(), scale=sps.sem(s))
    assert est.method == "t"
    assert est.se == pytest.approx(sps.sem(s), rel=1e-12)
    assert (est.lo, est.hi) == pytest.approx((lo, hi), rel=1e-12)


def test_mean_ci_wilson_for_binary() -> None:
    # Wilson (1927) 95 % interval for 7/10, a textbook value (Newcombe 1998, Stat Med 17:857).
    est = mean_ci([1] * 7 + [0] * 3)
    assert est.method == "wilson"
    assert (est.lo, est.hi) == pytest.approx((0.3968, 0.8922), abs=1e-4)
    # 10/10 correct: Wald would give a zero-width interval; Wilson does not.
    est = mean_ci([1] * 10)
    assert est.hi == 1.0 and est.lo == pytest.approx(0.7225, abs=1e-4)


def test_mean_ci_clustered_se_by_hand() -> None:
    s = np.array([1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 0.25])
    groups = ["a", "a", "b", "b", "b", "c", "c"]
    centred = s - s.mean()
    sums = [centred[:2].sum(), centred[2:5].sum(), centred[5:].sum()]
    expected = math.sqrt(sum(x * x for x in sums)) / s.size * math.sqrt(3 / 2)
    est = mean_ci(s, clusters=groups)
    assert est.method == "cluster-t" and est.n_clusters == 3
    assert est.se == pytest.approx(expected, rel=1e-12)
    t = sps.t.ppf(0.975, 2)
    assert est.lo == pytest.approx(max(0.0, s.mean() - t * expected), rel=1e-12)
    assert est.hi == pytest.approx(min(1.0, s.mean() + t * expected), rel=1e-12)


def test_mean_ci_singleton_clusters_equal_plain_se() -> None:
    s = np.random.default_rng(3).random(40)
    assert mean_ci(s, clusters=range(40)).se == pytest.approx(mean_ci(s).se, rel=1e-12)


def test_mean_ci_clips_only_unit_interval_scores() -> None:
    assert mean_ci([0.0, 0.05, 0.0, 0.9]).lo == 0.0
    graded = mean_ci([-1.0, 2.0, 0.5])
    assert graded.lo < 0.0 and graded.hi > 1.0


def test_mean_ci_degenerate_sizes() -> None:
    empty = mean_ci([])
    assert empty.n == 0 and all(math.isnan(v) for v in (empty.mean, empty.se, empty.lo, empty.hi))
    one = mean_ci([0.4])
    assert one.n == 1 and one.mean == 0.4
    assert all(math.isnan(v) for v in (one.se, one.lo, one.hi))
    with pytest.raises(ValueError):
        mean_ci([0.1, 0.2], clusters=["a"])


# --------------------------------------------------------------------------- paired, binary


def brute_unconditional_p(b: int, c: int, n: int, d0: float, grid: int = 801) -> float:
    """Independent brute force of the exact unconditional p of H0: Δ ≤ d0 (large z rejects).

    Every table (x, y, n − x − y); Tango's z from a numerically maximised restricted likelihood;
    the tail {z ≥ z_obs} summed with multinomial probabilities; sup over a fine ψ grid.
    """
    from scipy import optimize

    def z_of(x: int, y: int) -> float:
        low, high = max(0.0, -d0) + 1e-12, (1.0 - d0) / 2.0 - 1e-12

        def nll(pb: float) -> float:
            pc, rest = pb + d0, 1.0 - 2.0 * pb - d0
            return -(
                x * math.log(pb) + y * math.log(max(pc, 1e-300)) + (n - x - y) * math.log(rest)
            )

        pb = optimize.minimize_scalar(
            nll, bounds=(low, high), method="bounded", options={"xatol": 1e-12}
        ).x
        var = (2 * pb + d0 - d0 * d0) / n
        num = (y - x) / n - d0
        return (
            num / math.sqrt(var)
            if var > 1e-15
            else (0.0 if abs(num) < 1e-12 else math.copysign(math.inf, num))
        )

    tables = [(x, y) for x in range(n + 1) for y in range(n + 1 - x)]
    z = np.array([z_of(x, y) for x, y in tables])
    z_obs = z_of(b, c)
    region = np.array(tables)[z >= z_obs - 1e-7]
    best = 0.0
    for psi in np.linspace(abs(d0), 1.0, grid):
        pb, pc = (psi - d0) / 2.0, (psi + d0) / 2.0
        probs = sps.multinomial.pmf(
            np.column_stack([region, n - region.sum(axis=1)]), n, [pb, pc, max(0.0, 1 - psi)]
        )
        best = max(best, float(np.nansum(probs)))
    return best


@pytest.mark.parametrize(("b", "c", "d0"), [(3, 0, -0.1), (0, 0, -0.1), (5, 2, 0.0), (2, 6, 0.05)])
def test_exact_unconditional_p_matches_brute_force(b: int, c: int, d0: float) -> None:
    assert _exact.p_greater(b, c, 30, d0) == pytest.approx(
        brute_unconditional_p(b, c, 30, d0), abs=2e-3
    )


def test_score_z_falls_in_b_for_fixed_discordance() -> None:
    # _region_edge's binary search relies on it, over the whole (b, m) triangle.
    for n in (20, 200):
        for d0 in np.linspace(-0.95, 0.95, 39):
            m = np.arange(n + 1)[:, None]
            b = np.minimum(np.arange(n + 1)[None, :], m)
            z = _exact.score_z(b, m - b, n, float(d0))
            assert np.all(np.diff(z, axis=1) <= 1e-9), (n, d0)


@pytest.mark.parametrize(("b", "c"), [(26, 18), (12, 4), (34, 26), (17, 9)])
def test_worked_examples_same_verdicts_as_the_notes(b: int, c: int) -> None:
    # The notes quote conditional McNemar p; the gate's unconditional test is a little more
    # powerful (p below McNemar's here) and FAILs exactly where the notes' p ≤ .05 does.
    base, head = notes_example(b, c)
    res = paired_compare(base, head, Design(margin=0.05))
    assert res.method == "exact-unconditional"
    assert res.discordant == (b, c)
    assert res.n == 200 and res.delta == pytest.approx(-0.04)
    assert (res.base_mean, res.head_mean) == pytest.approx((0.70, 0.66))
    mcnemar = sps.binomtest(b, b + c, 0.5, alternative="greater").pvalue
    assert res.p_regression <= mcnemar
    assert (res.p_regression <= 0.05) == (mcnemar <= 0.05)


def test_worked_example_noninferiority_and_verdict() -> None:
    base, head = notes_example(26, 18)
    res = paired_compare(base, head, Design(margin=0.05, alpha=0.05))
    assert res.p_noninferiority == pytest.approx(0.455, abs=5e-3)  # notes (Wald): 0.38
    assert res.se == pytest.approx(math.sqrt((44 / 200 - 0.04**2) / 200), rel=1e-12)
    assert verdict(res, margin=0.05, alpha=0.05) == "INCONCLUSIVE"
    assert res.lo <= -0.05 and res.hi >= 0.0
    # Only 12/4 reaches significance: a FAIL.
    assert verdict(paired_compare(*notes_example(12, 4), Design(margin=0.05))) == "FAIL"


@pytest.mark.slow
def test_verdict_and_bounds_agree_for_every_small_table() -> None:
    # Every (b, c) with b, c ≤ 12 at n = 200, δ = 3 pp: PASS ⇔ lo > −δ, FAIL ⇔ hi < 0 (and not
    # PASS), and the bounds are the inverted tests: the bound itself and points beyond it are
    # rejected, a point inside it is not.
    for b, c in itertools.product(range(13), range(13)):
        res = paired_compare(*binary_pair(b, c, 120, 200), Design(margin=0.03, alpha=0.05))
        got = verdict(res)
        assert (got == "PASS") == (res.lo > -0.03), (b, c, res)
        assert (got == "FAIL") == (res.hi < 0.0 and res.lo <= -0.03), (b, c, res)
        assert res.lo <= res.delta <= res.hi, (b, c)
        # A discrete test's p(Δ0) is not quite monotone: pockets narrower than the 0.1 pp probe
        # step beyond a bound may exceed α by a few % of α; at the probes it never does.
        for beyond, slack in ((0.0, 1.0), (4e-4, 1.05), (1e-3, 1.0), (2e-3, 1.0), (1e-2, 1.0)):
            assert _exact.p_greater(b, c, 200, res.lo - beyond) <= 0.05 * slack, (b, c, beyond)
            assert _exact.p_less(b, c, 200, res.hi + beyond) <= 0.05 * slack, (b, c, beyond)
        assert _exact.p_greater(b, c, 200, res.lo + 2e-3) > 0.05 or res.lo > -0.03
        assert _exact.p_less(b, c, 200, res.hi - 2e-3) > 0.05 or res.hi < 0.0
    # The tables: 3/0 is a significant regression, never a PASS.
    three = paired_compare(*binary_pair(3, 0, 137, 200), Design(margin=0.03))
    assert verdict(three) == "FAIL" and three.hi < 0.0 and three.lo < -0.03


@pytest.mark.slow  # a long simulation: CI's slow step runs it (issue #39)
def test_pr_that_only_breaks_items_passes_at_most_alpha() -> None:
    # Each passing item fails with probability δ / mean: true Δ = −δ, c = 0. Exact over b: PASS
    # happens for b up to some b_max (fewer breaks, more evidence), so P(PASS) = P(b ≤ b_max).
    for n, passing in ((50, 35), (200, 140), (500, 350)):
        rate = 0.03 * n / passing
        b_max = -1
        while verdict(paired_compare(*binary_pair(b_max + 1, 0, passing - b_max - 1, n))) == "PASS":
            b_max += 1
        assert verdict(paired_compare(*binary_pair(b_max + 2, 0, passing - b_max - 2, n))) != "PASS"
        assert sps.binom.cdf(b_max, passing, rate) <= 0.05, (n, b_max)


def test_binary_no_discordant_pairs() -> None:
    base, head = binary_pair(0, 0, 150, 200)
    res = paired_compare(base, head, Design(margin=0.03))
    assert res.p_regression == 1.0 and res.discordant == (0, 0)
    assert res.lo < 0.0 < res.hi  # not a zero-width interval
    assert verdict(res) == "PASS"  # 200 identical items are non-inferior at 3 pp
    tiny = paired_compare(np.ones(5), np.ones(5), Design(margin=0.03))
    assert verdict(tiny) == "INCONCLUSIVE"  # ...but 5 identical items prove nothing
    twenty = paired_compare(np.ones(20), np.ones(20), Design(margin=0.03))
    assert verdict(twenty) == "INCONCLUSIVE" and twenty.lo <= -0.03


# --------------------------------------------------------------------------- paired, permutation


def test_permutation_exact_matches_enumeration_n10() -> None:
    rng = np.random.default_rng(7)
    base = rng.random(10)
    head = np.clip(base - 0.08 + rng.normal(0, 0.15, 10), 0, 1)
    res = paired_compare(base, head, Design(margin=0.05))
    d = head - base
    assert res.method == "betting / sign-flip-permutation" and res.exact
    assert res.n_resamples == 2**10
    assert res.p_regression == pytest.approx(brute_sign_flip(-d), abs=1e-12)
    # The upper bound inverts the same enumeration: beyond it the test rejects, inside not.
    for shift, expect in ((res.hi + 1e-6, True), (res.hi - 1e-6, False)):
        assert (brute_sign_flip(shift - d) <= 0.05) == expect


def test_permutation_monte_carlo_close_to_enumeration() -> None:
    rng = np.random.default_rng(11)
    base = rng.beta(2, 2, 14)
    head = np.clip(base - 0.05 + rng.normal(0, 0.12, 14), 0, 1)
    res = paired_compare(base, head, Design(margin=0.03, n_resamples=10_000, seed=1))
    d = head - base
    assert not res.exact and res.n_resamples == 10_000
    # MC SE ≤ 0.005 at R = 10,000; 0.02 is four of them.
    assert res.p_regression == pytest.approx(brute_sign_flip(-d), abs=0.02)


def test_permutation_counts_tied_statistics() -> None:
    # k = 4 rollouts: scores are multiples of 1/4, so flipped sums tie with the observed one.
    base = np.array([0.75, 0.5, 1.0, 0.25, 0.5, 0.75])
    head = np.array([0.5, 0.5, 0.75, 0.5, 0.25, 0.75])
    res = paired_compare(base, head)
    assert res.p_regression == pytest.approx(brute_sign_flip(base - head), abs=1e-12)


def test_seeded_reproducibility() -> None:
    rng = np.random.default_rng(5)
    base, head = rng.random(300), rng.random(300)
    first = paired_compare(base, head, Design(seed=42))
    assert paired_compare(base, head, Design(seed=42)) == first
    other = paired_compare(base, head, Design(seed=43))
    assert other.p_regression != first.p_regression
    assert other.p_regression == pytest.approx(first.p_regression, abs=0.03)


def test_clustered_permutation_treats_cluster_as_one_unit() -> None:
    rng = np.random.default_rng(2)
    base = rng.random(40)
    head = np.clip(base - 0.04 + rng.normal(0, 0.2, 40), 0, 1)
    plain = paired_compare(base, head, Design(margin=0.03, seed=9))
    # Every item duplicated, the copy in its original's cluster: the same 40 units, each doubled.
    twins = np.repeat(np.arange(40), 2)
    dup = paired_compare(
        np.repeat(base, 2), np.repeat(head, 2), Design(margin=0.03, seed=9), clusters=twins
    )
    assert dup.method == "cluster-sign-flip-permutation" and dup.n_clusters == 40
    assert dup.p_regression == plain.p_regression
    assert dup.delta == pytest.approx(plain.delta)
    assert dup.se == pytest.approx(plain.se, rel=1e-12)
    # Ignoring the clusters double-counts the evidence: SE shrinks by ~sqrt(2), p shrinks.
    naive = paired_compare(np.repeat(base, 2), np.repeat(head, 2), Design(margin=0.03, seed=9))
    assert naive.se < 0.75 * plain.se
    assert naive.p_regression < plain.p_regression


def test_clustered_permutation_exact_and_label_invariant() -> None:
    rng = np.random.default_rng(4)
    sizes = [1, 3, 2, 5, 1, 4, 2, 3]
    ids = np.repeat(np.arange(len(sizes)), sizes)
    base = rng.random(ids.size)
    head = np.clip(base + rng.normal(-0.05, 0.2, ids.size), 0, 1)
    sums = np.bincount(ids, weights=head - base)
    flip = stats._paired._sign_flip(sums, np.array(sizes, float), 0.02, 0.05, 10_000, 0)
    assert flip.exact and flip.used == 2**8
    assert flip.p_reg == pytest.approx(brute_sign_flip(-sums), abs=1e-12)
    assert flip.p_ni == pytest.approx(brute_sign_flip(sums + 0.02 * np.array(sizes)), abs=1e-12)
    res = paired_compare(base, head, Design(margin=0.02), clusters=ids)
    assert res.n_clusters == 8 and res.p_regression >= flip.p_reg
    assert "few groups (8 < 20)" in res.note
    names = np.array([f"passage-{i}" for i in ids])
    assert paired_compare(base, head, Design(margin=0.02), clusters=names) == res


def test_few_identical_groups_are_not_a_pass() -> None:
    # The quickstart's capitals: 20 items in 5 groups, two identical runs. Δ = 0 with zero
    # variance is no evidence; the sign-flip's 1/32 must not make it a PASS.
    base = np.r_[np.ones(17), np.zeros(3)]
    res = paired_compare(base, base.copy(), Design(margin=0.03), clusters=np.arange(20) // 4)
    assert verdict(res) == "INCONCLUSIVE" and res.lo <= -0.03
    assert "few groups (5 < 20)" in res.note
    # A group column never makes the gate more lenient than the same items ungrouped.
    rng = np.random.default_rng(3)
    for _ in range(30):
        b = (rng.random(200) < 0.7).astype(float)
        h = np.where(rng.random(200) < 0.05, 1 - b, b)
        plain = paired_compare(b, h, Design(margin=0.03))
        for g in (5, 40):
            grouped = paired_compare(
                b, h, Design(margin=0.03), clusters=np.arange(200) // (200 // g)
            )
            assert grouped.lo <= plain.lo and grouped.hi >= plain.hi
            assert not (verdict(grouped) == "PASS" and verdict(plain) != "PASS")


def test_binary_with_clusters_uses_cluster_permutation() -> None:
    base, head = binary_pair(10, 4, 50, 80)
    res = paired_compare(base, head, clusters=np.arange(80) // 4)
    assert res.method == "cluster-sign-flip-permutation"
    assert res.discordant == (10, 4)


def test_permutation_fast_enough_shape() -> None:
    # 10,000 resamples x 500 items runs chunked; just check it completes and is sane.
    rng = np.random.default_rng(0)
    res = paired_compare(rng.random(500), rng.random(500))
    assert 0.0 < res.p_regression <= 1.0 and res.n_resamples == 10_000


def test_all_zero_differences() -> None:
    s = np.array([0.25, 0.5, 0.75, 1.0, 0.5])
    res = paired_compare(s, s.copy(), Design(margin=0.03))
    assert res.p_regression == 1.0
    assert verdict(res) == "INCONCLUSIVE" and res.lo <= -0.03  # no variance is no evidence
    assert res.delta == 0.0 and res.se == 0.0
    many = np.tile(s, 60)  # 300 identical fractional items: the betting bound does PASS
    assert verdict(paired_compare(many, many.copy(), Design(margin=0.03))) == "PASS"


@pytest.mark.slow  # a long simulation: CI's slow step runs it (issue #39)
def test_betting_bound_holds_alpha_when_a_pr_breaks_a_few_rollouts() -> None:
    # k = 4, the PR replays the base's rollouts and breaks each passing one with probability f
    # (true Δ = −δ): d is 0 or negative, the corner where a sign-flip PASSes too often.
    rng = np.random.default_rng(8)
    n, k, runs = 50, 4, 300
    p = rng.uniform(0.3, 0.95, n)
    f = 0.03 / p.mean()
    passes = 0
    for r in range(runs):
        rollouts = rng.random((n, k)) < p[:, None]
        broken = rollouts & (rng.random((n, k)) >= f)
        res = paired_compare(rollouts.mean(1), broken.mean(1), Design(n_resamples=500, seed=r))
        passes += verdict(res) == "PASS"
        assert (verdict(res) == "PASS") == (res.lo > -0.03)
    assert passes / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)


def test_degenerate_inputs_raise() -> None:
    with pytest.raises(ValueError):
        paired_compare([], [])
    with pytest.raises(ValueError):
        paired_compare([0.1, 0.2], [0.1])
    with pytest.raises(ValueError):
        paired_compare([0.1, float("nan")], [0.1, 0.2])
    with pytest.raises(ValueError):
        paired_compare([0.1], [0.2], Design(margin=-0.01))
    with pytest.raises(ValueError):
        paired_compare([0.1, 0.2], [0.1, 0.2], clusters=[1])


def test_single_item_does_not_crash() -> None:
    res = paired_compare([0.5], [0.25])
    assert res.n == 1 and math.isnan(res.se)
    assert (res.lo, res.hi) == (-1.0, 1.0)  # one item bounds nothing
    assert res.p_regression == 0.5  # exact: 2 sign patterns
    assert verdict(res) == "INCONCLUSIVE"


# --------------------------------------------------------------------------- verdict, holm


def make_result(p_reg: float, p_ni: float, margin: float = 0.03) -> PairedResult:
    return PairedResult(
        n=100,
        base_mean=0.5,
        head_mean=0.5,
        delta=0.0,
        se=0.01,
        lo=-0.02,
        hi=0.02,
        p_regression=p_reg,
        p_noninferiority=p_ni,
        method="sign-flip-permutation",
        discordant=None,
        margin=margin,
        alpha=0.05,
    )


def test_verdict_three_values() -> None:
    assert verdict(make_result(0.9, 0.01), margin=0.03, alpha=0.05) == "PASS"
    assert verdict(make_result(0.01, 0.9), margin=0.03, alpha=0.05) == "FAIL"
    assert verdict(make_result(0.2, 0.2), margin=0.03, alpha=0.05) == "INCONCLUSIVE"
    # Both tests reject (tiny but real drop, inside the margin): non-inferior wins.
    assert verdict(make_result(0.01, 0.01)) == "PASS"
    assert verdict(make_result(0.04, 0.9), alpha=0.01) == "INCONCLUSIVE"
    with pytest.raises(ValueError):
        verdict(make_result(0.5, 0.5), margin=0.05)


def test_holm_hand_examples() -> None:
    # m = 4: 0.005 ≤ .0125 and 0.01 ≤ .0167 reject; 0.03 > .025 stops, so 0.04 is kept too.
    assert holm([0.01, 0.04, 0.03, 0.005], alpha=0.05) == [True, False, False, True]
    # Step-down stops early: Hochberg would reject both of these, Holm rejects neither.
    assert holm([0.03, 0.04]) == [False, False]
    assert holm([0.04, 0.011, 0.012]) == [True, True, True]
    assert holm([0.02, 0.02, 0.001, 0.5]) == [False, False, True, False]
    assert holm([]) == []
    with pytest.raises(ValueError):
        holm([0.1, float("nan")])


# --------------------------------------------------------------------------- MDE


@pytest.mark.parametrize(("discordant", "pp"), [(0.13, 6.3), (0.22, 8.2), (0.30, 9.6)])
def test_mde_notes_figures(discordant: float, pp: float) -> None:
    assert round(100 * mde(discordant, 200), 1) == pp
    k = round(discordant * 200 / 2)  # b = c, so Δ = 0 and var_d = discordant fraction
    base, head = binary_pair(k, k, 100, 200)
    assert round(100 * mde_paired(base, head), 1) == pp


def test_mde_unpaired_figure() -> None:
    # The notes' 11.6 pp uses the pooled rate of the worked example, (0.70 + 0.66) / 2 = 0.68;
    # p = 0.70 exactly gives 11.4 pp.
    assert round(100 * mde(2 * 0.68 * 0.32, 200), 1) == 11.6
    assert round(100 * mde(2 * 0.70 * 0.30, 200), 1) == 11.4


def test_mde_paired_fractional_and_clustered() -> None:
    rng = np.random.default_rng(8)
    base = rng.random(100)
    head = np.clip(base + rng.normal(0, 0.1, 100), 0, 1)
    d = head - base
    assert mde_paired(base, head) == pytest.approx(mde(float(d.var(ddof=1)), 100))
    clustered = mde_paired(base, head, clusters=np.arange(100) // 10)
    assert math.isfinite(clustered) and clustered > 0
    with pytest.raises(ValueError):
        mde(-1.0, 10)


# --------------------------------------------------------------------------- MDE of the gate's test


def exact_gate_power(n: int, p_b: float, p_c: float, alpha: float = 0.05) -> float:
    """Brute force: Σ over every (b, c) table of P(table)·[the gate's regression p ≤ alpha]."""
    total = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if _exact.p_less(b, c, n, 0.0) > alpha:
                continue
            rest = n - b - c
            ways = math.comb(n, b) * math.comb(n - b, c)
            total += ways * p_b**b * p_c**c * (1.0 - p_b - p_c) ** rest
    return total


@pytest.mark.parametrize("alpha", [0.05, 0.0415, 0.01])
def test_mcnemar_critical_values_are_the_gates(alpha: float) -> None:
    # mde_for_test's exact power sums over the critical b for each number m of discordant
    # pairs; they must be the b at which the gate's own p-value first drops to alpha.
    m = np.arange(0, 400)
    crit = stats._mcnemar_critical(m.astype(float), alpha)
    b_grid, m_grid = np.meshgrid(np.arange(401), m)  # every b ≤ m + 1 for every m
    p = stats._mcnemar_p(b_grid, m_grid - b_grid)
    rejects = (p <= alpha) & (b_grid <= m_grid)
    expected = np.where(rejects.any(axis=1), rejects.argmax(axis=1), m + 1)
    np.testing.assert_array_equal(crit, expected)


@pytest.mark.slow  # a long simulation: CI's slow step runs it (issue #39)
@pytest.mark.parametrize("both_right", [12, 21])
def test_mde_for_test_binary_is_exact_power(both_right: int) -> None:
    # n = 30, 3 + 3 discordant (ψ0 = 0.2). The MDE assumes the drop only adds b-type pairs
    # (ρ = 1: ψ = ψ0 + Δ, the worst case for any drop that only lowers items' pass rates).
    base, head = binary_pair(3, 3, both_right, 30)
    delta = mde_for_test(base, head)
    assert 0.0 < delta < 1.0

    def power_at(effect: float) -> float:
        psi = min(1.0, 0.2 + effect)
        return exact_gate_power(30, (psi + effect) / 2, (psi - effect) / 2)

    assert power_at(delta) == pytest.approx(0.8, abs=1e-6)
    assert power_at(0.97 * delta) < 0.8  # the smallest such effect, not just some root
    assert mde_for_test(base, head, power=0.9) > delta
    assert mde_for_test(base, head, alpha=0.01) > delta


def test_mde_for_test_zero_discordance_is_finite() -> None:
    # All 200 pairs agree: a regression can only show as new b pairs, and the gate's test
    # rejects b/0 from some b*, so the MDE solves P(Binomial(200, Δ) ≥ b*) = 0.8.
    base, head = binary_pair(0, 0, 140, 200)
    delta = mde_for_test(base, head)
    assert math.isfinite(delta) and 0.0 < delta < 0.1
    b_star = next(b for b in range(1, 50) if _exact.p_less(b, 0, 200, 0.0) <= 0.05)
    assert sps.binom.sf(b_star - 1, 200, delta) == pytest.approx(0.8, abs=1e-6)
    # Same for the sign-flip paths: identical graded scores, and clusters.
    graded = np.random.default_rng(1).random(200)
    assert 0.0 < mde_for_test(graded, graded) < 0.1
    clusters = np.arange(200) // 5
    assert 0.0 < mde_for_test(base, head, clusters=clusters) < 0.5
    # Differences that cancel inside every cluster leave no cluster-level variation either.
    base2, head2 = np.tile([1.0, 0.0], 100), np.tile([0.0, 1.0], 100)
    assert 0.0 < mde_for_test(base2, head2, clusters=np.arange(200) // 2) < 1.0


def test_mde_for_test_too_few_units_is_infinite() -> None:
    # 4 items: even b = 4, c = 0 is not significant at α = .05, so no effect reaches 80 %.
    base, head = binary_pair(1, 1, 1, 4)
    assert mde_for_test(base, head) == math.inf
    # 3 clusters: even all three flipped the same way give p = 1/8.
    s = np.linspace(0.1, 0.9, 9)
    assert mde_for_test(s, s[::-1], clusters=np.arange(9) // 3) == math.inf
    assert mde_for_test([0.5], [0.25]) == math.inf
    with pytest.raises(ValueError):
        mde_for_test([], [])
    with pytest.raises(ValueError):
        mde_for_test([1.0, 0.0], [1.0])
    with pytest.raises(ValueError):
        mde_for_test([1.0, 0.0], [1.0, 0.0], power=1.0)


def _fixtures(reps: int) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """Four kinds of run, each its 50 (or 40-cluster) items repeated ``reps`` times."""
    rng = np.random.default_rng(11)
    p = rng.uniform(0.2, 0.98, 50)
    k1 = (rng.random(50) < p).astype(float), (rng.random(50) < p).astype(float)
    k4 = rng.binomial(4, p) / 4.0, rng.binomial(4, p) / 4.0
    graded = rng.beta(6 * p, 6 * (1 - p)), rng.beta(6 * p, 6 * (1 - p))
    pc = np.repeat(rng.uniform(0.2, 0.98, 40), 5)
    shock = np.repeat(rng.normal(0, 0.15, (2, 40)), 5, axis=1)
    clustered = tuple((rng.random(200) < np.clip(pc + s, 0, 1)).astype(float) for s in shock)
    out: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {
        name: (np.tile(b, reps), np.tile(h, reps), None)
        for name, (b, h) in (("k1", k1), ("k4", k4), ("graded", graded))
    }
    out["clustered"] = (*(np.tile(a, reps) for a in clustered), np.arange(200 * reps) // 5)
    return out


@pytest.mark.parametrize("kind", ["k1", "k4", "graded", "clustered"])
def test_mde_for_test_monotone_in_n_and_never_below_formula(kind: str) -> None:
    values = []
    for reps in (1, 2, 4, 8):
        base, head, clusters = _fixtures(reps)[kind]
        calibrated = mde_for_test(base, head, clusters=clusters)
        formula = mde_paired(base, head, clusters=clusters)
        assert math.isfinite(calibrated)
        # Never below the normal-theory figure (it also allows for the variance a drop adds).
        assert 0.99 * formula <= calibrated <= 1.6 * formula
        values.append(calibrated)
    assert all(later < earlier for earlier, later in itertools.pairwise(values))


def test_mde_for_test_t_multiplier_matches_noncentral_t() -> None:
    # Continuous scores (no lattice): Δ = λ·SE_alt with the variance under the alternative
    # var d + φ(Δ − Δ²) + κΔ² (mde_for_test, point 3); λ by Abramowitz & Stegun 26.7.10.
    # Check λ against scipy's noncentral t.
    rng = np.random.default_rng(4)
    z = sps.norm.isf(0.05)
    for n in (12, 40, 200):  # up to 10 units the power is enumerated instead (_few_units_mde)
        base = rng.uniform(0.0, 0.7, n)
        head = np.clip(base + rng.normal(0.0, 0.1, n), 0.0, 1.0)
        d = head - base
        within = np.mean(d**2) / 2
        phi = within / (within + (np.mean(base * (1 - base)) + np.mean(head * (1 - head))) / 2)
        p_bar = max(base.mean(), 0.05)
        kappa = (1 - phi) * (1 - p_bar) / p_bar
        delta = mde_for_test(base, head)
        var_alt = d.var(ddof=1) + phi * (delta - delta**2) + kappa * delta**2
        se = math.sqrt(var_alt / n)
        t_crit = z * math.sqrt((n - 1) / (n - z * z))
        assert sps.nct.sf(t_crit, n - 1, delta / se) == pytest.approx(0.8, abs=0.003)


def test_mde_for_test_scales_with_the_score_range() -> None:
    base, head, _ = _fixtures(2)["graded"]
    base[0], head[1] = 0.0, 1.0  # the range is [0, 1] itself
    assert mde_for_test(10 * base, 10 * head) == pytest.approx(
        10 * mde_for_test(base, head), rel=1e-9
    )


@pytest.mark.parametrize(
    ("kind", "shape"),
    [
        pytest.param("k4", "uniform", marks=pytest.mark.slow),
        ("k4", "proportional"),
        pytest.param("clustered", "proportional", marks=pytest.mark.slow),
    ],
)
def test_mde_for_test_power_by_simulation(kind: str, shape: str) -> None:
    # Items succeed with probability p_i (clusters: shared p and a per-run shock per cluster and
    # arm); the PR arm loses Δ on every item (uniform) or Δ·p_i/mean(p) (proportional), so the
    # population Δ is exact. The gate's test at Δ = −MDE (MDE: median over 101 A/A runs) must
    # have at least 80 % power (within 2 Monte-Carlo SE of 300 runs).
    rng = np.random.default_rng(21)
    n, runs = 200, 300
    if kind == "k4":
        k, clusters, p = 4, None, rng.uniform(0.4, 0.9, n)
    else:
        k, clusters, p = 1, np.arange(n) // 5, np.repeat(rng.uniform(0.35, 0.8, 40), 5)

    def draw(delta: float) -> tuple[np.ndarray, np.ndarray]:
        shock = np.zeros((2, n)) if clusters is None else rng.normal(0, 0.06, (2, 40))[:, clusters]
        arms = np.clip(p + shock, 0.0, 1.0)
        drop = np.full(n, delta) if shape == "uniform" else delta * arms[1] / p.mean()
        base, head = rng.binomial(k, np.clip(arms - np.stack([np.zeros(n), drop]), 0, 1)) / k
        return base, head

    delta = float(np.median([mde_for_test(*draw(0.0), clusters=clusters) for _ in range(101)]))
    hits = 0
    for r in range(runs):
        res = paired_compare(*draw(delta), Design(n_resamples=1000, seed=r), clusters=clusters)
        hits += res.p_regression <= 0.05
    assert hits / runs >= 0.80 - 2 * math.sqrt(0.8 * 0.2 / runs)


# --------------------------------------------------------------------------- pass@k


def test_pass_at_k_and_pass_hat_k_against_enumeration() -> None:
    for n in range(1, 8):
        for c in range(n + 1):
            samples = [1] * c + [0] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(samples, k))
                any_ok = sum(max(s) for s in subsets) / len(subsets)
                all_ok = sum(min(s) for s in subsets) / len(subsets)
                assert pass_at_k(n, c, k) == pytest.approx(any_ok, abs=1e-12)
                assert pass_hat_k(n, c, k) == pytest.approx(all_ok, abs=1e-12)


def test_pass_at_k_large_n_is_stable() -> None:
    value = pass_at_k(2000, 3, 100)
    expected = 1 - math.comb(1997, 100) / math.comb(2000, 100)
    assert value == pytest.approx(expected, rel=1e-10)
    assert pass_hat_k(2000, 1900, 100) == pytest.approx(
        math.comb(1900, 100) / math.comb(2000, 100), rel=1e-10
    )


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (3, 4, 1), (3, 1, 0), (0, 0, 1)])
def test_pass_at_k_invalid(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


# --------------------------------------------------------------------------- sequential


def test_obrien_fleming_bounds_notes_values() -> None:
    assert obrien_fleming_bounds(4, 0.05) == pytest.approx([3.47, 2.45, 2.00, 1.73], abs=0.02)
    # One-sided α = .025, the classic O'Brien-Fleming values (Jennison & Turnbull 2000, ch. 2).
    assert obrien_fleming_bounds(4, 0.025) == pytest.approx([4.05, 2.86, 2.34, 2.02], abs=0.02)
    assert obrien_fleming_bounds(1, 0.05) == pytest.approx([sps.norm.ppf(0.95)])


def test_wang_tsiatis_bounds_known_values() -> None:
    # The gate's design (Δ = 0.25) and Pocock's constant boundary (Δ = 0.5; one-sided α = .025
    # at 4 looks: 2.361, Jennison & Turnbull 2000, table 2.1).
    assert stats.wang_tsiatis_bounds(4, 0.05) == pytest.approx([2.59, 2.18, 1.97, 1.83], abs=0.01)
    assert stats.wang_tsiatis_bounds(4, 0.025, 0.5) == pytest.approx([2.361] * 4, abs=0.002)
    assert stats.wang_tsiatis_bounds(4, 0.05, 0.0) == obrien_fleming_bounds(4, 0.05)
    with pytest.raises(ValueError):
        stats.wang_tsiatis_bounds(4, 0.05, 0.7)


@pytest.mark.parametrize("shape", [0.0, 0.25, 0.5])
@pytest.mark.parametrize("looks", [2, 3, 4, 6])
def test_wang_tsiatis_overall_alpha(looks: int, shape: float) -> None:
    # Checked against scipy's multivariate normal CDF (Genz), not the convolution that solved c.
    bounds = np.array(stats.wang_tsiatis_bounds(looks, 0.05, shape))
    k = np.arange(1, looks + 1)
    cov = np.sqrt(np.minimum.outer(k, k) / np.maximum.outer(k, k))
    crossing = 1 - sps.multivariate_normal.cdf(
        bounds, cov=cov, rng=np.random.default_rng(0), abseps=1e-6, releps=1e-6, maxpts=200_000
    )
    assert crossing == pytest.approx(0.05, abs=2e-4)
    assert all(np.diff(bounds) <= 1e-12)


def test_look_sizes() -> None:
    assert look_sizes(200, 4) == [50, 100, 150, 200]
    assert look_sizes(10, 3) == [4, 7, 10]


def test_repeated_p_is_the_design_level() -> None:
    for k in range(1, 5):
        nominal = stats.nominal_alpha(k, 4, 0.05)
        assert nominal == pytest.approx(sps.norm.sf(stats.wang_tsiatis_bounds(4, 0.05)[k - 1]))
        assert stats.repeated_p(nominal, k, 4) == pytest.approx(0.05, abs=1e-6)
        assert stats.repeated_p(0.5 * nominal, k, 4) < 0.05 < stats.repeated_p(2 * nominal, k, 4)
    assert stats.repeated_p(0.3, 1, 1) == 0.3


def test_sequential_stops_early_on_clear_results() -> None:
    base, head = binary_pair(20, 0, 20, 50)  # 20 regressions, no fixes, in the first 50 items
    design = Design(looks=4, margin=0.03, alpha=0.05, horizon=200)
    assert sequential_decision(base, head, design, look=1) == "FAIL"
    same = np.r_[np.ones(70), np.zeros(30)]
    assert sequential_decision(same, same, design, look=2) is None  # 100 ties are not yet enough
    many_same = np.r_[np.ones(140), np.zeros(60)]
    assert sequential_decision(many_same[:150], many_same[:150], design, look=3) == "PASS"


def test_sequential_bounds_are_repeated_intervals_that_agree_with_the_decision() -> None:
    # At look k the bounds are the fixed-sample method's at the nominal α_k, the p-values the
    # repeated p-values: verdict ⇔ bounds, as at a fixed sample size.
    for b, c in [(12, 0), (6, 0), (0, 0), (9, 9), (15, 3)]:
        base, head = binary_pair(b, c, 60, 100)
        for look in (2, 4):
            res = sequential_compare(
                base, head, Design(looks=4, margin=0.03, alpha=0.05), look=look
            )
            nominal = stats.nominal_alpha(look, 4, 0.05)
            fixed = paired_compare(base, head, Design(margin=0.03, alpha=nominal))
            assert (res.lo, res.hi, res.level) == (fixed.lo, fixed.hi, nominal)
            got = verdict(res)
            assert (got == "PASS") == (res.lo > -0.03)
            assert (got == "FAIL") == (res.hi < 0.0 and res.lo <= -0.03)


def test_sequential_final_look_is_fixed_sample_verdict() -> None:
    final_alpha = stats.nominal_alpha(4, 4, 0.05)
    for b, c in [(26, 18), (12, 4), (5, 30), (14, 14)]:
        base, head = notes_example(b, c) if b - c == 8 else binary_pair(b, c, 100, 200)
        out = sequential_decision(
            base, head, Design(looks=4, margin=0.05, alpha=0.05, horizon=200), look=4
        )
        fixed = verdict(paired_compare(base, head, Design(margin=0.05, alpha=final_alpha)))
        assert out == fixed and out is not None
    # One look: exactly the ordinary gate.
    base, head = notes_example(12, 4)
    one = sequential_decision(
        base, head, Design(looks=1, margin=0.05, alpha=0.05, horizon=200), look=1
    )
    assert one == verdict(paired_compare(base, head, Design(margin=0.05))) == "FAIL"


def test_sequential_fractional_and_clustered_final_look() -> None:
    rng = np.random.default_rng(6)
    base = rng.random(60)
    head = np.clip(base + rng.normal(0, 0.1, 60), 0, 1)
    groups = np.arange(60) // 3
    for clusters in (None, groups):
        # groups: the plan's count
        design = Design(looks=3, margin=0.03, alpha=0.05, horizon=60)
        design = design if clusters is None else replace(design, groups_total=20)
        out = sequential_decision(base, head, design, look=3, clusters=clusters)
        assert out in {"PASS", "FAIL", "INCONCLUSIVE"}
        interim = sequential_decision(
            base[:20],
            head[:20],
            design,
            look=1,
            clusters=None if clusters is None else clusters[:20],
        )
        assert interim in {None, "PASS", "FAIL"}
    # Groups without the plan's number of groups: each look would be a process of its own.
    with pytest.raises(ValueError, match="groups_total"):
        sequential_decision(
            base,
            head,
            Design(looks=3, margin=0.03, alpha=0.05, horizon=60),
            look=3,
            clusters=groups,
        )


def test_sequential_rejects_bad_looks() -> None:
    with pytest.raises(ValueError):
        sequential_decision(
            [1, 0], [1, 0], Design(looks=4, margin=0.03, alpha=0.05, horizon=8), look=5
        )
    with pytest.raises(ValueError):
        sequential_decision(
            [1, 0], [1, 0], Design(looks=4, margin=0.03, alpha=0.05, horizon=1), look=1
        )


def _broken_halves(rng: np.random.Generator, n: int, margin: float) -> tuple[np.ndarray, ...]:
    """Graded (base, head) whose differences are ±0.5 with mean exactly −margin: the pattern
    where the betting bound is tightest, so a PASS side spending more than α shows."""
    d = np.where(rng.random(n) < 0.5 - margin, 0.5, -0.5)
    head = np.clip(rng.random(n) + d, 0.0, 1.0)
    return head - d, head


def _process(base: np.ndarray, head: np.ndarray, horizon: int, **kw: Any) -> Any:
    """paired_compare's bounds with the flat bets of a sequential run's one process, read at
    this prefix (paired_compare itself reads a whole run, horizon = n, as a fixed design)."""
    from evalgate.stats._paired import _compare, _Reading

    return _compare(base, head, None, Design(horizon=horizon, **kw), _Reading(kw["alpha"]))


@pytest.mark.slow  # a long simulation: CI's slow step runs it (issue #39)
def test_sequential_graded_false_pass_is_at_most_alpha_over_many_looks() -> None:
    # Δ = −δ exactly, 20 looks. Each look re-betting on its own items at its own nominal level
    # spent up to the sum of the levels on the PASS side (> α with 20 looks: 0.073 ± 0.015 on
    # these data); one capital process over the run, read at every look at α, spends α
    # (Ville). A look's PASS side is the fixed-sample code's on its prefix with the run's
    # horizon and flat bets (the next test), which this reads directly: the FAIL side's
    # repeated p-values over 20 looks cost a second a run, and stopping for FAIL could only
    # make PASS rarer.
    rng = np.random.default_rng(20261126)
    n, looks, margin, alpha, runs = 200, 20, 0.05, 0.05, 300
    passed = 0
    for _ in range(runs):
        base, head = _broken_halves(rng, n, margin)
        passed += any(
            _process(
                base[:size], head[:size], n, margin=margin, alpha=alpha, n_resamples=1
            ).p_noninferiority
            <= alpha
            for size in look_sizes(n, looks)
        )
    assert passed / runs <= alpha, passed


def test_sequential_graded_pass_side_is_one_betting_process() -> None:
    # With a horizon, a look's PASS p-value is 1 / (running max of one capital process) at its
    # prefix: never larger at a later look, and the same as the fixed-sample test's on that
    # prefix at the full α (items in the same order, bets tuned to the same horizon).
    rng = np.random.default_rng(3)
    n, looks = 240, 6
    for _ in range(5):
        base = rng.beta(2, 2, n)
        head = np.clip(base + rng.normal(0.0, 0.2, n), 0.0, 1.0)
        p_seen, lo_seen = [], []
        for look, size in enumerate(look_sizes(n, looks), start=1):
            design = Design(looks=looks, margin=0.05, alpha=0.05, horizon=n, n_resamples=100)
            res = sequential_compare(base[:size], head[:size], design, look=look)
            p_seen.append(res.p_noninferiority)
            lo_seen.append(res.lo)
            alone = _process(base[:size], head[:size], n, margin=0.05, alpha=0.05, n_resamples=100)
            assert (res.p_noninferiority, res.lo) == (alone.p_noninferiority, alone.lo)
        assert all(a >= b for a, b in itertools.pairwise(p_seen)), p_seen
        assert all(a <= b + 1e-3 for a, b in itertools.pairwise(lo_seen)), lo_seen
        # The last look is the fixed-sample PASS bound; the FAIL side keeps its spending (its
        # bound is at the last look's nominal level, so never tighter than the fixed one).
        assert res.hi >= alone.hi


def test_design_level_gives_the_designs_power_over_every_look() -> None:
    # The one-look level whose power equals the 4-look design's: at the drift where that test
    # has 80 % power, the design (crossing at any look, checked by simulating the looks' z's)
    # has 80 % too. The last look's level alone (0.0334) would need a larger drift.
    level = stats.design_level(4, 0.05)
    assert stats.nominal_alpha(4, 4, 0.05) < level < 0.05
    theta = sps.norm.isf(level) + sps.norm.ppf(0.8)
    rng = np.random.default_rng(0)
    z = (rng.standard_normal((100_000, 4)) + theta / 2.0).cumsum(axis=1) / np.sqrt([1, 2, 3, 4])
    power = np.mean((z >= np.array(stats.wang_tsiatis_bounds(4, 0.05))).any(axis=1))
    assert abs(power - 0.8) < 0.006, power
    assert stats.design_level(1, 0.05) == 0.05


def test_a_sequential_runs_mde_counts_every_look() -> None:
    # A run that reached its last look reports the design's MDE: 1.04 × the fixed design's in
    # the normal limit (it was the last look's test alone, 1.075 ×).
    from evalgate.compare.paired import compare_metric

    rng = np.random.default_rng(4)
    base = rng.beta(2, 2, 1000)
    head = np.clip(base + rng.normal(0.0, 0.2, 1000), 0.0, 1.0)
    kw = {"clusters": None, "margin": 0.03, "alpha": 0.05, "n_resamples": 100}
    fixed = compare_metric("reward", base, head, **kw).mde
    design = compare_metric("reward", base, head, design=(4, 4), **kw).mde
    assert fixed is not None and design is not None
    assert 1.02 < design / fixed < 1.06, design / fixed


def test_item_order_is_a_keyed_hash_of_the_id_alone() -> None:
    import hashlib

    ids = [f"item-{i}" for i in range(50)]
    order = stats.item_order(ids, 7)
    assert order == sorted(ids, key=lambda i: hashlib.sha256(f"7:{i}".encode()).digest())
    kept = [i for i in order if not i.endswith(("3", "5"))]  # errored items dropped
    assert stats.item_order(reversed(kept), 7) == kept
    assert stats.item_order(ids, 8) != order


def test_fail_crossing_probability_matches_enumeration() -> None:
    # Every one of the 3^6 item sequences (tie, base-only right, PR-only right) of a 2-look design
    # on 6 items, at levels where the exact test can reject: the look-by-look computation must
    # equal the sum over the sequences that the test rejects at some look.
    levels, psi = (0.3, 0.3), 0.6
    weight = {0: 1.0 - psi, 1: psi / 2.0, 2: psi / 2.0}
    expected = 0.0
    for seq in itertools.product((0, 1, 2), repeat=6):
        for size, level in zip((3, 6), levels, strict=True):
            b, c = seq[:size].count(1), seq[:size].count(2)
            if _exact.p_less(b, c, size, 0.0) <= level:
                expected += math.prod(weight[x] for x in seq)
                break
    assert expected > 0.05  # the enumeration has rejections to find
    got = stats.fail_crossing_probability(6, 2, 0.05, psi, levels=levels)
    assert got == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    ("n", "looks"), [(50, 4), (100, 4), (200, 2), (200, 4), (400, 4), (500, 4)]
)
def test_sequential_a_a_false_fail_is_at_most_alpha_for_every_discordance(
    n: int, looks: int
) -> None:
    # The guarantee: with 0/1 scores and an unchanged model, FAIL at any look has probability
    # ≤ α whatever the discordance (computed exactly, no Monte-Carlo error). The bench's
    # "noise n=200 k=1 seq" cell has ψ ≈ 0.21.
    for psi in (0.01, 0.03, 0.08, 0.15, 0.21, 0.3, 0.45, 0.7, 0.95):
        assert stats.fail_crossing_probability(n, looks, 0.05, psi) <= 0.05, psi


def test_fail_crossing_probability_sees_repeated_testing() -> None:
    # The computation has teeth: testing at the full α at each of 4 looks inflates the A/A
    # false-FAIL rate well past α (the reason for the design's levels).
    naive = stats.fail_crossing_probability(200, 4, 0.05, 0.21, levels=[0.05] * 4)
    assert naive > 0.08


@pytest.mark.slow  # a long simulation: CI's slow step runs it (issue #39)
def test_pass_crossing_probability_matches_enumeration() -> None:
    # Every one of the 3^6 item sequences of a 2-look design on 6 items, the PR worse by the
    # margin: the look-by-look computation must equal the sum over the sequences that the
    # non-inferiority test (the PASS side) rejects at some look.
    levels, psi, margin = (0.3, 0.4), 0.5, 0.1
    weight = {0: 1.0 - psi, 1: (psi + margin) / 2.0, 2: (psi - margin) / 2.0}
    expected = 0.0
    for seq in itertools.product((0, 1, 2), repeat=6):
        for size, level in zip((3, 6), levels, strict=True):
            b, c = seq[:size].count(1), seq[:size].count(2)
            if _exact.p_greater(b, c, size, -margin) <= level:
                expected += math.prod(weight[x] for x in seq)
                break
    assert expected > 0.05  # the enumeration has rejections to find
    got = stats.pass_crossing_probability(6, 2, 0.05, margin, psi, levels=levels)
    assert got == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("n", "looks"), [(50, 4), (200, 4), (200, 10), (500, 4)])
@pytest.mark.parametrize("margin", [0.01, 0.03, 0.1])
def test_sequential_false_pass_is_at_most_alpha_for_every_discordance(
    n: int, looks: int, margin: float
) -> None:
    # The PASS side's guarantee for 0/1 scores, computed exactly (no Monte-Carlo error): a PR
    # worse by exactly the margin PASSes at some look with probability ≤ α whatever the
    # discordance, from "only breaks items" (ψ = δ) to every item flipping.
    grid = margin + (1.0 - margin) * np.linspace(0.0, 1.0, 25) ** 2
    worst = max(stats.pass_crossing_probability(n, looks, 0.05, margin, psi) for psi in grid)
    assert worst <= 0.05


def test_pass_crossing_probability_sees_repeated_testing() -> None:
    # Testing non-inferiority at the full α at each of 4 looks inflates false PASS past α.
    naive = stats.pass_crossing_probability(200, 4, 0.05, 0.03, 0.3, levels=[0.05] * 4)
    assert naive > 0.08


def test_estimate_is_frozen() -> None:
    est = mean_ci([0.1, 0.2, 0.3])
    assert isinstance(est, Estimate)
    with pytest.raises(AttributeError):
        est.mean = 1.0  # type: ignore[misc]


# --------------------------------------------------------------------------- binomial (no scipy)


@pytest.mark.parametrize("n", [1, 2, 7, 12, 50, 400, 5000, 100_000])
def test_binomial_tails_match_scipy(n: int) -> None:
    """binom_cdf / binom_sf are summed in plain floats; each tail directly, tiny ones included."""
    for k in sorted({-1, 0, 1, n // 3, n // 2, n - 1, n}):
        for p in (0.0, 1e-4, 0.05, 0.3, 0.5, 0.8, 0.999, 1.0):
            cdf, sf = sps.binom.cdf(k, n, p), sps.binom.sf(k, n, p)
            assert stats.binom_cdf(k, n, p) == pytest.approx(cdf, rel=1e-8, abs=1e-300), (k, p)
            assert stats.binom_sf(k, n, p) == pytest.approx(sf, rel=1e-8, abs=1e-300), (k, p)


@pytest.mark.parametrize("n", [1, 2, 12, 50, 400, 5000, 100_000, 200_000])
def test_clopper_pearson_lower_matches_the_beta_quantile(n: int) -> None:
    from scipy import special

    for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        for alpha in (0.05, 0.0071, 0.2):
            expected = float(special.betaincinv(k, n - k + 1, alpha)) if k > 0 else 0.0
            got = stats.clopper_pearson_lower(k, n, alpha)
            assert got == pytest.approx(expected, rel=1e-8, abs=1e-15), (k, alpha)


# ----------------------------------------------------------------- size: no O(n²) anywhere


def _triangle_regression_edge(n: int, alpha: float) -> np.ndarray:
    """The regression test's edge b*(m) by brute force over every (b, m) of the triangle."""
    m = np.arange(n + 1, dtype=float)[:, None]
    b = np.broadcast_to(np.arange(n + 1, dtype=float)[None, :], (n + 1, n + 1))
    z = _exact.score_z(b, m - b, n, 0.0)
    inside = b <= m
    crit = math.inf
    for value in np.unique(np.round(z[inside], 12)):
        # p of the regression test at z0 = value: P(z ≤ value), maximised over ψ.
        if _exact.p_less(*_table_with_z(n, float(value)), n, 0.0) <= alpha:
            crit = float(value)
    if not math.isfinite(crit):
        return m[:, 0] + 1.0
    hit = inside & (z <= crit + 1e-9 * (1.0 + abs(crit)))
    return np.where(hit, b, np.inf).min(axis=1).clip(max=m[:, 0] + 1.0)


def _table_with_z(n: int, z0: float) -> tuple[int, int]:
    for m in range(n + 1):
        for b in range(m + 1):
            if abs(float(_exact.score_z(b, m - b, n, 0.0)) - z0) < 1e-9:
                return b, m - b
    raise AssertionError(z0)


@pytest.mark.parametrize(
    ("n", "alpha"),
    [(12, 0.05), pytest.param(30, 0.05, marks=pytest.mark.slow), (30, 0.0146)],
)
def test_regression_edge_matches_the_triangle(n: int, alpha: float) -> None:
    # The FAIL test's rejection edge (used by the MDE and the sequential crossing probability)
    # is computed without the (n + 1)² grid; it must be the same edge.
    np.testing.assert_array_equal(
        _exact_regions.regression_edge(n, alpha), _triangle_regression_edge(n, alpha)
    )


@pytest.mark.parametrize(("b", "c", "n"), [(3, 0, 5000), (140, 95, 5000), (0, 0, 3000)])
def test_windowed_tail_keeps_the_exact_p(b: int, c: int, n: int) -> None:
    # The tail sums only the discordant counts that carry probability; the p-value is the full
    # sum over every m (computed here without the window).
    for d0 in (-0.03, 0.0):
        z_obs = float(_exact.score_z(np.array(b), np.array(c), n, d0))
        m = np.arange(n + 1, dtype=float)
        full = 0.0
        u = np.linspace(0.0, 1.0, 31)
        for psi in abs(d0) + (1.0 - abs(d0)) * u * u:  # the test's own ψ grid
            psi = min(max(float(psi), 1e-300), 1.0)
            edge = _exact._region_edge(z_obs, n, d0, m)
            weight = sps.binom.pmf(m, n, psi)
            q = min(max((psi - d0) / (2.0 * psi), 0.0), 1.0)
            full = max(full, float(np.sum(weight * sps.binom.cdf(edge, m, q))))
        got = _exact._grid_tail(z_obs, n, d0)  # the same grid, through the windows
        assert full - 1e-12 <= got <= full * 1.1 + 1e-12, (d0, got, full)
        # The p-value is the supremum over every ψ, bounded from above: never below the grid's.
        assert _exact.p_greater(b, c, n, d0) >= full - 1e-12


@pytest.mark.parametrize("d0", [0.0, -0.03, 0.2, -0.999, 1.0])
def test_score_z_of_an_array_is_each_tables_to_the_bit(d0: float) -> None:
    # The rejection edges evaluate score_z on arrays of ~10^5 cells (in place, for speed):
    # every element must be the bits of the table's own statistic (its sign of zero, its
    # infinities), across the triangle's corners and the zero-variance cells.
    rng = np.random.default_rng(7)
    for n in (1, 7, 1000, 10**6):
        m = np.concatenate([[0, 0, n, n], rng.integers(0, n + 1, 300)]).astype(float)
        b = np.concatenate([[0, 0, 0, n], np.floor(m[4:] * rng.random(300))])
        c = np.concatenate([[0, 0, n, 0], m[4:] - b[4:]])
        got = _exact.score_z(b, c, n, d0)
        one = [
            float(_exact.score_z(np.array(x), np.array(y), n, d0))
            for x, y in zip(b, c, strict=True)
        ]
        assert [repr(v) for v in got.tolist()] == [repr(v) for v in one], (n, d0)


@pytest.mark.parametrize(("n", "d0"), [(5000, 0.0), (5000, -0.03)])
def test_grid_tail_against_a_level_decides_as_the_whole_grid(
    n: int, d0: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The searches for a rejection edge only compare the grid's maximum with alpha: asked that
    # (``above``), the grid stops at its first value above the level. The decision must be the
    # whole grid's at every z (either side of the edge), the value one the tail reaches, and
    # the same bits where the whole grid had to be computed.
    rows: list[int] = []
    window_sums = _exact._window_sums

    def counted(*args: Any) -> np.ndarray:
        rows.append(len(args[3]))
        return window_sums(*args)

    monkeypatch.setattr(_exact, "_window_sums", counted)
    stopped_early = 0
    for z in np.linspace(-3.0, 1.0, 9):
        for level in (0.05, 0.01):
            rows.clear()
            whole = _exact._grid_tail(float(z), n, d0)
            all_rows = sum(rows)
            rows.clear()
            decided = _exact._grid_tail(float(z), n, d0, above=level)
            assert (decided > level) == (whole > level), (z, level, decided, whole)
            if whole <= level:
                assert decided == whole and sum(rows) == all_rows
            else:
                assert level < decided <= whole
                stopped_early += sum(rows) < all_rows
    assert stopped_early > 0  # the grid's first rows already settle some decisions


@pytest.mark.slow  # 200,000 items under tracemalloc: a minute on 2 cores
def test_compare_and_mde_need_memory_linear_in_n() -> None:
    # 200,000 paired 0/1 items: an (n + 1)² array would need 320 GB; the comparison and its MDE
    # must fit in a few dozen MB.
    import tracemalloc

    rng = np.random.default_rng(3)
    n = 200_000
    base = (rng.random(n) < 0.7).astype(float)
    head = np.where(rng.random(n) < 0.02, 1.0 - base, base)
    tracemalloc.start()
    try:
        res = paired_compare(base, head, Design(margin=0.03))
        found = mde_for_test(base, head)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.method == "exact-unconditional" and res.lo <= res.delta <= res.hi
    assert 0.0 < found < 0.01
    assert peak < 200 * 2**20, peak / 2**20


@pytest.mark.parametrize("bits", [8, 4])
def test_byte_table_pattern_sums_equal_the_dense_sums(bits: int) -> None:
    # Large sign-flip tests draw patterns as random bytes summed by table look-up; the sums
    # must be those of the same patterns written out as 0/1 rows.
    from evalgate.stats import _paired

    rng = np.random.default_rng(5)
    both = np.column_stack([rng.normal(size=203), rng.integers(1, 4, 203).astype(float)])
    tables, blocks = _paired._byte_tables(both, bits)
    codes = rng.integers(0, 1 << bits, size=(50, blocks), dtype=np.uint8)
    dense = ((codes[:, :, None] >> np.arange(bits)) & 1).reshape(50, -1)[:, :203]
    np.testing.assert_allclose(_paired._pattern_sums(codes, tables, bits), dense @ both)


def test_large_monte_carlo_sign_flip_is_centred() -> None:
    # 20,000 items, 2,000 resamples: the byte-table path. Under no change (symmetric d) the
    # regression p is not small and the bounds straddle the mean.
    rng = np.random.default_rng(6)
    d = rng.choice([-0.25, 0.0, 0.25], size=20_000)
    res = paired_compare(np.full(d.size, 0.5), 0.5 + d, Design(n_resamples=2_000))
    assert not res.exact and res.n_resamples == 2_000
    assert res.lo < res.delta < res.hi and res.p_regression > 0.01
    se = d.std(ddof=1) / math.sqrt(d.size)
    assert res.hi - res.delta == pytest.approx(1.645 * se, rel=0.15)


# ----------------------------------------------------- grouped data: a PR that breaks whole groups


def _whole_groups_broken(
    rng: np.random.Generator, groups: int, n: int, k: int, drop: float
) -> tuple[np.ndarray, np.ndarray]:
    """Base and PR item scores (k rollouts) where the PR scores 0 on each whole group with
    probability π, else redraws the same pass rates: population Δ = −drop."""
    size = n // groups
    theta = np.repeat(1.6 + 2.4 * rng.standard_normal(groups), size) + rng.standard_normal(n)
    p = 1.0 / (1.0 + np.exp(-theta))
    base = rng.binomial(k, p) / k
    head = rng.binomial(k, p) / k
    pi = drop / 0.70  # E[p] ≈ 0.70 for this θ
    broken = np.repeat(rng.random(groups) < pi, size)
    return base, np.where(broken, 0.0, head)


@pytest.mark.slow  # a long simulation: CI's slow step runs it (issue #39)
@pytest.mark.parametrize("groups", [20, 40])
def test_pr_that_breaks_whole_groups_passes_at_most_alpha(groups: int) -> None:
    # The cell: n = 500, 4 rollouts, Δ = −δ made of whole broken groups; the sign-flip
    # over group sums PASSed 0.19 (20 groups) / 0.13 (40 groups) of these PRs.
    rng = np.random.default_rng(11 + groups)
    runs, passes, n = 300, 0, 500 // groups * groups
    clusters = np.arange(n) // (n // groups)
    for r in range(runs):
        base, head = _whole_groups_broken(rng, groups, n, 4, 0.03)
        res = paired_compare(
            base, head, Design(margin=0.03, n_resamples=500, seed=r), clusters=clusters
        )
        passes += verdict(res) == "PASS"
    assert passes / runs <= 0.05 + 2.0 * math.sqrt(0.05 * 0.95 / runs), passes
