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
from evalgate.errors import UsageError
from evalgate.gating import (
    check_baselines,
    error_budget,
    gate_runs,
    load_baselines,
    write_report,
)
from evalgate.run.budget import BudgetMeter
from evalgate.run.fingerprint import dataset_hash
from evalgate.run.layout import RUN_CONFIG, new_run_id
from evalgate.run.lock import lock_run, unlock_run
from evalgate.run.progress import Progress
from evalgate.run.rundir import RunDir, find_run_dirs, read_run_config
from evalgate.run.runfiles import RunConfig
from evalgate.run.session import RunContext, evaluate
from evalgate.sandbox import Sandboxes, open_backend
from evalgate.serve import open_server
from evalgate.suites import Suite, build_suites

if TYPE_CHECKING:  # comparing, gating and reporting load when a run gets there (start-up time)
    from evalgate.compare.paired import LoadedRun
    from evalgate.config.spec import Benchmark, HFHubSettings
    from evalgate.gate import Verdict
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
            budgets[cfg.benchmark.name] = error_budget(cfg)
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
