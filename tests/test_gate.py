"""gate.decide: Holm across metrics, thresholds as one-sided tests, on_inconclusive."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from evalgate import stats
from evalgate.compare.paired import MetricComparison, RunComparison, threshold_test
from evalgate.config.load import GateSettings
from evalgate.gate import decide
from evalgate.run.summary import RunSummary


def _run(benchmark: str, scores: list[float] | None = None, errors: int = 0) -> RunSummary:
    scores = scores if scores is not None else [1.0, 0.0] * 50
    per_item = {f"i{k}": s for k, s in enumerate(scores)}
    return RunSummary(
        benchmark=benchmark,
        model="m",
        model_id="org/m",
        run_dir="",
        n_items=len(scores),
        rollouts=1,
        n_rollouts=len(scores) + errors,
        errors=errors,
        error_kinds={},
        metrics={"accuracy": stats.mean_ci(np.array(scores))},
        usage={},
        time_s=0.0,
        per_item={"accuracy": per_item},
        groups={i: None for i in per_item},
    )


def _comparison(benchmark: str, p_regression: float, status: str) -> RunComparison:
    result = stats.PairedResult(
        n=100,
        base_mean=0.7,
        head_mean=0.64,
        delta=-0.06,
        se=0.03,
        lo=-0.11,
        hi=-0.01,
        p_regression=p_regression,
        p_noninferiority=0.8,
        method="mcnemar-exact",
        discordant=(10, 4),
        margin=0.03,
        alpha=0.05,
    )
    mc = MetricComparison("accuracy", result, status, 0.06)
    return RunComparison(
        model="m",
        benchmark=benchmark,
        base_path="b",
        head_path="h",
        comparable=True,
        reason="",
        changes=(),
        n_paired=100,
        n_base_only=0,
        n_head_only=0,
        n_changed=0,
        metrics=(mc,),
        flips=(),
    )


def _decide(runs, comparisons=(), **gate):
    budgets = {r.benchmark: 0.05 for r in runs}
    return decide(runs, GateSettings(**gate), error_budgets=budgets, comparisons=comparisons)


def test_holm_keeps_two_borderline_regressions_from_failing() -> None:
    runs = [_run("a"), _run("b")]
    comps = [_comparison("a", 0.03, "FAIL"), _comparison("b", 0.04, "FAIL")]
    verdict = _decide(runs, comps)
    # Unadjusted both are < .05; Holm needs p(1) <= .025: neither is rejected.
    assert verdict.status == "INCONCLUSIVE"
    assert all("not significant after Holm" in r for r in verdict.reasons)


def test_holm_step_down() -> None:
    runs = [_run("a"), _run("b"), _run("c")]
    comps = [
        _comparison("a", 0.001, "FAIL"),
        _comparison("b", 0.03, "FAIL"),
        _comparison("c", 0.04, "FAIL"),
    ]
    verdict = _decide(runs, comps)
    # 0.001 <= .05/3 is rejected; then 0.03 > .05/2 stops the procedure.
    statuses = {c.benchmark: c.status for c in verdict.checks if c.kind == "baseline"}
    assert statuses == {"a": "FAIL", "b": "INCONCLUSIVE", "c": "INCONCLUSIVE"}
    assert verdict.status == "FAIL" and verdict.exit_code == 1


@pytest.mark.parametrize(("policy", "code"), [("warn", 0), ("pass", 0), ("fail", 1)])
def test_on_inconclusive(policy: str, code: int) -> None:
    verdict = _decide([_run("a")], [_comparison("a", 0.3, "INCONCLUSIVE")], on_inconclusive=policy)
    assert verdict.status == "INCONCLUSIVE" and verdict.exit_code == code


def test_errors_beat_everything() -> None:
    verdict = _decide([_run("a", errors=20)], [_comparison("a", 0.001, "FAIL")])
    assert verdict.status == "ERROR" and verdict.exit_code == 3


def test_thresholds_are_one_sided_tests() -> None:
    # 50 % on 100 binary items: clearly above 0.3, clearly below 0.7, undecided at 0.45.
    run = _run("a")
    for minimum, status in ((0.3, "PASS"), (0.7, "FAIL"), (0.45, "INCONCLUSIVE")):
        verdict = _decide([run], thresholds={"a": {"accuracy": minimum}})
        assert verdict.status == status, minimum


def test_threshold_test_exact_binomial() -> None:
    scores = np.array([1.0] * 6 + [0.0] * 6)
    status, p, lo = threshold_test(scores, 0.8, clusters=None, alpha=0.05)
    assert status == "FAIL" and p == pytest.approx(0.0194, abs=1e-4)
    status, p, lo = threshold_test(scores, 0.2, clusters=None, alpha=0.05)
    # Clopper-Pearson one-sided bound: the p at which P(X >= 6 | n = 12, p) = α.
    # Clopper-Pearson one-sided bound: the p at which P(X >= 6 | n = 12, p) = α.
    assert status == "PASS" and binom.sf(5, 12, lo) == pytest.approx(0.05)


def test_threshold_test_graded_uses_clusters() -> None:
    scores = np.array([0.9, 0.8, 0.2, 0.1] * 5)
    plain = threshold_test(scores, 0.45, clusters=None, alpha=0.05)
    clustered = threshold_test(scores, 0.45, clusters=["x", "x", "y", "y"] * 5, alpha=0.05)
    assert plain[0] == "INCONCLUSIVE" and clustered[0] == "INCONCLUSIVE"
    assert clustered[1] != plain[1]  # clustering changes the evidence


def test_baseline_age_is_human_readable() -> None:
    import datetime

    from evalgate.report import _age

    now = datetime.datetime(2026, 11, 22, 9, 0, tzinfo=datetime.UTC)
    assert _age("2026-11-20T08:00:00.000000Z", now) == "2 days ago"
    assert _age("2026-11-22T08:59:00Z", now) == "1 minute ago"
    assert _age("not a time", now) == ""


def test_threshold_test_identical_clustered_items_fall_back_to_exact() -> None:
    one = threshold_test(np.array([0.0]), 0.5, clusters=["files"], alpha=0.05)
    assert one[0] == "INCONCLUSIVE" and one[1] == pytest.approx(0.5)  # P(X <= 0 | n=1, p=.5)
    five = threshold_test(np.zeros(5), 0.5, clusters=["g"] * 5, alpha=0.05)
    assert five[0] == "FAIL" and five[1] == pytest.approx(0.5**5)


def test_sequential_rows_use_repeated_p_in_holm_and_say_so() -> None:
    # At look 2 of 4 the bounds are repeated (nominal level ≈ 0.0147) and the p-values repeated:
    # a fixed-sample p of 0.02 is not a FAIL there, and Holm sees the repeated p.
    from evalgate.compare.paired import compare_metric

    base = np.r_[np.ones(60), np.zeros(40)]
    head = base.copy()
    head[:7] = 0.0  # 7 regressions, no fixes, out of 100 items
    fixed = compare_metric("accuracy", base, head, clusters=None, margin=0.03, alpha=0.05)
    seq = compare_metric(
        "accuracy", base, head, clusters=None, margin=0.03, alpha=0.05, design=(2, 4)
    )
    assert fixed.status == "FAIL" and fixed.result.hi < 0.0
    assert seq.result.level == pytest.approx(stats.nominal_alpha(2, 4, 0.05))
    assert seq.result.p_regression > fixed.result.p_regression
    assert (seq.status == "FAIL") == (seq.result.hi < 0.0) == (seq.result.p_regression <= 0.05)


# ------------------------------------------------------- values the gate cannot use (NaN, inf)


def _record(item: int, reward: float, rollout: int = 0) -> dict:
    return {
        "example_id": f"i{item}",
        "rollout": rollout,
        "error": None,
        "reward": reward,
        "metrics": {"reward": reward},
        "completion": "x",
    }


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_reward_is_an_error_kind_counted_against_the_budget(bad: float) -> None:
    from evalgate.run.summary import item_metrics, summarize

    records = [_record(i, float(i % 2)) for i in range(40)]
    records[3] = _record(3, bad)
    summary = summarize(
        records,
        benchmark="b",
        model="m",
        model_id="o/m",
        run_dir="",
        n_items=40,
        rollouts=1,
        time_s=0.0,
    )
    assert summary.errors == 1 and summary.n_rollouts == 40
    assert summary.error_kinds == {"non-finite score": 1}
    assert "i3" not in item_metrics(records, 1)["reward"]
    assert np.isfinite(summary.metrics["reward"].mean)
    # Over the budget: an ERROR whose one line names the kind.
    verdict = decide([summary], GateSettings(), error_budgets={"b": 0.01})
    (check,) = [c for c in verdict.checks if c.status == "ERROR"]
    assert "non-finite score" in check.reason and "\n" not in check.reason
    # Within it: the score stands.
    assert decide([summary], GateSettings(), error_budgets={"b": 0.05}).status != "ERROR"
    # A live run keeps its rollouts in a RolloutTable: the same error there.
    from evalgate.run.rollouts import RolloutTable

    table = RolloutTable()
    table.extend(records)
    slim = summarize(
        table,
        benchmark="b",
        model="m",
        model_id="o/m",
        run_dir="",
        n_items=40,
        rollouts=1,
        time_s=0.0,
    )
    assert (slim.errors, slim.error_kinds) == (1, {"non-finite score": 1})
    assert slim.metrics["reward"].mean == summary.metrics["reward"].mean


def test_one_non_finite_metric_makes_the_rollout_unusable() -> None:
    from evalgate.run.summary import item_metrics

    records = [_record(i, 1.0) for i in range(4)]
    records[0]["metrics"]["n_claims"] = float("nan")
    got = item_metrics(records, 1)
    assert sorted(got["reward"]) == ["i1", "i2", "i3"]


# ------------------------------------------------------------------------------------ wording


def test_holm_note_only_for_the_test_the_step_down_reached() -> None:
    runs = [_run("a"), _run("b"), _run("c")]
    comps = [
        _comparison("a", 0.001, "FAIL"),
        _comparison("b", 0.03, "FAIL"),
        _comparison("c", 0.049, "FAIL"),
    ]
    reasons = {c.benchmark: c.reason for c in _decide(runs, comps).checks if c.kind == "baseline"}
    # b was compared with 0.05/2 and stopped the step-down; c was never compared with anything.
    assert "p = 0.03 needs ≤ 0.05/2" in reasons["b"]
    assert "0.05/1" not in reasons["c"] and "p = 0.049 needs" not in reasons["c"]
    assert "stopped" in reasons["c"] and "p = 0.03" in reasons["c"]
    assert "Holm" not in reasons["a"]


@pytest.mark.parametrize(
    ("value", "edge", "shown"),
    [
        (-0.00004, 0.0, "-0.004"),  # U < 0: never "-0.0"
        (-0.0299996, -0.03, "-2.99996"),  # L > −δ: never "-3.0" at δ = 3 pp
        (-0.0300004, -0.03, "-3.00004"),  # L < −δ: never "-3.0" either
        (-0.0123, -0.03, "-1.2"),  # far from the edge: one decimal
        (0.0, 0.0, "+0.0"),  # on the edge is shown on the edge
    ],
)
def test_bounds_are_shown_at_a_precision_that_keeps_their_side(
    value: float, edge: float, shown: str
) -> None:
    digits = stats.decimals_against(value, edge)
    assert f"{100 * value:+.{digits}f}" == (shown if shown[0] in "+-" else "+" + shown)


def test_scorecard_bounds_and_mde_wording_agree_with_the_verdict() -> None:
    from evalgate.report import render_scorecard

    comp = _comparison("a", 0.04, "FAIL")
    mc = comp.metrics[0]
    near = stats.PairedResult(**{**mc.result.__dict__, "lo": -0.0299996, "hi": -0.00004})
    comp = RunComparison(
        **{**comp.__dict__, "metrics": (MetricComparison("accuracy", near, "FAIL", 0.02),)}
    )
    verdict = _decide([_run("a")], [comp])
    card = render_scorecard(verdict)
    assert "-0.0 pp" not in card and "-0.004 pp" in card
    assert "-3.0 pp" not in card and "-2.99996 pp" in card
    (check,) = [c for c in verdict.checks if c.kind == "baseline"]
    assert "[-0.030," not in check.reason and "-0.000]" not in check.reason
    assert "[-0.0299996, -0.00004]" in check.reason
    # The MDE says whose power it is: the regression test's (U < 0), not P(FAIL).
    assert "MDE: the drop that makes U < 0 with 80 % power" in card


# ------------------------------------------------------------- scales: proportion, range, count


@pytest.mark.parametrize(
    ("values", "declared", "kind", "low", "high"),
    [
        ([0.0, 1.0, 0.5], None, "proportion", 0.0, 1.0),
        ([0.0, 2.0, 5.0], None, "count", 0.0, 5.0),
        ([-1.5, 2.0, 0.25], None, "real", -1.5, 2.0),
        ([1.0, 4.0], [0.0, 10.0], "bounded", 0.0, 10.0),
        ([1.0, 3.0], "count", "count", 0.0, 3.0),
        ([0.0, 1.0], "proportion", "proportion", 0.0, 1.0),
    ],
)
def test_metric_scale_is_declared_or_inferred(
    values: list[float], declared: object, kind: str, low: float, high: float
) -> None:
    scale = stats.metric_scale(values, declared)
    assert (scale.kind, scale.low, scale.high) == (kind, low, high)
    # Only a scale whose bounds are known states no assumption.
    assert bool(scale.assumption) == (kind in ("count", "real"))


def test_declared_range_the_data_leave_is_widened_and_said() -> None:
    scale = stats.metric_scale([-1.0, 4.0], [0.0, 3.0])
    assert (scale.low, scale.high) == (-1.0, 4.0) and "outside" in scale.assumption


def test_scorecard_shows_counts_in_their_units_and_says_what_the_gate_assumes() -> None:
    from evalgate.compare.paired import compare_metric
    from evalgate.report import render_scorecard

    base = np.array([2.0, 3.0, 1.0, 4.0] * 25)
    head = base.copy()
    mc = compare_metric("n_claims", base, head, clusters=None, margin=0.03, alpha=0.05)
    assert mc.scale is not None and mc.scale.kind == "count"
    assert "assumes" in mc.reason
    comp = _comparison("a", 0.5, "INCONCLUSIVE")
    comp = RunComparison(**{**comp.__dict__, "metrics": (mc,)})
    run = _run("a", list(base))
    run = RunSummary(
        **{
            **run.__dict__,
            "metrics": {"n_claims": stats.mean_ci(base)},
            "per_item": {"n_claims": run.per_item["accuracy"]},
        }
    )
    verdict = _decide([run], [comp])
    card = render_scorecard(verdict)
    assert "250.0%" not in card and "250.0 %" not in card
    assert "2.5" in card
    row = next(line for line in card.splitlines() if "| n_claims |" in line and "[" in line)
    assert " pp" not in row.split("|")[6]  # Δ [L, U] of a count is in counts
    (check,) = [c for c in verdict.checks if c.kind == "baseline"]
    assert "assumes" in check.reason


def test_a_declared_range_must_be_a_range() -> None:
    assert GateSettings(scales={"r": [-1, 2]}).scales == {"r": (-1.0, 2.0)}
    with pytest.raises(ValueError, match="low < high"):
        GateSettings(scales={"r": [2, 2]})
