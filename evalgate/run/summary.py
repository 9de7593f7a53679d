"""Per-rollout records → per-item scores → per-metric estimates with confidence intervals.

The unit of analysis is the item (Miller 2024): rollouts of one item are averaged first, and
errored rollouts are excluded and counted, never scored as 0. Empty replies (``content: null``
at ``finish_reason: length``, or blank text) are scored 0 by their suite and counted apart
(``empty_replies``), so the scorecard says how many of the 0s the model never answered.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from evalgate import stats

__all__ = ["RunSummary", "item_metrics", "summarize", "unusable", "usable_records"]

SUCCESS = 1.0 - 1e-9  # a rollout "succeeds" (for pass@k) when its reward is full marks


def unusable(rec: dict[str, Any]) -> str | None:
    """Why a scored rollout's values cannot enter the statistics, as an error message whose
    kind (before the colon) is "non-finite score" or "non-numeric score"; None when they can.

    A NaN or infinite reward (a verifier that divided by zero, a judge that returned "inf") has
    no mean and no bound: the rollout is counted as errored, against ``eval.max_error_rate``,
    like any other rollout that produced no score, instead of stopping the gate.
    """
    values = [("reward", rec.get("reward")), *(rec.get("metrics") or {}).items()]
    for name, value in values:
        if value is None and name == "reward":
            continue  # no reward field: the metrics carry the scores
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"non-numeric score: {name} = {value!r:.40}"
        if not math.isfinite(value):
            return f"non-finite score: {name} = {value!r}"
    return None


def usable_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with every unusable scored rollout turned into an errored one."""
    out = []
    for rec in records:
        why = unusable(rec) if rec.get("error") is None else None
        out.append(rec if why is None else {**rec, "error": why})
    return out


def item_metrics(records: list[dict[str, Any]], rollouts: int) -> dict[str, dict[str, float]]:
    """metric → {item id: per-item value}; includes pass@k / pass^k when k > 1. Rollouts whose
    scores are unusable (see :func:`unusable`) count as errored."""
    by_item: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in usable_records(records):
        if rec["error"] is None:
            by_item[rec["example_id"]].append(rec)
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for item_id, recs in by_item.items():
        names = {name for r in recs for name in r["metrics"]}
        for name in sorted(names):
            vals = [r["metrics"][name] for r in recs if name in r["metrics"]]
            out[name][item_id] = fmean(vals)
        if rollouts > 1 and len(recs) >= rollouts:
            c = sum(r["reward"] >= SUCCESS for r in recs)
            out[f"pass@{rollouts}"][item_id] = stats.pass_at_k(len(recs), c, rollouts)
            out[f"pass^{rollouts}"][item_id] = stats.pass_hat_k(len(recs), c, rollouts)
    return dict(out)


@dataclass(frozen=True)
class RunSummary:
    """One model × benchmark run, summarised for the gate and the scorecard."""

    benchmark: str
    model: str
    model_id: str
    run_dir: str
    n_items: int
    rollouts: int
    n_rollouts: int
    errors: int
    error_kinds: dict[str, int]
    metrics: dict[str, stats.Estimate]
    usage: dict[str, int]
    time_s: float
    infra_error: str | None = None
    empty_replies: int = 0  # scored rollouts whose completion was empty (content null, "")
    extra: dict[str, Any] = field(default_factory=dict)
    # Per-item values (metric → item → value) and groups, for threshold tests; not serialised.
    per_item: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)
    groups: dict[str, str | None] = field(default_factory=dict, repr=False)

    @property
    def error_rate(self) -> float:
        return self.errors / self.n_rollouts if self.n_rollouts else 0.0


def _error_kind(message: str) -> str:
    return message.split(":", 1)[0] if ":" in message else message[:40]


def summarize(
    records: list[dict[str, Any]],
    *,
    benchmark: str,
    model: str,
    model_id: str,
    run_dir: str,
    n_items: int,
    rollouts: int,
    time_s: float,
) -> RunSummary:
    records = usable_records(records)
    groups = {r["example_id"]: r.get("group") for r in records}
    clustered = any(g is not None for g in groups.values())
    metrics = {}
    values = item_metrics(records, rollouts)
    for name, per_item in values.items():
        ids = sorted(per_item)
        # Plain floats: numpy would load for nothing (start-up time of every run).
        scores = [per_item[i] for i in ids]
        clusters = [groups[i] or i for i in ids] if clustered else None
        metrics[name] = stats.mean_ci(scores, clusters=clusters)
    errors = [r["error"] for r in records if r["error"] is not None]
    empty = sum(
        1
        for r in records
        if r["error"] is None
        and isinstance(r.get("completion"), str | None)
        and not (r.get("completion") or "").strip()
    )
    usage: Counter[str] = Counter()
    for rec in records:
        usage.update(rec.get("usage") or {})
    return RunSummary(
        benchmark=benchmark,
        model=model,
        model_id=model_id,
        run_dir=run_dir,
        n_items=n_items,
        rollouts=rollouts,
        n_rollouts=len(records),
        errors=len(errors),
        error_kinds=dict(Counter(_error_kind(e) for e in errors)),
        empty_replies=empty,
        metrics=metrics,
        usage=dict(usage),
        time_s=time_s,
        per_item=values,
        groups=groups,
    )
