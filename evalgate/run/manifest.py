"""What a run records about itself, built in one place: :class:`~evalgate.run.runfiles.RunConfig`
(its identity: fingerprint, endpoint, the exam's sections; its baseline and look plan) when it
starts, :class:`~evalgate.run.runfiles.RunMetadata` (its summary, what it cost, how it went) when
it finishes. :mod:`evalgate.run.session` writes them through :class:`~evalgate.run.rundir.RunDir`;
:mod:`evalgate.run.runfiles` owns their formats.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue

from evalgate import __version__
from evalgate.config.load import dump_benchmark
from evalgate.errors import UsageError
from evalgate.run.baseline import baseline_reference
from evalgate.run.costs import cost_usd
from evalgate.run.fingerprint import fingerprint
from evalgate.run.rollouts import RolloutTable
from evalgate.run.rundir import LoadedRun, RunDir
from evalgate.run.runfiles import (
    JsonObject,
    LookPlan,
    RunConfig,
    RunMetadata,
    read_run_config,
)
from evalgate.run.summary import RunSummary
from evalgate.stats._order import OrderKey

if TYPE_CHECKING:
    from evalgate.config.load import Config
    from evalgate.config.spec import Benchmark, GateSettings, GraderSpec, JudgeScorer, Model
    from evalgate.score.base import JudgeBase
    from evalgate.serve import Endpoint, ModelServer
    from evalgate.suites import Suite

__all__ = [
    "cache_identity",
    "judge_summary",
    "primary_metric",
    "recorded_looks_key",
    "run_config",
    "run_costs",
    "run_metadata",
    "with_baseline",
]


def run_config(
    config: Config,
    model: Model,
    bench: Benchmark,
    endpoint: Endpoint,
    suite: Suite,
    server: ModelServer,
) -> RunConfig:
    """run_config.json of a new run, before its baseline is recorded (:func:`with_baseline`)."""
    # Which chat template the server applied (vLLM backends resolve one; others: the server's).
    applied = server.chat_template
    template = dict[str, JsonValue](applied.record()) if applied is not None else None
    print_ = fingerprint(
        bench,
        model,
        endpoint.model_id,
        suite.items,
        chat_template=applied.sha256 if applied is not None else None,
        variant=suite.variant,
    )
    # Validated as one document: the sections' validators are not built apart from the file's
    # own (which reading it back needs anyway): ~5 ms less of a run's start.
    return RunConfig.model_validate(
        {
            "fingerprint": print_,
            "chat_template": template,
            "suite": suite.name,
            "evalgate_version": __version__,
            "config_path": str(config.path),
            "model": model.model_dump(mode="json"),
            "endpoint": {"base_url": endpoint.base_url, "model": endpoint.model},
            "model_id": endpoint.model_id,
            "benchmark": dump_benchmark(bench),
            "gate": config.gate.model_dump(mode="json"),
            "budget": config.budget.model_dump(mode="json"),
        }
    )


def with_baseline(
    run_cfg: RunConfig,
    baseline: LoadedRun,
    bench: Benchmark,
    gate: GateSettings,
    looks_key: OrderKey | None,
    run_dir: Path,
) -> RunConfig:
    """``run_cfg`` with its record of the baseline and, with sequential looks, the look plan
    (with the key of the order the looks run the items in), so that `evalgate resume` compares
    with the same baseline and re-runs the same looks. The baseline's path is kept relative to
    ``run_dir`` too: found again when the output tree is moved with its baseline."""
    ref = baseline_reference(baseline)
    ref = ref.model_copy(update={"relative_path": os.path.relpath(ref.path, run_dir)})
    if looks_key is None:
        return run_cfg.model_copy(update={"baseline": ref})
    plan = LookPlan(
        metric=primary_metric(gate, baseline), looks=bench.eval.looks, order_key=looks_key.record()
    )
    return run_cfg.model_copy(update={"baseline": ref, "sequential": plan})


def run_metadata(
    summary: RunSummary, bench: Benchmark, time_s: float, *parts: JsonObject
) -> RunMetadata:
    """metadata.json of a finished run: its summary, then ``parts`` (its costs, how it went)."""
    metrics = {k: v.mean for k, v in summary.metrics.items()}
    written: JsonObject = {
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
        "error_kinds": dict(summary.error_kinds),
        "usage": dict(summary.usage),
        "complete": True,
    }
    for part in parts:
        written.update(part)
    return RunMetadata.to_write(written)


def cache_identity(model: Model, run_cfg: RunConfig) -> str:
    # What answers a request, stably across runs: the backend, the model and a digest of its
    # config (base_url, weights file, quantisation...) and the chat template the server applied.
    # Not the endpoint's URL alone: an embedded server listens on a new port each run.
    subject = run_cfg.fingerprint.subject
    assert subject is not None  # run_config() always records one
    return "\n".join(
        [model.backend, subject.model_id or "", subject.model or "", subject.chat_template or ""]
    )


def recorded_looks_key(run_dir: RunDir) -> OrderKey:
    """The key a sequential run being resumed recorded in its look plan when it started; a run
    started before keys existed ran its looks in the public order of its seed, and goes on in
    it (so the resumed looks are the ones an uninterrupted run would have made)."""
    plan = read_run_config(run_dir.path).sequential or LookPlan()
    if plan.order_key is None:
        return OrderKey.legacy(plan.seed or 0)
    try:
        return OrderKey.parse(plan.order_key)
    except ValueError as exc:  # pragma: no cover - the loader checked its pattern
        raise UsageError(f"{run_dir.path}: sequential.order_key: {exc}; start a new run") from None


def primary_metric(gate: GateSettings, baseline: LoadedRun) -> str:
    """The metric sequential looks decide on: the first gated one, else accuracy/reward."""
    from evalgate.run.summary import item_metrics

    if gate.metrics:
        return str(gate.metrics[0])
    names = item_metrics(baseline.records, baseline.rollouts)
    for name in ("accuracy", "reward"):
        if name in names:
            return name
    return next((n for n in names if not n.startswith(("pass@", "pass^"))), "reward")


def _fallback_cost(name: str, seen: Mapping[str, float]) -> float | None:
    """What a fallback's replies cost: the server's own price when it gave one for every reply
    (LiteLLM's ``x-litellm-response-cost``: the fallback's price, its custom prices included),
    else its tokens at the fallback's list price."""
    if seen.get("priced") == seen["requests"] and seen.get("cost_usd") is not None:
        return float(seen["cost_usd"])
    return cost_usd(name, int(seen["prompt_tokens"]), int(seen["completion_tokens"]))


def _count(value: object) -> int:
    """A record's token or request count (numbers, checked when the run was read); 0 if none."""
    return int(value) if isinstance(value, int | float) else 0


def _mapping(value: object) -> Mapping[str, object]:
    """A record's nested object (``served_by``, ``judge``, its ``usage``); {} when absent."""
    return value if isinstance(value, Mapping) else {}


def run_costs(
    summary: RunSummary, model: Model, records: Iterable[Mapping[str, object]]
) -> JsonObject:
    """The run's cost: priced from LiteLLM's bundled price list (None for unknown or self-hosted
    models), else what the agents said they spent (command agents on their own API keys)."""
    params = getattr(model, "params", None)
    others: dict[str, dict[str, float]] = {}  # tokens a fallback served, by the model that did
    fallback_rollouts = 0
    reported: list[float] = []  # what command agents said they spent
    judged: list[Mapping[str, object]] = []  # judgements: their tokens and cost
    # One pass, over only the rows that carry a cost, a judgement or a fallback when the records
    # are a table (iterating it builds a dict per row).
    priced = records.priced_rows() if isinstance(records, RolloutTable) else records
    for rec in priced:
        served_by = _mapping(rec.get("served_by"))
        if served_by:
            fallback_rollouts += 1
            for name, seen in served_by.items():
                seen = _mapping(seen)
                mine = others.setdefault(
                    name, {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
                )
                for k in ("requests", "prompt_tokens", "completion_tokens"):
                    mine[k] += _count(seen.get(k))
                for k in ("priced", "cost_usd"):  # the server's own price (LiteLLM's header)
                    if isinstance(value := seen.get(k), int | float):
                        mine[k] = mine.get(k, 0) + value
        if isinstance(cost := rec.get("cost_usd"), int | float):  # checked when read
            reported.append(cost)
        if judge := _mapping(rec.get("judge")):
            judged.append(judge)
    own_in = summary.usage.get("prompt_tokens", 0) - sum(
        int(o["prompt_tokens"]) for o in others.values()
    )
    own_out = summary.usage.get("completion_tokens", 0) - sum(
        int(o["completion_tokens"]) for o in others.values()
    )
    parts = [cost_usd(summary.model_id, own_in, own_out, params=params)]
    if others and not (own_in or own_out):  # the configured model answered nothing
        parts = []
    # A fallback's tokens at the fallback's price (the config's custom prices are the primary's);
    # one unknown price makes the total unknown rather than an undercount.
    parts += [_fallback_cost(n, o) for n, o in others.items()]
    summary.extra["cost_usd"] = None if None in parts else sum(p for p in parts if p is not None)
    if others:
        summary.extra["served_by"] = others
        summary.extra["fallback_rollouts"] = fallback_rollouts
    agent_cost = sum(reported) if reported else None
    if summary.extra["cost_usd"] is None:
        summary.extra["cost_usd"] = agent_cost
    out: JsonObject = {"cost_usd": summary.extra["cost_usd"], "agent_cost_usd": agent_cost}
    if judged:  # a judge's tokens and cost are the run's too, shown apart from the model's
        usage: JsonObject = {
            k: sum(_count(_mapping(j.get("usage")).get(k)) for j in judged)
            for k in ("prompt_tokens", "completion_tokens")
        }
        costs = [c if isinstance(c := j.get("cost_usd"), int | float) else None for j in judged]
        judge_cost = None if None in costs else sum(c for c in costs if c is not None)
        summary.extra["judge_usage"] = out["judge_usage"] = usage
        summary.extra["judge_cost_usd"] = out["judge_cost_usd"] = judge_cost
    if others:  # in metadata.json too: which models answered instead, and for how many rollouts
        out |= {k: summary.extra[k] for k in ("served_by", "fallback_rollouts")}
    return out


def judge_summary(
    judge: JudgeBase[JudgeScorer] | JudgeBase[GraderSpec],
    records: Iterable[Mapping[str, object]],
    judge_stats: JsonObject,
    agreement: JsonValue,
) -> JsonObject:
    """The scorecard's judge line of a judged run: who graded, at what cost, how well."""
    judge_model = judge.spec.model
    judged = (_mapping(r.get("judge")) for r in records)
    swaps = [bool(j["consistent"]) for j in judged if "consistent" in j]
    return {
        "model_id": judge_model.model_id,
        "backend": judge_model.backend,
        "requests": judge_stats,
        "agreement": agreement,
        # Pairwise: the share of comparisons whose two orders agreed (position bias).
        "position_consistency": sum(swaps) / len(swaps) if swaps else None,
        "pairs": len(swaps),
    }
