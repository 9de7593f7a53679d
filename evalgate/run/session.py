"""One invocation's runs: serve each model, run each benchmark suite on it, journal every
rollout, summarise, and write each run directory's config and metadata.

The pipeline (:mod:`evalgate.pipeline`) builds a :class:`RunContext` and calls :func:`evaluate`;
comparing and gating what comes out is the pipeline's, not this module's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.config.load import Config
from evalgate.errors import ConfigError, InfraError
from evalgate.run import manifest
from evalgate.run.budget import BudgetMeter, gpu_count, stop_reason
from evalgate.run.cache import ResponseCache
from evalgate.run.engine import run_suite
from evalgate.run.journal import order_tables, read_journal, resume_journal
from evalgate.run.judging import bound_judge
from evalgate.run.lock import lock_run, unlock_run
from evalgate.run.progress import Progress
from evalgate.run.rollouts import RolloutTable
from evalgate.run.rundir import LoadedRun, RunDir
from evalgate.run.runfiles import JsonObject, RunConfig
from evalgate.run.summary import RunSummary, summarize
from evalgate.serve import Endpoint, ServeContext
from evalgate.serve.client import ChatClient, dumps
from evalgate.stats._order import OrderKey
from evalgate.suites import Suite

if TYPE_CHECKING:
    from evalgate.config.spec import Benchmark, GateSettings, Model
    from evalgate.run.sequential import SequentialResult
    from evalgate.serve import ModelServer
    from evalgate.serve.registry import ServerFactory

__all__ = ["RunContext", "evaluate", "failed_run"]


async def _execute(
    suite: Suite,
    bench: Benchmark,
    endpoint: Endpoint,
    run_dir: RunDir,
    progress: Progress,
    *,
    baseline: LoadedRun | None,
    gate: GateSettings,
    cache: ResponseCache | None = None,
    cache_identity: str | None = None,
    skip: AbstractSet[tuple[str, int]] = frozenset(),
    kept: RolloutTable | None = None,
    stats: dict[str, Any] | None = None,
    budget: BudgetMeter | None = None,
    judge_endpoint: Endpoint | None = None,
    replay: dict[tuple[bytes, int], tuple[str, dict[str, int]]] | None = None,
    looks_key: OrderKey | None = None,
) -> tuple[RolloutTable, SequentialResult | None]:
    ev = bench.eval
    progress.start(suite.name, len(suite.items) * ev.rollouts - len(skip))
    try:
        async with (
            ChatClient(
                endpoint,
                bench.sampling,
                timeout_s=ev.request_timeout_s,
                max_retries=ev.max_retries,
                deadline_s=ev.request_deadline_s or 3 * ev.request_timeout_s,
                max_consecutive_failures=ev.max_consecutive_failures,
                allow_empty=ev.allow_empty_replies,
                max_concurrent=ev.max_concurrent,
                adaptive=ev.adaptive_concurrency,
                cache=cache if ev.cache else None,
                cache_identity=cache_identity,
                max_reply_bytes=int(ev.max_reply_mib * (1 << 20)),
                replay=replay,
            ) as client,
            bound_judge(suite, judge_endpoint, ev, cache, stats, baseline),
        ):
            try:
                with run_dir.open_journal() as journal:

                    async def run_items(subset: Any) -> RolloutTable:
                        return await run_suite(  # type: ignore[return-value]  # slim: a table
                            subset,
                            client,
                            rollouts=ev.rollouts,
                            max_concurrent=ev.max_concurrent,
                            journal=journal,
                            on_result=lambda rec: progress.advance(error=rec["error"] is not None),
                            skip=skip,
                            # Without caps the meter's count is read by nothing (metadata.json
                            # records a budget only with caps): not kept a rollout at a time.
                            budget=budget if budget is not None and budget.caps else None,
                            slim=True,  # the journal holds the records; memory what summaries read
                        )

                    if not (ev.sequential and baseline is not None and looks_key is not None):
                        return await run_items(suite), None
                    from evalgate.run.sequential import run_sequential  # only with looks

                    metric = manifest.primary_metric(gate, baseline)
                    return await run_sequential(
                        suite,
                        baseline,
                        metric=metric,
                        rollouts=ev.rollouts,
                        looks=ev.looks,
                        margin=gate.margin,
                        alpha=gate.alpha,
                        key=looks_key,
                        run_items=run_items,
                        prior=kept,  # a resumed run's looks count the journal's rollouts
                        scale=(getattr(gate, "scales", None) or {}).get(metric),
                    )
            finally:
                if stats is not None:  # requests, retries and errors by kind, cache hits
                    stats.update(client.stats.as_dict())
    finally:
        progress.finish()


class StoppedMidRun(Exception):
    """A benchmark's run stopped by an infrastructure error (the endpoint is gone), with the
    summary of the rollouts its journal kept: the model's other benchmarks are not run."""

    def __init__(self, summary: RunSummary, cause: InfraError) -> None:
        super().__init__(str(cause))
        self.summary, self.cause = summary, cause


def failed_run(model: Model, bench: Benchmark, name: str, error: str) -> RunSummary:
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


@dataclass
class RunContext:
    """What every (model, benchmark) run of one invocation shares."""

    config: Config
    run_id: str
    output_root: Path
    environ: dict[str, str]
    progress: Progress
    server_factory: ServerFactory
    log: Callable[[str], None]
    baselines: dict[tuple[str, str], LoadedRun]
    cache: ResponseCache | None = None
    # resume: suite name → the existing run directory to finish (None: new runs)
    run_dirs: dict[str, RunDir] | None = None
    retry_errors: bool = False
    budget: BudgetMeter | None = None  # the invocation's caps, shared by every model

    @property
    def logs(self) -> Path:
        return self.output_root / "logs" / self.run_id


def evaluate(
    ctx: RunContext, suites: list[tuple[Benchmark, Suite]], cache_dir: Path | None
) -> tuple[list[RunSummary], dict[tuple[str, str], SequentialResult]]:
    """Run every suite on every model (with the response cache open); what run and resume share."""
    ctx.logs.mkdir(parents=True, exist_ok=True)
    summaries: list[RunSummary] = []
    decisions: dict[tuple[str, str], SequentialResult] = {}
    ctx.cache = _open_cache(cache_dir, ctx.log)
    try:
        for model in ctx.config.models:
            _run_model(ctx, model, suites, summaries, decisions)
    finally:
        if ctx.cache is not None:
            ctx.cache.close()
    return summaries, decisions


def _open_cache(cache_dir: Path | None, log: Callable[[str], None]) -> ResponseCache | None:
    if cache_dir is None:
        return None
    return ResponseCache.in_dir(cache_dir, warn=lambda msg: log(f"[evalgate] warning: {msg}"))


def _run_model(
    ctx: RunContext,
    model: Model,
    suites: list[tuple[Benchmark, Suite]],
    summaries: list[RunSummary],
    decisions: dict[tuple[str, str], SequentialResult],
) -> None:
    """Serve one model and run every suite on it. An infrastructure failure keeps what finished
    and marks the rest of this model's benchmarks as not run."""
    config, budget = ctx.config, ctx.budget
    if budget is not None:
        if budget.exhausted():  # don't start (and pay for) a server that may not be used
            reason = f"budget: {budget.reached} reached before model {model.name!r} started"
            summaries.extend(failed_run(model, b, s.name, reason) for b, s in suites)
            return
        budget.use_model(model)
    serve_ctx = ServeContext(
        log_dir=ctx.logs,
        environ=ctx.environ,
        config_dir=config.path.parent,
        benchmarks=tuple(b.name for b in config.benchmarks),
    )
    server = ctx.server_factory(model, serve_ctx)
    judges = contextlib.ExitStack()  # judge servers, up while this model's suites run
    try:
        judge_endpoints = _serve_judges(ctx, suites, serve_ctx, judges)
        ctx.log(f"[evalgate] starting model {model.name!r} ({model.backend})")
        t_serve = time.perf_counter()
        if budget is not None:
            budget.gpu_start(gpu_count(model))
        with server as endpoint:
            serve_s = time.perf_counter() - t_serve
            started = (
                "reachable at" if model.backend == "openai" else f"ready in {serve_s:.1f} s at"
            )
            ctx.log(f"[evalgate] model {model.name!r} {started} {endpoint.base_url}")
            for bench, suite in suites:
                summary, seq = _run_one(
                    ctx, model, server, endpoint, bench, suite, serve_s,
                    judge_endpoint=judge_endpoints.get(suite.name),
                )  # fmt: skip
                if seq is not None:
                    decisions[(model.name, suite.name)] = seq
                summaries.append(summary)
    except (InfraError, StoppedMidRun) as exc:
        if isinstance(exc, StoppedMidRun):  # the benchmark that was running: what it kept
            summaries.append(exc.summary)
        done = {(s.model, s.benchmark) for s in summaries}
        for bench, suite in suites:
            if (model.name, suite.name) not in done:
                summaries.append(failed_run(model, bench, suite.name, str(exc)))
    finally:
        judges.close()
        if budget is not None:
            budget.gpu_stop()


def _serve_judges(
    ctx: RunContext,
    suites: list[tuple[Benchmark, Suite]],
    serve_ctx: ServeContext,
    stack: contextlib.ExitStack[bool | None],
) -> dict[str, Endpoint]:
    """Serve each distinct judge model the suites grade with (suite name → its endpoint), on
    its own server like any model: the judge never shares a process with the judged. Each
    judge is priced for the budget (a `usd` cap needs a known price)."""
    from evalgate.run.budget import model_price

    served: dict[str, Endpoint] = {}
    out: dict[str, Endpoint] = {}
    for bench, suite in suites:
        judge = getattr(suite, "judge", None)
        if judge is None:
            continue
        from evalgate.score.labels import labels_path, load_labels  # judged runs only

        model = judge.spec.model
        judge.price = model_price(model)
        labels = labels_path(ctx.config, bench)
        if labels is not None:  # read before any server starts: a bad file is a config error
            try:
                judge.labels = load_labels(labels, judge.spec)
            except ConfigError as exc:  # named from the evals.yaml line that gave the file
                where = ctx.config.locate(bench.name, "scorer.labels")
                raise ConfigError(f"{where}: {exc}") from None
        budget = ctx.budget
        if judge.price is None and budget is not None and "usd" in budget.caps:
            raise ConfigError(
                f"budget.usd: no price is known for the judge model {model.model_id!r} of "
                f"benchmark {suite.name!r}; give it params.input_cost_per_token / "
                "output_cost_per_token (litellm), or cap budget.tokens instead"
            )
        key = json.dumps(model.model_dump(mode="json"), sort_keys=True)
        if key not in served:
            # Its own label: logs and server names never collide with a model under test.
            labelled = model.model_copy(update={"name": f"judge-{model.name}"})
            ctx.log(f"[evalgate] starting judge {model.model_id!r} ({model.backend})")
            if budget is not None:  # a judge on GPUs (vllm, modal-vllm) spends gpu_seconds too
                holder = f"judge {len(served)}"
                budget.gpu_start(gpu_count(model), holder)
                stack.callback(budget.gpu_stop, holder)  # after its server stops (LIFO)
            served[key] = stack.enter_context(ctx.server_factory(labelled, serve_ctx))
        out[suite.name] = served[key]
    return out


def _open_run_dir(
    ctx: RunContext,
    bench: Benchmark,
    suite: Suite,
    endpoint: Endpoint,
    run_cfg: RunConfig,
    baseline: LoadedRun | None,
    looks_key: OrderKey | None,
) -> tuple[
    RunDir,
    RolloutTable,
    AbstractSet[tuple[str, int]],
    dict[tuple[bytes, int], tuple[str, dict[str, int]]],
]:
    """A new run directory, or (resume) the existing one with the journal's kept records, the
    (item, rollout) pairs they cover, and (``--retry-errors``) the replies of the errored
    rollouts the model had answered, by (prompt, rollout): only their scoring runs again. A
    new run records its baseline (resume finds the same one again) and look plan."""
    if ctx.run_dirs is None:
        run_dir = RunDir.create(ctx.output_root, suite.name, endpoint.model_id, ctx.run_id)
        lock_run(run_dir.path)  # a `resume` of this run while it goes on is refused
        if baseline is not None:
            run_cfg = manifest.with_baseline(
                run_cfg, baseline, bench, ctx.config.gate, looks_key, run_dir.path
            )
        run_dir.write_config(run_cfg)
        return run_dir, RolloutTable(), frozenset(), {}
    run_dir = ctx.run_dirs[suite.name]
    state = resume_journal(
        run_dir.results_path, suite.items, bench.eval.rollouts, retry_errors=ctx.retry_errors
    )
    if ctx.budget is not None:  # the cap holds over the whole run, kept records included
        ctx.budget.add_records(state.records)
    ctx.log(
        f"[evalgate] {suite.name}: {len(state.records)} rollouts kept, "
        f"{len(suite.items) * bench.eval.rollouts - len(state.done)} to run "
        f"({state.dropped} journal lines dropped)"
    )
    replay = {
        (dumps(prompt), rollout): (completion, usage)
        for (_, rollout), (prompt, completion, usage) in state.answered.items()
    }
    return run_dir, state.records, state.done, replay  # columns and bits, not dicts


def _run_one(
    ctx: RunContext,
    model: Model,
    server: ModelServer,
    endpoint: Endpoint,
    bench: Benchmark,
    suite: Suite,
    serve_s: float,
    *,
    judge_endpoint: Endpoint | None = None,
) -> tuple[RunSummary, SequentialResult | None]:
    """One benchmark suite on one served model: run, journal, summarise, write metadata."""
    run_cfg = manifest.run_config(ctx.config, model, bench, endpoint, suite, server)
    baseline = ctx.baselines.get((model.name, suite.name))
    # Sequential looks run the items in the order of a key from the exam's side: drawn here, by
    # the gate, before any output (never the candidate's sampling.seed, which a PR could shop
    # for), recorded in the look plan; a resume goes on in the recorded one.
    looks = bench.eval.sequential and baseline is not None
    looks_key = OrderKey.draw() if looks and ctx.run_dirs is None else None
    run_dir, kept, skip, replay = _open_run_dir(
        ctx, bench, suite, endpoint, run_cfg, baseline, looks_key
    )
    if looks and ctx.run_dirs is not None:
        looks_key = manifest.recorded_looks_key(run_dir)
    t0 = time.perf_counter()
    stats: dict[str, Any] = {}
    try:
        records, seq = asyncio.run(
            _execute(
                suite,
                bench,
                endpoint,
                run_dir,
                ctx.progress,
                baseline=baseline,
                gate=ctx.config.gate,
                cache=ctx.cache,
                cache_identity=manifest.cache_identity(model, run_cfg),
                skip=skip,
                kept=kept,
                stats=stats,
                budget=ctx.budget,
                judge_endpoint=judge_endpoint,
                replay=replay,
                looks_key=looks_key,
            )
        )
    except InfraError as exc:  # the endpoint is gone: what the journal kept is still reported
        raise _stopped_mid_run(model, endpoint, bench, suite, run_dir, t0, exc) from exc
    # The order a fixed run's items are read in: its key is drawn now, every output recorded,
    # so nothing the candidate sent can depend on it (a PR that knew the order could break the
    # items read last: docs/gate.md, "The order of the items"). Sequential: the looks' key.
    order = looks_key if looks_key is not None else OrderKey.draw()
    if kept:
        records = order_tables([kept, records], suite.items)
    elapsed = time.perf_counter() - t0
    summary, stopped = _summarise(ctx, model, endpoint, bench, suite, run_dir, records, elapsed)
    _note_extras(summary, bench, suite, seq, stats, records)
    resumed = (len(kept), len(records) - len(kept)) if ctx.run_dirs is not None else None
    costs = manifest.run_costs(summary, model, records)  # first: the judge line shows its part
    facts = _run_facts(summary, ctx, order, serve_s, stats, stopped, resumed)
    run_dir.write_metadata(manifest.run_metadata(summary, bench, elapsed, costs, facts))
    run_dir.attach_log(server.log_path)
    run_dir.keep_artifacts(suite.name, suite.artifacts())
    if ctx.run_dirs is None:  # a resume holds its runs until all are done (pipeline.resume)
        unlock_run(run_dir.path)
    return summary, seq


def _summarise(
    ctx: RunContext,
    model: Model,
    endpoint: Endpoint,
    bench: Benchmark,
    suite: Suite,
    run_dir: RunDir,
    records: RolloutTable,
    elapsed: float,
) -> tuple[RunSummary, str | None]:
    """The run's summary, and why the budget stopped it early (None: it ran to the end)."""
    summary = summarize(
        records,
        benchmark=suite.name,
        model=model.name,
        model_id=endpoint.model_id,
        run_dir=str(run_dir.path),
        n_items=records.n_items,  # the table's distinct items: no pass over its rows
        rollouts=bench.eval.rollouts,
        time_s=elapsed,
    )
    stopped = stop_reason(ctx.budget, records, len(suite.items), bench.eval.rollouts)
    if stopped:  # results are kept (and resumable); the verdict is ERROR
        summary = dataclasses.replace(summary, infra_error=stopped)
        ctx.log(
            f"[evalgate] {suite.name}: {stopped}; to continue: evalgate resume "
            f"{run_dir.path.name} --budget.FIELD=HIGHER"
        )
    return summary, stopped


def _run_facts(
    summary: RunSummary,
    ctx: RunContext,
    order: OrderKey,
    serve_s: float,
    stats: JsonObject,
    stopped: str | None,
    resumed: tuple[int, int] | None,
) -> JsonObject:
    """metadata.json's account of how the run went: its looks, the order's key, the server's
    start-up, request counts, the judge, the budget it ran under, and (a resumed run) how many
    rollouts the journal kept and how many ran again."""
    meta: JsonObject = {}
    meta["sequential"] = summary.extra.get("sequential")
    if not order.public:  # a resumed run started before keys keeps its public order's seed
        meta["order_key"] = order.record()
    meta["server_startup_ms"] = round(serve_s * 1000, 1)
    meta["requests"] = stats
    if "judge" in summary.extra:
        summary.extra["judge"]["usage"] = summary.extra.get("judge_usage")
        summary.extra["judge"]["cost_usd"] = summary.extra.get("judge_cost_usd")
        meta["judge"] = summary.extra["judge"]
    if ctx.budget is not None and ctx.budget.caps:
        meta["budget"] = {**ctx.budget.as_dict(), "stopped": stopped}
        meta["complete"] = not stopped
    if resumed is not None:
        meta["resumed"] = {"kept": resumed[0], "ran": resumed[1]}
    return meta


def _stopped_mid_run(
    model: Model,
    endpoint: Endpoint,
    bench: Benchmark,
    suite: Suite,
    run_dir: RunDir,
    t0: float,
    exc: InfraError,
) -> StoppedMidRun:
    """The endpoint went away mid-run: a summary of what the journal kept (no metadata.json is
    written, so `evalgate resume` finishes the run)."""
    kept_now = read_journal(run_dir.results_path, items=suite.items, rollouts=bench.eval.rollouts)
    summary = summarize(
        kept_now.records,
        benchmark=suite.name,
        model=model.name,
        model_id=endpoint.model_id,
        run_dir=str(run_dir.path),
        n_items=len({r["example_id"] for r in kept_now.records}),
        rollouts=bench.eval.rollouts,
        time_s=time.perf_counter() - t0,
    )
    summary.extra["unfinished"] = True
    return StoppedMidRun(dataclasses.replace(summary, infra_error=str(exc)), exc)


def _note_extras(
    summary: RunSummary,
    bench: Benchmark,
    suite: Suite,
    seq: SequentialResult | None,
    stats: dict[str, Any],
    records: RolloutTable,
) -> None:
    """What the scorecard shows of a run besides its scores: its benchmark (a variant's suite
    names its own), unenforced sandbox limits, the looks, request counts and the judge line."""
    summary.extra["benchmark"] = bench.name
    if suite.unenforced_limits:  # a sandbox limit this runner cannot keep: said, not hidden
        summary.extra["unenforced_limits"] = suite.unenforced_limits
    if seq is not None:
        summary.extra["sequential"] = dataclasses.asdict(seq)
    judge_stats, agreement = stats.pop("judge", None), stats.pop("judge_agreement", None)
    summary.extra["requests"] = stats  # the scorecard's Runs table shows them
    judge = getattr(suite, "judge", None)
    if isinstance(judge_stats, dict) and judge is not None:  # a judged suite left judge stats
        from evalgate.score.base import JudgeBase  # judged runs only

        assert isinstance(judge, JudgeBase)  # every judge is one (score/base.py)
        summary.extra["judge"] = manifest.judge_summary(judge, records, judge_stats, agreement)
