"""The one module that sees every stage: config → serve → sandbox → suites → run → compare →
gate → report → publish (their numbers: docs/development.md).

Backends come in as arguments (``open_server``), so tests and the Action can substitute their own.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from evalgate.config.load import Config
from evalgate.config.spec import EvalSettings
from evalgate.errors import UsageError
from evalgate.run.budget import BudgetMeter
from evalgate.run.fingerprint import dataset_hash
from evalgate.run.layout import JUNIT, REPORT_HTML, RUN_CONFIG, SCORECARD, VERDICT, new_run_id
from evalgate.run.lock import lock_run, unlock_run
from evalgate.run.progress import Progress
from evalgate.run.rundir import RunDir, find_run_dirs, load_runs, read_run_config, write_json
from evalgate.run.runfiles import RunConfig
from evalgate.run.session import RunContext, evaluate
from evalgate.sandbox import Sandboxes, open_backend
from evalgate.serve import open_server
from evalgate.suites import Suite, build_suites

if TYPE_CHECKING:  # comparing, gating and reporting load when a run gets there (start-up time)
    from evalgate.compare.paired import LoadedRun, RunComparison
    from evalgate.config.spec import Benchmark, GateSettings, HFHubSettings
    from evalgate.gate import Verdict
    from evalgate.report.link import ReportLink
    from evalgate.run.sequential import SequentialResult
    from evalgate.run.summary import RunSummary
    from evalgate.sandbox import SandboxBackend
    from evalgate.serve.registry import ServerFactory

__all__ = [
    "Invocation",
    "check_baselines",
    "gate_runs",
    "load_baselines",
    "resume",
    "run",
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
    budgets = {h.benchmark: _error_budget(h.config) for h in heads}
    if error_budgets is not None:  # a live run without baselines: read from its run_config.json
        budgets.update(error_budgets)
    verdict = decide(summaries, gate, error_budgets=budgets, comparisons=comparisons)
    write_report(verdict, output_root, link=link, run_id=run_id)
    return verdict


def _error_budget(run_config: RunConfig) -> float:
    recorded = run_config.benchmark.eval
    budget = recorded.max_error_rate if recorded is not None else None
    return budget if budget is not None else EvalSettings().max_error_rate


@dataclasses.dataclass(frozen=True)
class Invocation:
    """What one `run` or `resume` call brings besides the config: where results go, the
    environment, and the backends and callbacks (substituted by tests and the Action).

    ``cache_dir``: where the response cache lives; None (``--no-cache``) for no cache.
    ``server_factory`` / ``sandbox_factory``: the backends (model servers, sandboxes), passed
    in so that tests and the Action can substitute their own; sandboxes are opened once per
    invocation."""

    output_root: Path
    environ: dict[str, str]
    progress: Progress
    log: Callable[[str], None] = print
    server_factory: ServerFactory = open_server
    sandbox_factory: Callable[[str], SandboxBackend] = open_backend
    cache_dir: Path | None = None

    def context(
        self,
        config: Config,
        run_id: str,
        *,
        baselines: dict[tuple[str, str], LoadedRun],
        run_dirs: dict[str, RunDir] | None = None,
        retry_errors: bool = False,
    ) -> RunContext:
        return RunContext(
            config=config,
            run_id=run_id,
            output_root=self.output_root,
            environ=self.environ,
            progress=self.progress,
            server_factory=self.server_factory,
            log=self.log,
            baselines=baselines,
            run_dirs=run_dirs,
            retry_errors=retry_errors,
            budget=BudgetMeter(config.budget),
        )


def run(
    config: Config,
    how: Invocation,
    *,
    baselines: dict[tuple[str, str], LoadedRun] | None = None,
    run_id: str | None = None,
) -> Verdict:
    """Evaluate every model on every benchmark, gate, and write the report files.

    ``how``: where results go, the environment and the backends (:class:`Invocation`).
    ``run_id``: the id the run directories get (the caller names it in `evalgate resume` hints).
    """
    with _sandboxes(how.sandbox_factory) as sandboxes, _closing() as opened:
        # Load every dataset (and the baseline) before starting any server: a data error should
        # cost no model start-up.
        suites = [(b, opened(s)) for b in config.benchmarks for s in build_suites(b, sandboxes)]
        return _run_suites(config, suites, how, baselines=baselines, run_id=run_id or new_run_id())


@contextlib.contextmanager
def _closing() -> Iterator[Callable[[Suite], Suite]]:
    """``opened(suite)`` registers a suite to be closed (its worker stopped) when the block
    ends, however it ends: a suite built before a later one failed to build is closed too."""
    built: list[Suite] = []

    def opened(suite: Suite) -> Suite:
        built.append(suite)
        return suite

    try:
        yield opened
    finally:
        for suite in built:
            suite.close()


@contextlib.contextmanager
def _sandboxes(factory: Callable[[str], SandboxBackend]) -> Iterator[Sandboxes]:
    sandboxes = Sandboxes(factory)
    try:
        yield sandboxes
    finally:
        sandboxes.close()


def _run_suites(
    config: Config,
    suites: list[tuple[Benchmark, Suite]],
    how: Invocation,
    *,
    baselines: dict[tuple[str, str], LoadedRun] | None,
    run_id: str,
) -> Verdict:
    ctx = how.context(config, run_id, baselines=baselines or {})
    summaries, decisions = evaluate(ctx, suites, how.cache_dir)
    verdict = _gate(ctx, summaries, decisions)
    if config.publish.hf_hub is not None and any(s.run_dir for s in summaries):
        _publish_hub(config.publish.hf_hub, ctx.run_id, how)
    return verdict


def _publish_hub(hub: HFHubSettings, run_id: str, how: Invocation) -> None:
    """``publish.hf_hub``: push the run; a failed upload is a warning, the verdict stands."""
    from evalgate.errors import EvalgateError
    from evalgate.publish.hf_hub import push_run

    try:
        push_run(
            run_id,
            repo=hub.repo,
            output_root=how.output_root,
            environ=how.environ,
            private=hub.private,
            log=how.log,
        )
    except EvalgateError as exc:
        how.log(f"[evalgate] warning: publish.hf_hub: not pushed: {exc}")


def _gate(
    ctx: RunContext,
    summaries: list[RunSummary],
    decisions: dict[tuple[str, str], SequentialResult],
) -> Verdict:
    from evalgate.report.link import report_link

    # A run the endpoint stopped mid-way is ERROR and unfinished (no metadata.json): not read.
    dirs = [Path(s.run_dir) for s in summaries if s.run_dir and not s.extra.get("unfinished")]
    heads: list[LoadedRun] = []
    budgets: dict[str, float] = {}
    if ctx.baselines:  # read back whole to be compared (a 2,000-item journal: ~0.1 s)
        from evalgate.compare.paired import load_run

        heads = [load_run(d) for d in dirs]
    else:  # nothing to compare: each run's error budget is all the gate reads of it
        for d in dirs:
            cfg = read_run_config(d)
            budgets[cfg.benchmark.name] = _error_budget(cfg)
    return gate_runs(
        heads,
        ctx.baselines,
        ctx.config.gate,
        summaries=summaries,
        decisions=decisions,
        output_root=ctx.output_root,
        link=report_link(ctx.environ, ctx.output_root),
        error_budgets=budgets,
        run_id=ctx.run_id,
    )


def _saved_config(run_dir: Path) -> RunConfig:
    """A run's run_config.json, with what resume needs of it; a one-line error otherwise."""
    cfg = read_run_config(run_dir)
    missing = [k for k in ("config_path", "gate") if getattr(cfg, k) is None]
    if missing:
        raise UsageError(
            f"{run_dir / RUN_CONFIG}: not a run configuration evalgate wrote (no "
            f"{', '.join(missing)}); this run cannot be resumed"
        )
    return cfg


def resume(
    run: str,
    how: Invocation,
    *,
    retry_errors: bool = False,
    budget: Mapping[str, object] | None = None,
) -> Verdict:
    """Finish an interrupted run (a run id under ``output_root``, or one run directory).

    Each benchmark's configuration comes from its run_config.json, so overrides given to the
    original run hold. The journal is repaired (torn tail, duplicates), its records kept, and
    only the missing (item, rollout) pairs are run, appended to the same results.jsonl. A run
    started with a baseline is compared with that baseline again (recorded in run_config.json,
    checked by digest), and sequential looks are re-run counting the journal's rollouts.
    ``budget``: caps replacing the run's recorded ones, field by field (``--budget.tokens=N``).
    """
    dirs = find_run_dirs(how.output_root, run)
    try:
        for path in dirs:  # before anything starts: a second resume of one run is refused
            lock_run(path)
        return _resume_locked(run, dirs, how, retry_errors=retry_errors, budget=budget)
    finally:
        for path in dirs:
            unlock_run(path)


def _resume_locked(
    run: str,
    dirs: list[Path],
    how: Invocation,
    *,
    retry_errors: bool,
    budget: Mapping[str, object] | None,
) -> Verdict:
    saved = [(RunDir(p), _saved_config(p)) for p in dirs]
    first = saved[0][1]
    try:
        config = Config.model_validate(
            {
                "path": first.config_path,
                "models": [first.model.as_written()],
                "benchmarks": [cfg.benchmark.as_written() for _, cfg in saved],
                "gate": first.gate,
                "budget": {**(first.budget or {}), **(budget or {})},
            }
        )
    except ValidationError as exc:  # another version's run_config.json, or a hand edit
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise UsageError(
            f"{dirs[0] / RUN_CONFIG}: {where}: {err['msg']}; this run cannot be resumed"
        ) from None
    if any(cfg.model != first.model for _, cfg in saved):
        raise UsageError(f"run {run!r} holds several models; resume one run directory at a time")
    with _sandboxes(how.sandbox_factory) as sandboxes, _closing() as opened:
        return _resume_runs(config, saved, sandboxes, how, run_id=dirs[0].name,
                            retry_errors=retry_errors, opened=opened)  # fmt: skip


def _recorded_baselines(
    config: Config,
    suites: list[tuple[Benchmark, Suite]],
    saved: list[tuple[RunDir, RunConfig]],
    log: Callable[[str], None],
) -> dict[tuple[str, str], LoadedRun]:
    """The baselines the runs were started with (run_config.json's ``baseline``), so a resumed
    run is compared, and its sequential looks re-run, as the uninterrupted run would have been.
    Keyed like ``--baseline``'s: (model label, benchmark) and (model label, suite).

    A baseline gone or changed stops the resume of a sequential run (its looks would pair with
    other items and decide differently); any other run is finished without the comparison.
    """
    from evalgate.run.baseline import load_recorded_baseline

    model = config.models[0].name
    out: dict[tuple[str, str], LoadedRun] = {}
    for (bench, suite), (run_dir, cfg) in zip(suites, saved, strict=True):
        if cfg.baseline is None:
            continue
        try:
            base = load_recorded_baseline(run_dir.path, cfg.baseline)
        except UsageError as exc:
            if cfg.sequential is not None:
                raise
            log(f"[evalgate] warning: {exc}; finishing the run without the comparison")
            continue
        out[(model, suite.name)] = base
        out.setdefault((model, bench.name), base)
    return out


def _resume_runs(
    config: Config,
    saved: list[tuple[RunDir, RunConfig]],
    sandboxes: Sandboxes,
    how: Invocation,
    *,
    run_id: str,
    retry_errors: bool,
    opened: Callable[[Suite], Suite],
) -> Verdict:
    suites = []
    for bench, (_, cfg) in zip(config.benchmarks, saved, strict=True):
        name = cfg.suite or bench.name  # an agent variant's run: "{benchmark}.{variant}"
        match = [s for s in map(opened, build_suites(bench, sandboxes)) if s.name == name]
        if not match:
            raise UsageError(f"{name}: no such suite in the run's own config; start a new run")
        suites.append((bench, match[0]))
    for (bench, suite), (_, cfg) in zip(suites, saved, strict=True):
        recorded = cfg.fingerprint.dataset
        if recorded is None or dataset_hash(suite.items) != recorded.hash:
            raise UsageError(f"{bench.name}: the dataset changed since the run; start a new one")
    ctx = how.context(
        config,
        run_id,
        baselines=_recorded_baselines(config, suites, saved, how.log),
        run_dirs={s.name: rd for (_, s), (rd, _) in zip(suites, saved, strict=True)},
        retry_errors=retry_errors,
    )
    summaries, decisions = evaluate(ctx, suites, how.cache_dir)
    return _gate(ctx, summaries, decisions)
