"""Gate finished runs against their baselines and write the report files: what ``run``,
``resume`` (:mod:`evalgate.pipeline`, which re-exports these) and ``evalgate compare`` share.

Apart from the pipeline so that `compare`, which gates saved runs without a model, does not
import the run machinery (the HTTP client, sandboxes, suites: ~13 MiB of modules at its peak,
bench/compare_scale.py); tests/test_compare_scale.py checks what it imports.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from evalgate.config.spec import EvalSettings
from evalgate.errors import UsageError
from evalgate.run.layout import JUNIT, REPORT_HTML, SCORECARD, VERDICT
from evalgate.run.rundir import load_runs, write_json

if TYPE_CHECKING:
    from evalgate.compare.paired import LoadedRun, RunComparison
    from evalgate.config.load import Config
    from evalgate.config.spec import GateSettings
    from evalgate.gate import Verdict
    from evalgate.report.link import ReportLink
    from evalgate.run.runfiles import RunConfig
    from evalgate.run.sequential import SequentialResult
    from evalgate.run.summary import RunSummary

__all__ = [
    "check_baselines",
    "error_budget",
    "gate_runs",
    "load_baselines",
    "write_report",
]


def load_baselines(path: Path) -> dict[tuple[str, str], LoadedRun]:
    """Baseline runs from an output root or a run directory (``--baseline DIR``), read and
    checked whole: a damaged baseline is refused here, before any model starts."""
    return load_runs(path)


def check_baselines(config: Config, baselines: dict[tuple[str, str], LoadedRun]) -> None:
    """A baseline that matches no (model, benchmark) of the config would compare nothing and
    gate nothing: refused in one line, before any model starts."""
    wanted = [(m.name, b.name) for m in config.models for b in config.benchmarks]
    if baselines and not any(key in baselines for key in wanted):
        have = ", ".join(f"{m}/{b}" for m, b in sorted(baselines))
        runs = ", ".join(f"{m}/{b}" for m, b in wanted)
        raise UsageError(
            f"--baseline: no run matches a model/benchmark of {config.path} (baseline has: "
            f"{have}; this run: {runs}); runs pair on the model's name and the benchmark's"
        )


def _apply_sequential(
    comparisons: list[RunComparison], decisions: dict[tuple[str, str], SequentialResult]
) -> list[RunComparison]:
    """The sequential decision replaces the fixed-sample status of the metric it decided."""
    out = []
    for comp in comparisons:
        seq = decisions.get((comp.model, comp.benchmark))
        if seq is not None and comp.comparable:
            metrics = tuple(
                dataclasses.replace(
                    mc,
                    status=seq.decision,
                    reason=f"sequential: decided at look {seq.look}/{seq.looks}",
                )
                if mc.metric == seq.metric and mc.result is not None
                else mc
                for mc in comp.metrics
            )
            comp = dataclasses.replace(comp, metrics=metrics)
        out.append(comp)
    return out


def write_report(
    verdict: Verdict,
    output_root: Path,
    *,
    link: ReportLink | None = None,
    run_id: str | None = None,
) -> None:
    """scorecard.md, verdict.json, junit.xml and report.html for this invocation; the scorecard
    links the report when ``link`` (the artifact the job uploads the outputs in) is known.

    ``run_id``: this invocation's (``run`` and ``resume``): its scorecard and verdict are kept
    under ``reports/{run_id}/`` too, and the root names every other invocation that wrote to
    the folder while this one ran (:mod:`evalgate.report.shared_folder`)."""
    from evalgate.report import render_scorecard, verdict_json

    output_root.mkdir(parents=True, exist_ok=True)
    scorecard = render_scorecard(
        verdict,
        report_url=link.url if link else None,
        report_artifact=link.artifact if link else None,
        relative_to=output_root,
    )
    data = verdict_json(verdict)
    if run_id is None:
        _write_root(verdict, output_root, scorecard, data)
        return
    from evalgate.report import shared_folder

    own = output_root / shared_folder.REPORTS / run_id
    own.mkdir(parents=True, exist_ok=True)
    (own / SCORECARD).write_text(scorecard, encoding="utf-8")
    write_json(own / VERDICT, data)
    with shared_folder.report_lock(output_root):  # one invocation's root files, never a mix
        others = shared_folder.concurrent_invocations(output_root, run_id)
        data["invocation"] = shared_folder.invocation_entry(run_id, data)
        data["concurrent_invocations"] = others
        _write_root(verdict, output_root, shared_folder.with_note(scorecard, others), data)


def _write_root(
    verdict: Verdict, output_root: Path, scorecard: str, data: dict[str, object]
) -> None:
    from evalgate.report.html import write_html
    from evalgate.report.junit import render_junit

    (output_root / SCORECARD).write_text(scorecard, encoding="utf-8")
    write_html(verdict, output_root / REPORT_HTML)
    write_json(output_root / VERDICT, data)
    (output_root / JUNIT).write_text(render_junit(verdict), encoding="utf-8")


def gate_runs(
    heads: list[LoadedRun],
    baselines: dict[tuple[str, str], LoadedRun],
    gate: GateSettings,
    *,
    summaries: list[RunSummary] | None = None,
    decisions: dict[tuple[str, str], SequentialResult] | None = None,
    output_root: Path,
    link: ReportLink | None = None,
    saved: bool = False,
    error_budgets: dict[str, float] | None = None,
    run_id: str | None = None,
) -> Verdict:
    """Compare finished runs with their baselines, decide, and write scorecard.md/verdict.json.

    What ``run``, ``resume`` and ``evalgate compare`` share. ``summaries`` defaults to the runs'
    own summaries; a live run passes its own (they carry infrastructure failures, which left no
    run directory). ``saved``: the heads are saved folders (`compare`), so what the base gates
    and they lack is a FAIL (:func:`~evalgate.compare.paired.missing_from_head`).
    ``error_budgets``: benchmark → ``eval.max_error_rate`` of runs not passed as ``heads`` (a
    live run with nothing to compare reads no journal back). ``run_id``: the invocation's, see
    :func:`write_report`.
    """
    from evalgate.gate import decide

    comparisons: list[RunComparison] = []
    if heads and (baselines or saved or summaries is None):  # else there is nothing to compare
        from evalgate.compare.paired import compare_with_baselines, missing_from_head, summary_of

        comparisons = _apply_sequential(
            compare_with_baselines(heads, baselines, gate), decisions or {}
        )
        if saved:
            comparisons += missing_from_head(heads, baselines, gate)
        if summaries is None:
            summaries = [summary_of(h) for h in heads]
    if summaries is None:  # no heads: nothing ran, nothing to summarise
        summaries = []
    # Each run's error budget is the one it ran with (its run_config), so a run gated later
    # (compare, resume) is held to the same budget as when it ran.
    budgets = {h.benchmark: error_budget(h.config) for h in heads}
    if error_budgets is not None:  # a live run without baselines: read from its run_config.json
        budgets.update(error_budgets)
    verdict = decide(summaries, gate, error_budgets=budgets, comparisons=comparisons)
    write_report(verdict, output_root, link=link, run_id=run_id)
    return verdict


def error_budget(run_config: RunConfig) -> float:
    """The ``eval.max_error_rate`` a run ran with (its run_config), else the default."""
    recorded = run_config.benchmark.eval
    budget = recorded.max_error_rate if recorded is not None else None
    return budget if budget is not None else EvalSettings().max_error_rate
