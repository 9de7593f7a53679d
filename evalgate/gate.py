"""The gate: run summaries + policy → a verdict with reasons.

Outcomes, most severe first: ERROR (the infrastructure failed or too many rollouts errored: the
scores can't be trusted, exit 3), FAIL (a threshold missed, exit 1), PASS (exit 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from evalgate.errors import ExitCode
from evalgate.score import RunSummary
from evalgate.stats import Estimate

__all__ = ["Check", "Verdict", "decide"]

Status = Literal["PASS", "FAIL", "ERROR", "INFO"]


@dataclass(frozen=True)
class Check:
    """One row of the scorecard: a model × benchmark × metric and what the gate made of it."""

    model: str
    benchmark: str
    metric: str
    estimate: Estimate | None
    threshold: float | None
    status: Status
    reason: str = ""


@dataclass(frozen=True)
class Verdict:
    status: Literal["PASS", "FAIL", "ERROR"]
    checks: tuple[Check, ...]
    runs: tuple[RunSummary, ...]
    reasons: tuple[str, ...]

    @property
    def exit_code(self) -> ExitCode:
        return {
            "PASS": ExitCode.PASS,
            "FAIL": ExitCode.GATE_FAILED,
            "ERROR": ExitCode.INFRA,
        }[self.status]


def _run_checks(run: RunSummary, thresholds: dict[str, float], max_error_rate: float):
    if run.infra_error is not None:
        yield Check(run.model, run.benchmark, "-", None, None, "ERROR", run.infra_error)
        return
    if run.error_rate > max_error_rate:
        yield Check(
            run.model, run.benchmark, "errors", None, None, "ERROR",
            f"{run.errors}/{run.n_rollouts} rollouts errored ({run.error_rate:.1%} > "
            f"max_error_rate {max_error_rate:.1%}): scores not trusted",
        )  # fmt: skip
    for name, est in run.metrics.items():
        minimum = thresholds.get(name)
        if minimum is None:
            yield Check(run.model, run.benchmark, name, est, None, "INFO")
        elif est.mean >= minimum:
            yield Check(run.model, run.benchmark, name, est, minimum, "PASS")
        else:
            reason = f"{est.mean:.3f} < {minimum:.3f}"
            yield Check(run.model, run.benchmark, name, est, minimum, "FAIL", reason)
    for name in sorted(set(thresholds) - set(run.metrics)):
        yield Check(
            run.model, run.benchmark, name, None, thresholds[name], "FAIL",
            f"metric {name!r} was not produced (have: {', '.join(run.metrics) or 'none'})",
        )  # fmt: skip


def decide(runs: list[RunSummary], config: Any) -> Verdict:
    """Apply the config's thresholds and error budget to every run."""
    by_name = {b.name: b for b in config.benchmarks}
    checks: list[Check] = []
    for run in runs:
        thresholds = config.gate.thresholds.get(run.benchmark, {})
        bench = by_name.get(run.benchmark)
        budget = bench.eval.max_error_rate if bench is not None else 0.05
        checks.extend(_run_checks(run, thresholds, budget))
    statuses = {c.status for c in checks}
    status: Literal["PASS", "FAIL", "ERROR"] = (
        "ERROR" if "ERROR" in statuses else "FAIL" if "FAIL" in statuses else "PASS"
    )
    reasons = tuple(
        f"{c.model} / {c.benchmark} / {c.metric}: {c.reason}"
        for c in checks
        if c.status in ("FAIL", "ERROR")
    )
    return Verdict(status=status, checks=tuple(checks), runs=tuple(runs), reasons=reasons)
