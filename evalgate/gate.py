"""The gate: run summaries + baseline comparisons + policy → one verdict with reasons.

Outcomes, most severe first:

- ERROR: the infrastructure failed, or more rollouts errored than the budget: no score is trusted;
- FAIL: a significant regression against the baseline (upper bound of Δ < 0), or a threshold
  missed significantly — significance across every tested metric and benchmark adjusted with
  Holm's step-down (on repeated p-values for runs decided by sequential looks, so the
  α-spending across looks and Holm across metrics both hold);
- INCONCLUSIVE: the data decide neither way (the exit status follows ``on_inconclusive``);
- PASS: every compared metric is non-inferior (lower bound of Δ > −δ; an intersection–union
  test, so no adjustment is needed) and every threshold is cleared.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from evalgate import stats
from evalgate.errors import ExitCode
from evalgate.run.summary import RunSummary

if TYPE_CHECKING:  # a run compared with nothing reads no comparison (compare.paired: ~3 ms)
    from evalgate.compare.paired import MetricComparison, RunComparison
    from evalgate.config.spec import GateSettings

__all__ = ["NO_GATE", "Check", "Verdict", "decide"]

NO_GATE = (
    "no gate configured: nothing was compared — set gate.thresholds in evals.yaml, "
    "or compare with a baseline (--baseline DIR)"
)

Status = Literal["PASS", "FAIL", "INCONCLUSIVE", "ERROR", "INFO"]
_SEVERITY = ("ERROR", "FAIL", "INCONCLUSIVE", "PASS")


@dataclass(frozen=True)
class Check:
    """One decision: a model × benchmark × metric against a threshold or the baseline."""

    model: str
    benchmark: str
    metric: str
    kind: Literal["threshold", "baseline", "errors", "score", "policy"]  # policy: action/policy.py
    status: Status
    reason: str = ""
    estimate: stats.Estimate | None = None
    threshold: float | None = None
    comparison: MetricComparison | None = None
    p: float | None = None  # the p-value Holm's FAIL decision uses, when there is one


@dataclass(frozen=True)
class Verdict:
    status: Literal["PASS", "FAIL", "INCONCLUSIVE", "ERROR", "UNGATED"]
    checks: tuple[Check, ...]
    runs: tuple[RunSummary, ...]
    reasons: tuple[str, ...]
    comparisons: tuple[RunComparison, ...] = ()
    on_inconclusive: str = "warn"
    policy: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> ExitCode:
        if self.status == "INCONCLUSIVE":
            fail = self.on_inconclusive == "fail"
            return ExitCode.GATE_FAILED if fail else ExitCode.PASS
        return {
            "PASS": ExitCode.PASS,
            "UNGATED": ExitCode.PASS,
            "FAIL": ExitCode.GATE_FAILED,
            "ERROR": ExitCode.INFRA,
        }[self.status]


def _reasons(checks: list[Check]) -> tuple[str, ...]:
    """One line per FAIL/ERROR/INCONCLUSIVE check; a run-level ERROR that several benchmarks of
    one model share (the server died, the endpoint stopped answering) is said once, naming them
    all: one cause, one line."""
    lines: dict[tuple[str, ...], list[str]] = {}
    for c in checks:
        if c.status not in ("FAIL", "ERROR", "INCONCLUSIVE"):
            continue
        if c.status == "ERROR" and c.metric == "-":
            lines.setdefault(("shared", c.model, c.reason), []).append(c.benchmark)
        else:
            lines[("own", str(len(lines)))] = [
                f"{c.model} / {c.benchmark} / {c.metric}: {c.reason}"
            ]
    out = []
    for key, value in lines.items():
        if key[0] == "shared":
            _, model, reason = key
            out.append(f"{model} / {', '.join(value)} / -: {reason}")
        else:
            out.extend(value)
    return tuple(out)


def _run_checks(run: RunSummary, gate: GateSettings, max_error_rate: float) -> list[Check]:
    of_run = functools.partial(Check, run.model, run.benchmark)  # every check names this run
    if run.infra_error is not None:
        return [of_run("-", "errors", "ERROR", run.infra_error)]
    out = []
    if run.error_rate > max_error_rate:
        reason = (
            f"{run.errors}/{run.n_rollouts} rollouts errored ({run.error_rate:.1%} > "
            f"max_error_rate {max_error_rate:.1%}): scores not trusted"
        )
        if run.error_kinds:
            kinds = sorted(run.error_kinds.items(), key=lambda kv: -kv[1])
            reason += " (" + ", ".join(f"{kind}: {count}" for kind, count in kinds) + ")"
        if run.error_example:
            reason += f"; first: {run.error_example}"
        out.append(of_run("errors", "errors", "ERROR", reason))
    # An agent variant's run ("tasks.skills") is held to its benchmark's ("tasks") thresholds.
    thresholds = gate.thresholds.get(run.benchmark) or gate.thresholds.get(
        run.extra.get("benchmark", run.benchmark), {}
    )
    clustered = any(g is not None for g in run.groups.values())
    for name, est in run.metrics.items():
        minimum = thresholds.get(name)
        if minimum is None:
            out.append(of_run(name, "score", "INFO", estimate=est))
            continue
        per_item = run.per_item.get(name, {})
        ids = sorted(per_item)
        scores = [per_item[i] for i in ids]
        clusters = [run.groups.get(i) or f"item:{i}" for i in ids] if clustered else None
        from evalgate.compare.paired import threshold_test  # a threshold to test: loaded now

        status, p_below, lo = threshold_test(scores, minimum, clusters=clusters, alpha=gate.alpha)
        if status == "PASS":
            reason = f"lower bound {lo:.3f} ≥ {minimum:.3f}"
        else:
            reason = f"{est.mean:.3f} vs minimum {minimum:.3f} (p = {p_below:.3g})"
        out.append(
            of_run(name, "threshold", status, reason, estimate=est, threshold=minimum, p=p_below)
        )
    for name in sorted(set(thresholds) - set(run.metrics)):
        have = ", ".join(run.metrics) or "none"
        reason = f"metric {name!r} was not produced (have: {have})"
        out.append(of_run(name, "threshold", "FAIL", reason, p=0.0, threshold=thresholds[name]))
    return out


def _comparison_checks(comp: RunComparison) -> list[Check]:
    of_comp = functools.partial(Check, comp.model, comp.benchmark)  # every check names it
    if not comp.comparable:
        # Nothing that cannot be compared passes quietly while the base gates (a baseline
        # exists, so its margin applies): the PR has not shown it did not regress.
        reason = f"baseline not comparable: {comp.reason}"
        return [of_comp("-", "baseline", "FAIL", reason, p=0.0)]
    out = []
    for mc in comp.metrics:
        r = mc.result
        if r is None:
            out.append(of_comp(mc.metric, "baseline", "INCONCLUSIVE", mc.reason, comparison=mc))
            continue
        # Each bound at the precision that keeps it on its side of the edge it is tested
        # against (L vs −δ, U vs 0), so the text never contradicts the status.
        lo_digits = stats.decimals_against(r.lo, -r.margin, 3, scale=1.0)
        hi_digits = stats.decimals_against(r.hi, 0.0, 3, scale=1.0)
        reason = (
            f"Δ {r.delta:+.3f} [{r.lo:+.{lo_digits}f}, {r.hi:+.{hi_digits}f}], "
            f"margin −{r.margin:.3f}"
        )
        if r.level is not None:
            reason += f" (repeated bounds at nominal one-sided level {r.level:.4g})"
        if r.note:
            reason += f"; {r.note}"
        if mc.scale is not None and mc.scale.assumption:
            reason += f"; {mc.scale.assumption}"
        if mc.blocked:  # why it cannot PASS comes first: the bounds alone would say it may
            reason = f"{mc.blocked}; {reason}"
        out.append(
            of_comp(mc.metric, "baseline", mc.status, reason, comparison=mc, p=r.p_regression)
        )
    return out


def _holm_stop(checks: list[Check], testable: list[int], rejected: list[bool]) -> int | None:
    """The check at which Holm's step-down stopped: the smallest p it did not reject."""
    kept = [i for i, reject in zip(testable, rejected, strict=True) if not reject]
    return min(kept, key=lambda i: checks[i].p or 0.0) if kept else None


def _scale_notes(run: RunSummary, gate: GateSettings) -> list[str]:
    """A line per metric whose values leave the range ``gate.scales`` declares for it."""
    out = []
    for metric, declared in gate.scales.items():
        if declared == "count" or metric not in run.per_item:
            continue
        low, high = (0.0, 1.0) if declared == "proportion" else declared
        values = [v for v in run.per_item[metric].values() if math.isfinite(v)]
        if not values or (low <= min(values) and max(values) <= high):
            continue
        shown = "proportion ([0, 1])" if declared == "proportion" else f"[{low:g}, {high:g}]"
        lo, hi = min(values), max(values)
        seen = f"{lo:g}" if lo == hi else f"{lo:g} to {hi:g}"
        out.append(
            f"{run.model} / {run.benchmark} / {metric}: values outside the declared range "
            f"gate.scales.{metric} = {shown} (seen: {seen}); fix the range, or name the "
            "metric it is meant for"
        )
    return out


def _holm_rank(checks: list[Check], testable: list[int], i: int) -> int:
    """m − j + 1 for the j-th smallest p: the divisor of α Holm applies to check i."""
    smaller = sum(1 for j in testable if (checks[j].p or 0.0) < (checks[i].p or 0.0))
    return len(testable) - smaller


def decide(
    runs: list[RunSummary],
    gate: GateSettings,
    *,
    error_budgets: dict[str, float],
    comparisons: list[RunComparison] | tuple[RunComparison, ...] = (),
) -> Verdict:
    """Apply the gate policy (``GateSettings``) to every run and every baseline comparison.

    ``error_budgets`` maps a benchmark to its ``eval.max_error_rate``.
    """
    checks: list[Check] = []
    for run in runs:
        checks.extend(_run_checks(run, gate, error_budgets.get(run.benchmark, 0.05)))
    for comp in comparisons:
        checks.extend(_comparison_checks(comp))

    # FAIL decisions: Holm over every hypothesis that could fail (thresholds and regressions).
    testable = [i for i, c in enumerate(checks) if c.p is not None and c.status != "ERROR"]
    pvalues = [p for i in testable if (p := checks[i].p) is not None]  # all: testable has one
    rejected = stats.holm(pvalues, alpha=gate.alpha) if testable else []
    stop = _holm_stop(checks, testable, list(rejected))
    for i, reject in zip(testable, rejected, strict=True):
        c = checks[i]
        if c.status == "PASS" or (c.status == "FAIL" and c.p == 0.0):
            continue
        new: Status = "FAIL" if reject else "INCONCLUSIVE"
        if c.status == "FAIL" and not reject and stop is not None:
            # The bounds shown are at α. Only the test the step-down stopped at was compared
            # with a smaller level; those after it were never compared with anything.
            needs = (
                f"p = {checks[stop].p:.3g} needs ≤ "
                f"{gate.alpha:g}/{_holm_rank(checks, testable, stop)}"
            )
            if i == stop:
                why = (
                    f"not significant after Holm adjustment across {len(testable)} tests ({needs})"
                )
            else:
                why = (
                    f"not significant after Holm's step-down across {len(testable)} tests: it "
                    f"stopped before this test, at {checks[stop].metric} of "
                    f"{checks[stop].benchmark} ({needs})"
                )
            reason = f"{c.reason} — {why}"
        else:
            reason = c.reason
        checks[i] = Check(**{**c.__dict__, "status": new, "reason": reason})

    statuses = {c.status for c in checks}
    status = next((s for s in _SEVERITY if s in statuses), "PASS")
    # Most severe first: the scorecard's first lines say why it did not pass (the list is cut
    # at 20), before any INCONCLUSIVE of other benchmarks.
    shown = [c for c in checks if c.status in ("FAIL", "ERROR", "INCONCLUSIVE")]
    shown.sort(key=lambda c: _SEVERITY.index(c.status))
    reasons = _reasons(shown)
    if status == "PASS" and not any(c.kind in ("threshold", "baseline") for c in checks):
        # Scores with nothing to hold them to are not a PASS: say so, exit 0.
        status = "UNGATED"
        reasons = (NO_GATE,)
    # A comparison says it in its own reason (compare.paired); a run compared with nothing
    # would show scores in the units of a range they leave, with no word about it.
    compared = {(c.model, c.benchmark) for c in comparisons}
    reasons += tuple(
        note
        for run in runs
        if (run.model, run.benchmark) not in compared
        for note in _scale_notes(run, gate)
    )
    return Verdict(
        status=status,  # type: ignore[arg-type]
        checks=tuple(checks),
        runs=tuple(runs),
        reasons=reasons,
        comparisons=tuple(comparisons),
        on_inconclusive=gate.on_inconclusive,
        policy=gate.model_dump(mode="json"),
    )
