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
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate import __version__
from evalgate.config.load import Config
from evalgate.errors import ConfigError, InfraError, UsageError
from evalgate.run.baseline import baseline_reference
from evalgate.run.budget import BudgetMeter, gpu_count, stop_reason
from evalgate.run.cache import ResponseCache
from evalgate.run.costs import cost_usd
from evalgate.run.engine import run_suite
from evalgate.run.fingerprint import fingerprint
from evalgate.run.journal import order_tables, read_journal, resume_journal
from evalgate.run.lock import lock_run, unlock_run
from evalgate.run.progress import Progress
from evalgate.run.rollouts import RolloutTable
from evalgate.run.rundir import RUN_CONFIG, LoadedRun, RunDir, read_json_object
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

__all__ = ["RunContext", "bound_judge", "evaluate", "failed_run"]


def _run_config(
    config: Config,
    model: Model,
    bench: Benchmark,
    endpoint: Endpoint,
    suite: Suite,
    server: ModelServer,
) -> dict[str, Any]:
    # Which chat template the server applied (vLLM backends resolve one; others: the server's).
    template = server.chat_template.record() if server.chat_template is not None else None
    return {
        "fingerprint": fingerprint(
            bench,
            model,
            endpoint.model_id,
            suite.items,
            chat_template=template["sha256"] if template else None,
            variant=suite.variant,
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
        "budget": config.budget.model_dump(mode="json"),
    }


def _metadata(summary: RunSummary, bench: Benchmark, time_s: float) -> dict[str, Any]:
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
                            budget=budget,
                            slim=True,  # the journal holds the records; memory what summaries read
                        )

                    if not (ev.sequential and baseline is not None and looks_key is not None):
                        return await run_items(suite), None
                    from evalgate.run.sequential import run_sequential  # only with looks

                    metric = _primary_metric(gate, baseline)
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


@contextlib.asynccontextmanager
async def bound_judge(
    suite: Suite,
    endpoint: Endpoint | None,
    ev: Any,
    cache: ResponseCache | None,
    stats: dict[str, Any] | None,
    baseline: LoadedRun | None = None,
) -> AsyncIterator[None]:
    """Bind a judged suite's judge to its own client for the run: the judge's sampling, the
    benchmark's retries, timeout and concurrency, the run's response cache under the judge's
    identity. Its calls and cache hits go to ``stats["judge"]``."""
    judge = getattr(suite, "judge", None)
    if judge is None or endpoint is None:
        yield
        return
    from evalgate.suites.judge import judge_identity

    # One suite (and judge) serves every model of the run: this run's baseline and counts only.
    pairwise = baseline is not None and getattr(judge.spec, "mode", None) == "pairwise"
    judge.baseline = _baseline_completions(baseline) if pairwise else None  # type: ignore[arg-type]
    judge.stats = {"calls": 0, "cache_hits": 0}
    async with ChatClient(
        endpoint,
        judge.spec.sampling,
        timeout_s=ev.request_timeout_s,
        max_retries=ev.max_retries,
        max_concurrent=ev.max_concurrent,
        adaptive=ev.adaptive_concurrency,
        cache=cache if ev.cache else None,
        cache_identity=judge_identity(judge.spec),
        max_reply_bytes=int(ev.max_reply_mib * (1 << 20)),
    ) as client:
        judge.client = client
        try:
            async with contextlib.AsyncExitStack() as relayed:
                if hasattr(judge, "relay"):  # graded in another process: through the relay
                    from evalgate.suites.judge_relay import JudgeRelay

                    judge.relay = await relayed.enter_async_context(JudgeRelay(judge))
                yield
            if judge.labels:  # measured with the judge that graded, for the scorecard
                from evalgate.suites.judge_labels import measure

                graded = dict(judge.stats)
                agreement = await measure(judge, judge.labels)
                agreement.pop("details")
                judge.stats.update(graded)  # the run's own judgements, not the labelled set's
                if stats is not None:
                    stats["judge_agreement"] = agreement
        finally:
            judge.client = None
            if hasattr(judge, "relay"):
                judge.relay = None
            if stats is not None:
                stats["judge"] = {**client.stats.as_dict(), **judge.stats}


def _baseline_completions(baseline: LoadedRun) -> dict[str, list[str]]:
    """The baseline's completions by item and rollout, for a pairwise judge (errored rollouts
    left out: there is nothing to compare with)."""
    by_rollout: dict[str, list[tuple[int, str]]] = {}
    for rec in baseline.full_records():  # the table keeps no texts: read them from the journal
        if rec.get("error") is None and isinstance(rec.get("completion"), str):
            by_rollout.setdefault(rec["example_id"], []).append(
                (rec.get("rollout", 0), rec["completion"])
            )
    # In rollout order (a stable sort: as sorting the whole journal by rollout would give).
    return {
        item: [text for _, text in sorted(texts, key=lambda t: t[0])]
        for item, texts in by_rollout.items()
    }


def _cache_identity(model: Model, run_config: dict[str, Any]) -> str:
    # What answers a request, stably across runs: the backend, the model and a digest of its
    # config (base_url, weights file, quantisation...) and the chat template the server applied.
    # Not the endpoint's URL alone: an embedded server listens on a new port each run.
    subject = run_config["fingerprint"]["subject"]
    return "\n".join(
        [model.backend, subject["model_id"], subject["model"], subject.get("chat_template") or ""]
    )


def _baseline_record(
    baseline: LoadedRun, bench: Benchmark, gate: GateSettings, looks_key: OrderKey | None
) -> dict[str, Any]:
    """run_config.json's record of the baseline and, with sequential looks, the look plan (with
    the key of the order the looks run the items in), so that `evalgate resume` compares with
    the same baseline and re-runs the same looks."""
    out: dict[str, Any] = {"baseline": baseline_reference(baseline)}
    if looks_key is not None:
        out["sequential"] = {
            "metric": _primary_metric(gate, baseline),
            "looks": bench.eval.looks,
            "order_key": looks_key.record(),
        }
    return out


def _recorded_looks_key(run_dir: RunDir) -> OrderKey:
    """The key a sequential run being resumed recorded in its look plan when it started; a run
    started before keys existed ran its looks in the public order of its seed, and goes on in
    it (so the resumed looks are the ones an uninterrupted run would have made)."""
    path = run_dir.path / RUN_CONFIG
    plan = (read_json_object(path) or {}).get("sequential") or {}
    if "order_key" not in plan:
        try:
            return OrderKey.legacy(int(plan.get("seed", 0)))
        except (TypeError, ValueError):
            raise UsageError(f"{path}: sequential.seed: not an integer; start a new run") from None
    try:
        return OrderKey.parse(plan["order_key"])
    except ValueError as exc:
        raise UsageError(f"{path}: sequential.order_key: {exc}; start a new run") from None


def _primary_metric(gate: GateSettings, baseline: LoadedRun) -> str:
    """The metric sequential looks decide on: the first gated one, else accuracy/reward."""
    from evalgate.run.summary import item_metrics

    if gate.metrics:
        return str(gate.metrics[0])
    names = item_metrics(baseline.records, baseline.rollouts)
    for name in ("accuracy", "reward"):
        if name in names:
            return name
    return next((n for n in names if not n.startswith(("pass@", "pass^"))), "reward")


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
    ctx: RunContext, suites: list[tuple[Any, Suite]], serve_ctx: ServeContext, stack: Any
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
        from evalgate.suites.judge_labels import labels_path, load_labels  # judged runs only

        model = judge.spec.model
        judge.price = model_price(model)
        labels = labels_path(ctx.config, bench)
        if labels is not None:  # read before any server starts: a bad file is a config error
            judge.labels = load_labels(labels, judge.spec)
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
    ctx: RunContext, bench: Benchmark, suite: Suite, endpoint: Endpoint, run_cfg: dict[str, Any]
) -> tuple[
    RunDir,
    RolloutTable,
    AbstractSet[tuple[str, int]],
    dict[tuple[bytes, int], tuple[str, dict[str, int]]],
]:
    """A new run directory, or (resume) the existing one with the journal's kept records, the
    (item, rollout) pairs they cover, and (``--retry-errors``) the replies of the errored
    rollouts the model had answered, by (prompt, rollout): only their scoring runs again."""
    if ctx.run_dirs is None:
        run_dir = RunDir.create(ctx.output_root, suite.name, endpoint.model_id, ctx.run_id)
        lock_run(run_dir.path)  # a `resume` of this run while it goes on is refused
        if "baseline" in run_cfg:  # found again when the output tree is moved with its baseline
            run_cfg["baseline"]["relative_path"] = os.path.relpath(
                run_cfg["baseline"]["path"], run_dir.path
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


def _costs(summary: RunSummary, model: Model, records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The run's cost: priced from LiteLLM's bundled price list (None for unknown or self-hosted
    models), else what the agents said they spent (command agents on their own API keys)."""
    params = getattr(model, "params", None)
    others: dict[str, dict[str, int]] = {}  # tokens a fallback served, by the model that did
    fallback_rollouts = 0
    reported: list[float] = []  # what command agents said they spent
    judged: list[Any] = []  # judgements (dicts: their tokens and cost)
    for rec in records:  # one pass: a table builds a dict per row on each
        served_by = rec.get("served_by")
        if served_by:
            fallback_rollouts += 1
            for name, seen in served_by.items():
                mine = others.setdefault(
                    name, {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
                )
                for k in mine:
                    mine[k] += int(seen.get(k) or 0)
        if rec.get("cost_usd") is not None:
            reported.append(rec["cost_usd"])
        if rec.get("judge"):
            judged.append(rec["judge"])
    own_in = summary.usage.get("prompt_tokens", 0) - sum(
        o["prompt_tokens"] for o in others.values()
    )
    own_out = summary.usage.get("completion_tokens", 0) - sum(
        o["completion_tokens"] for o in others.values()
    )
    parts = [cost_usd(summary.model_id, own_in, own_out, params=params)]
    if others and not (own_in or own_out):  # the configured model answered nothing
        parts = []
    # A fallback's tokens at the fallback's price (the config's custom prices are the primary's);
    # one unknown price makes the total unknown rather than an undercount.
    parts += [cost_usd(n, o["prompt_tokens"], o["completion_tokens"]) for n, o in others.items()]
    summary.extra["cost_usd"] = None if None in parts else sum(p for p in parts if p is not None)
    if others:
        summary.extra["served_by"] = others
        summary.extra["fallback_rollouts"] = fallback_rollouts
    agent_cost = sum(reported) if reported else None
    if summary.extra["cost_usd"] is None:
        summary.extra["cost_usd"] = agent_cost
    out = {"cost_usd": summary.extra["cost_usd"], "agent_cost_usd": agent_cost}
    if judged:  # a judge's tokens and cost are the run's too, shown apart from the model's
        usage = {
            k: sum(int((j.get("usage") or {}).get(k) or 0) for j in judged)
            for k in ("prompt_tokens", "completion_tokens")
        }
        costs = [j.get("cost_usd") for j in judged]
        judge_cost = None if None in costs else sum(costs)
        summary.extra["judge_usage"] = out["judge_usage"] = usage
        summary.extra["judge_cost_usd"] = out["judge_cost_usd"] = judge_cost
    if others:  # in metadata.json too: which models answered instead, and for how many rollouts
        out |= {k: summary.extra[k] for k in ("served_by", "fallback_rollouts")}
    return out


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
    run_cfg = _run_config(ctx.config, model, bench, endpoint, suite, server)
    baseline = ctx.baselines.get((model.name, suite.name))
    # Sequential looks run the items in the order of a key from the exam's side: drawn here, by
    # the gate, before any output (never the candidate's sampling.seed, which a PR could shop
    # for), recorded in the look plan; a resume goes on in the recorded one.
    looks = bench.eval.sequential and baseline is not None
    looks_key = OrderKey.draw() if looks and ctx.run_dirs is None else None
    if baseline is not None and ctx.run_dirs is None:  # resume finds the same baseline again
        run_cfg.update(_baseline_record(baseline, bench, ctx.config.gate, looks_key))
    run_dir, kept, skip, replay = _open_run_dir(ctx, bench, suite, endpoint, run_cfg)
    if looks and ctx.run_dirs is not None:
        looks_key = _recorded_looks_key(run_dir)
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
                cache_identity=_cache_identity(model, run_cfg),
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
        kept_now = read_journal(
            run_dir.results_path, items=suite.items, rollouts=bench.eval.rollouts
        )
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
        summary.extra["unfinished"] = True  # no metadata.json: `evalgate resume` finishes it
        raise StoppedMidRun(dataclasses.replace(summary, infra_error=str(exc)), exc) from exc
    # The order a fixed run's items are read in: its key is drawn now, every output recorded,
    # so nothing the candidate sent can depend on it (a PR that knew the order could break the
    # items read last: docs/gate.md, "The order of the items"). Sequential: the looks' key.
    order = looks_key if looks_key is not None else OrderKey.draw()
    if kept:
        records = order_tables([kept, records], suite.items)
    elapsed = time.perf_counter() - t0
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
    summary.extra["benchmark"] = bench.name  # a variant's suite → its benchmark
    if suite.unenforced_limits:  # a sandbox limit this runner cannot keep: said, not hidden
        summary.extra["unenforced_limits"] = suite.unenforced_limits
    if seq is not None:
        summary.extra["sequential"] = dataclasses.asdict(seq)
    judge_stats, agreement = stats.pop("judge", None), stats.pop("judge_agreement", None)
    summary.extra["requests"] = stats  # the scorecard's Runs table shows them
    if judge_stats is not None:  # the scorecard's judge line: who graded, at what cost, how well
        judge: Any = getattr(suite, "judge", None)  # a judged suite: it left judge stats
        judge_model = judge.spec.model
        swaps = [
            r["judge"]["consistent"] for r in records if "consistent" in (r.get("judge") or {})
        ]
        summary.extra["judge"] = {
            "model_id": judge_model.model_id,
            "backend": judge_model.backend,
            "requests": judge_stats,
            "agreement": agreement,
            # Pairwise: the share of comparisons whose two orders agreed (position bias).
            "position_consistency": sum(swaps) / len(swaps) if swaps else None,
            "pairs": len(swaps),
        }
    meta = _metadata(summary, bench, elapsed)
    meta.update(_costs(summary, model, records))
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
    if ctx.run_dirs is not None:
        meta["resumed"] = {"kept": len(kept), "ran": len(records) - len(kept)}
    run_dir.write_metadata(meta)
    run_dir.attach_log(server.log_path)
    run_dir.keep_artifacts(suite.name, suite.artifacts())
    if ctx.run_dirs is None:  # a resume holds its runs until all are done (pipeline.resume)
        unlock_run(run_dir.path)
    return summary, seq
