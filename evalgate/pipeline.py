"""The one module that sees every stage: config → serve → run → score → gate → report.

Backends come in as arguments (``open_server``), so tests and the Action can substitute their own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalgate import __version__
from evalgate.compare.baseline import find_runs
from evalgate.compare.paired import LoadedRun, compare_with_baselines, load_run
from evalgate.config.load import Config
from evalgate.errors import InfraError, UsageError
from evalgate.gate import Verdict, decide
from evalgate.report import render_scorecard, verdict_json
from evalgate.run.cache import ResponseCache
from evalgate.run.client import ChatClient
from evalgate.run.costs import cost_usd
from evalgate.run.engine import run_suite
from evalgate.run.fingerprint import dataset_hash, fingerprint
from evalgate.run.journal import order_records, resume_journal
from evalgate.run.progress import Progress
from evalgate.run.rundir import RunDir, new_run_id, write_json
from evalgate.run.sequential import SequentialResult, run_sequential
from evalgate.run.summary import RunSummary, item_metrics, summarize
from evalgate.serve import Endpoint, open_server
from evalgate.suites import Suite, build_suites

__all__ = ["load_baselines", "resume", "run", "write_report"]


def load_baselines(path: Path) -> dict[tuple[str, str], LoadedRun]:
    """Baseline runs from an output root or a run directory (``--baseline DIR``)."""
    return {key: load_run(p, origin={"run_id": p.name}) for key, p in find_runs(path).items()}


def _run_config(
    config: Config, model: Any, bench: Any, endpoint: Endpoint, suite: Suite, server: Any
) -> dict[str, Any]:
    # Which chat template the server applied (vLLM backends resolve one; others: the server's).
    chat = getattr(server, "chat_template", None)
    template = chat.record() if chat is not None else None
    return {
        "fingerprint": fingerprint(
            bench,
            model,
            endpoint.model_id,
            suite.items,
            chat_template=template["sha256"] if template else None,
            variant=getattr(suite, "variant", None),
        ),
        "chat_template": template,
        "suite": suite.name,
        "evalgate_version": __version__,
        "config_path": str(config.path),
        "model": model.model_dump(mode="json"),
        "endpoint": {"base_url": endpoint.base_url, "model": endpoint.model},
        "model_id": endpoint.model_id,
        "benchmark": bench.model_dump(mode="json"),
        "gate": config.gate.model_dump(mode="json"),
    }


def _metadata(summary: RunSummary, bench: Any, time_s: float) -> dict[str, Any]:
    metrics = {k: v.mean for k, v in summary.metrics.items()}
    return {
        "benchmark": summary.benchmark,
        "model": summary.model,
        "model_id": summary.model_id,
        "num_examples": summary.n_items,
        "rollouts_per_example": summary.rollouts,
        "sampling_args": bench.sampling.model_dump(mode="json"),
        "time_ms": round(time_s * 1000, 1),
        "avg_reward": metrics.get("accuracy", metrics.get("reward")),
        "avg_metrics": {k: v for k, v in metrics.items() if not k.startswith("pass")},
        "pass_at_k": {k: v for k, v in metrics.items() if k.startswith("pass")},
        "errors": summary.errors,
        "error_kinds": summary.error_kinds,
        "usage": summary.usage,
        "complete": True,
    }


async def _execute(
    suite: Suite,
    bench: Any,
    endpoint: Endpoint,
    run_dir: RunDir,
    progress: Progress,
    *,
    baseline: LoadedRun | None,
    gate: Any,
    cache: ResponseCache | None = None,
    cache_identity: str | None = None,
    skip: frozenset[tuple[str, int]] = frozenset(),
    kept: list[dict[str, Any]] | None = None,
    stats: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], SequentialResult | None]:
    ev = bench.eval
    progress.start(suite.name, len(suite.items) * ev.rollouts - len(skip))
    try:
        async with ChatClient(
            endpoint,
            bench.sampling,
            timeout_s=ev.request_timeout_s,
            max_retries=ev.max_retries,
            max_concurrent=ev.max_concurrent,
            adaptive=ev.adaptive_concurrency,
            cache=cache if ev.cache else None,
            cache_identity=cache_identity,
        ) as client:
            try:
                with run_dir.open_journal() as journal:

                    async def run_items(subset: Any) -> list[dict[str, Any]]:
                        return await run_suite(
                            subset,
                            client,
                            rollouts=ev.rollouts,
                            max_concurrent=ev.max_concurrent,
                            journal=journal,
                            on_result=lambda rec: progress.advance(error=rec["error"] is not None),
                            skip=skip,
                        )

                    if not (ev.sequential and baseline is not None):
                        return await run_items(suite), None
                    metric = _primary_metric(gate, baseline)
                    return await run_sequential(
                        suite,
                        baseline,
                        metric=metric,
                        rollouts=ev.rollouts,
                        looks=ev.looks,
                        margin=gate.margin,
                        alpha=gate.alpha,
                        seed=bench.sampling.seed or 0,
                        run_items=run_items,
                        prior=kept,  # a resumed run's looks count the journal's rollouts
                    )
            finally:
                if stats is not None:  # requests, retries and errors by kind, cache hits
                    stats.update(client.stats.as_dict())
    finally:
        progress.finish()


def _cache_identity(model: Any, run_config: dict[str, Any]) -> str:
    # What answers a request, stably across runs: the backend, the model and a digest of its
    # config (base_url, weights file, quantisation...) and the chat template the server applied.
    # Not the endpoint's URL alone: an embedded server listens on a new port each run.
    subject = run_config["fingerprint"]["subject"]
    return "\n".join(
        [model.backend, subject["model_id"], subject["model"], subject.get("chat_template") or ""]
    )


def _primary_metric(gate: Any, baseline: LoadedRun) -> str:
    """The metric sequential looks decide on: the first gated one, else accuracy/reward."""
    if gate.metrics:
        return str(gate.metrics[0])
    names = item_metrics(baseline.records, baseline.rollouts)
    for name in ("accuracy", "reward"):
        if name in names:
            return name
    return next((n for n in names if not n.startswith(("pass@", "pass^"))), "reward")


def _apply_sequential(comparisons: list[Any], decisions: dict[tuple[str, str], Any]) -> list[Any]:
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


def _failed_run(model: Any, bench: Any, name: str, error: str) -> RunSummary:
    return RunSummary(
        benchmark=name,
        model=model.name,
        model_id=model.model_id,
        run_dir="",
        n_items=0,
        rollouts=bench.eval.rollouts,
        n_rollouts=0,
        errors=0,
        error_kinds={},
        metrics={},
        usage={},
        time_s=0.0,
        infra_error=error,
    )


def write_report(verdict: Verdict, output_root: Path) -> None:
    """scorecard.md and verdict.json for this invocation."""
    output_root.mkdir(parents=True, exist_ok=True)
    (output_root / "scorecard.md").write_text(render_scorecard(verdict), encoding="utf-8")
    write_json(output_root / "verdict.json", verdict_json(verdict))


def run(
    config: Config,
    *,
    output_root: Path,
    environ: dict[str, str],
    progress: Progress,
    server_factory: Callable[..., Any] = open_server,
    log: Callable[[str], None] = print,
    baselines: dict[tuple[str, str], LoadedRun] | None = None,
    cache_dir: Path | None = None,
) -> Verdict:
    """Evaluate every model on every benchmark, gate, and write the report files.

    ``cache_dir``: where the response cache lives; None (``--no-cache``) for no cache.
    """
    # Load every dataset (and the baseline) before starting any server: a data error should cost
    # no model start-up.
    suites = [(bench, s) for bench in config.benchmarks for s in build_suites(bench)]
    summaries, decisions = _evaluate(
        config,
        suites,
        run_id=new_run_id(),
        output_root=output_root,
        environ=environ,
        progress=progress,
        server_factory=server_factory,
        log=log,
        baselines=baselines,
        cache_dir=cache_dir,
    )
    return _gate(config, summaries, decisions, baselines, output_root)


def _evaluate(
    config: Config,
    suites: list[tuple[Any, Suite]],
    *,
    run_id: str,
    output_root: Path,
    environ: dict[str, str],
    progress: Progress,
    server_factory: Callable[..., Any],
    log: Callable[[str], None],
    baselines: dict[tuple[str, str], LoadedRun] | None,
    cache_dir: Path | None,
    run_dirs: dict[str, RunDir] | None = None,
    retry_errors: bool = False,
) -> tuple[list[RunSummary], dict[tuple[str, str], SequentialResult]]:
    """Run every suite on every model (with the response cache open); what run and resume share."""
    logs = output_root / "logs" / run_id
    logs.mkdir(parents=True, exist_ok=True)
    summaries: list[RunSummary] = []
    decisions: dict[tuple[str, str], SequentialResult] = {}
    cache = _open_cache(cache_dir, log)
    try:
        _run_models(
            config,
            suites,
            summaries,
            decisions,
            output_root=output_root,
            run_id=run_id,
            logs=logs,
            environ=environ,
            progress=progress,
            server_factory=server_factory,
            log=log,
            baselines=baselines,
            cache=cache,
            run_dirs=run_dirs,
            retry_errors=retry_errors,
        )
    finally:
        if cache is not None:
            cache.close()
    return summaries, decisions


def _open_cache(cache_dir: Path | None, log: Callable[[str], None]) -> ResponseCache | None:
    if cache_dir is None:
        return None
    return ResponseCache.in_dir(cache_dir, warn=lambda msg: log(f"[evalgate] warning: {msg}"))


def _gate(
    config: Config,
    summaries: list[RunSummary],
    decisions: dict[tuple[str, str], SequentialResult],
    baselines: dict[tuple[str, str], LoadedRun] | None,
    output_root: Path,
) -> Verdict:
    heads = [load_run(Path(s.run_dir)) for s in summaries if s.run_dir]
    comparisons = _apply_sequential(
        compare_with_baselines(heads, baselines or {}, config.gate), decisions
    )
    by_name = {b.name: b for b in config.benchmarks}
    budgets = {
        s.benchmark: by_name[s.extra.get("benchmark", s.benchmark)].eval.max_error_rate
        for s in summaries
        if s.extra.get("benchmark", s.benchmark) in by_name
    }
    verdict = decide(summaries, config.gate, error_budgets=budgets, comparisons=comparisons)
    write_report(verdict, output_root)
    return verdict


def _run_models(
    config: Config,
    suites: list[tuple[Any, Suite]],
    summaries: list[RunSummary],
    decisions: dict[tuple[str, str], SequentialResult],
    *,
    output_root: Path,
    run_id: str,
    logs: Path,
    environ: dict[str, str],
    progress: Progress,
    server_factory: Callable[..., Any],
    log: Callable[[str], None],
    baselines: dict[tuple[str, str], LoadedRun] | None,
    cache: ResponseCache | None,
    run_dirs: dict[str, RunDir] | None = None,
    retry_errors: bool = False,
) -> None:
    """Serve each model and run its benchmarks; ``run_dirs`` (bench name → existing run dir)
    resumes those runs instead of starting new ones."""
    for model in config.models:
        server = server_factory(
            model,
            log_dir=logs,
            environ=environ,
            config_dir=config.path.parent,
            benchmarks=[b.name for b in config.benchmarks],
        )
        try:
            log(f"[evalgate] starting model {model.name!r} ({model.backend})")
            t_serve = time.perf_counter()
            with server as endpoint:
                serve_s = time.perf_counter() - t_serve
                log(f"[evalgate] model {model.name!r} ready in {serve_s:.1f} s")
                for bench, suite in suites:
                    kept: list[dict[str, Any]] = []
                    skip: frozenset[tuple[str, int]] = frozenset()
                    run_cfg = _run_config(config, model, bench, endpoint, suite, server)
                    if run_dirs is not None:  # resume: keep the journal's records, run the rest
                        run_dir = run_dirs[suite.name]
                        state = resume_journal(
                            run_dir.results_path,
                            suite.items,
                            bench.eval.rollouts,
                            retry_errors=retry_errors,
                        )
                        kept, skip = state.records, frozenset(state.done)
                        log(
                            f"[evalgate] {suite.name}: {len(kept)} rollouts kept, "
                            f"{len(suite.items) * bench.eval.rollouts - len(skip)} to run "
                            f"({state.dropped} journal lines dropped)"
                        )
                    else:
                        run_dir = RunDir.create(output_root, suite.name, endpoint.model_id, run_id)
                        run_dir.write_config(run_cfg)
                    t0 = time.perf_counter()
                    baseline = (baselines or {}).get((model.name, suite.name))
                    stats: dict[str, Any] = {}
                    records, seq = asyncio.run(
                        _execute(
                            suite,
                            bench,
                            endpoint,
                            run_dir,
                            progress,
                            baseline=baseline,
                            gate=config.gate,
                            cache=cache,
                            cache_identity=_cache_identity(model, run_cfg),
                            skip=skip,
                            kept=kept,
                            stats=stats,
                        )
                    )
                    if kept:
                        records = order_records(kept + records, suite.items)
                    elapsed = time.perf_counter() - t0
                    if seq is not None:
                        decisions[(model.name, suite.name)] = seq
                    summary = summarize(
                        records,
                        benchmark=suite.name,
                        model=model.name,
                        model_id=endpoint.model_id,
                        run_dir=str(run_dir.path),
                        n_items=len({r["example_id"] for r in records}),
                        rollouts=bench.eval.rollouts,
                        time_s=elapsed,
                    )
                    summary.extra["benchmark"] = bench.name  # a variant's suite → its benchmark
                    if seq is not None:
                        summary.extra["sequential"] = dataclasses.asdict(seq)
                    # Priced from LiteLLM's bundled price list; None for unknown/self-hosted models.
                    summary.extra["cost_usd"] = cost_usd(
                        endpoint.model_id,
                        summary.usage.get("prompt_tokens", 0),
                        summary.usage.get("completion_tokens", 0),
                        params=getattr(model, "params", None),
                    )
                    meta = _metadata(summary, bench, elapsed)
                    meta["cost_usd"] = summary.extra["cost_usd"]
                    meta["sequential"] = summary.extra.get("sequential")
                    meta["server_startup_ms"] = round(serve_s * 1000, 1)
                    meta["requests"] = stats
                    if run_dirs is not None:
                        meta["resumed"] = {"kept": len(kept), "ran": len(records) - len(kept)}
                    run_dir.write_metadata(meta)
                    run_dir.attach_log(server.log_path)
                    summaries.append(summary)
        except InfraError as exc:
            # Keep what finished; mark the rest of this model's benchmarks as not run.
            done = {(s.model, s.benchmark) for s in summaries}
            for bench, suite in suites:
                if (model.name, suite.name) not in done:
                    summaries.append(_failed_run(model, bench, suite.name, str(exc)))


def resume(
    run: str,
    *,
    output_root: Path,
    environ: dict[str, str],
    progress: Progress,
    server_factory: Callable[..., Any] = open_server,
    log: Callable[[str], None] = print,
    cache_dir: Path | None = None,
    retry_errors: bool = False,
) -> Verdict:
    """Finish an interrupted run (a run id under ``output_root``, or one run directory).

    Each benchmark's configuration comes from its run_config.json, so overrides given to the
    original run hold. The journal is repaired (torn tail, duplicates), its records kept, and
    only the missing (item, rollout) pairs are run, appended to the same results.jsonl.
    """
    path = Path(run)
    dirs = (
        [path]
        if (path / "run_config.json").is_file()
        else sorted(
            p for p in output_root.glob(f"evals/*/{run}") if (p / "run_config.json").is_file()
        )
    )
    if not dirs:
        raise UsageError(f"no run {run!r} under {output_root / 'evals'}")
    saved = [(RunDir(p), json.loads((p / "run_config.json").read_text("utf-8"))) for p in dirs]
    first = saved[0][1]
    config = Config.model_validate(
        {
            "path": first["config_path"],
            "models": [first["model"]],
            "benchmarks": [cfg["benchmark"] for _, cfg in saved],
            "gate": first["gate"],
        }
    )
    if any(cfg["model"] != first["model"] for _, cfg in saved):
        raise UsageError(f"run {run!r} holds several models; resume one run directory at a time")
    suites = []
    for bench, (_, cfg) in zip(config.benchmarks, saved, strict=True):
        name = cfg.get("suite", bench.name)  # an agent variant's run: "{benchmark}.{variant}"
        match = [s for s in build_suites(bench) if s.name == name]
        if not match:
            raise UsageError(f"{name}: no such suite in the run's own config; start a new run")
        suites.append((bench, match[0]))
    for (bench, suite), (_, cfg) in zip(suites, saved, strict=True):
        if dataset_hash(suite.items) != cfg["fingerprint"]["dataset"]["hash"]:
            raise UsageError(f"{bench.name}: the dataset changed since the run; start a new one")
    summaries, decisions = _evaluate(
        config,
        suites,
        run_id=dirs[0].name,
        output_root=output_root,
        environ=environ,
        progress=progress,
        server_factory=server_factory,
        log=log,
        baselines=None,
        cache_dir=cache_dir,
        run_dirs={s.name: rd for (_, s), (rd, _) in zip(suites, saved, strict=True)},
        retry_errors=retry_errors,
    )
    return _gate(config, summaries, decisions, None, output_root)
