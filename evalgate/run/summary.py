"""Per-rollout records → per-item scores → per-metric estimates with confidence intervals.

The unit of analysis is the item (Miller 2024): rollouts of one item are averaged first, and
errored rollouts are excluded and counted, never scored as 0 (only the PASS side of a
comparison with a baseline scores the PR's as the worst value: :mod:`evalgate.run.imputed`).
Empty replies (``content: null`` at ``finish_reason: length``, or blank text) are scored 0 by
their suite and counted apart (``empty_replies``), so the scorecard says how many of the 0s the
model never answered.
"""

from __future__ import annotations

import os
from array import array
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any, TypeGuard

from evalgate import stats
from evalgate.errors import redact_secrets
from evalgate.run.heap import trim
from evalgate.run.item_ids import ItemValues
from evalgate.run.rollouts import RolloutTable
from evalgate.run.scored import unusable

__all__ = ["RunSummary", "item_metrics", "summarize", "unusable"]

SUCCESS = 1.0 - 1e-9  # a rollout "succeeds" (for pass@k) when its reward is full marks


# From this many rows a table's per-item values are computed with numpy; below, its columns are
# read row by row in plain Python (the same values: tests/test_columnar_reads.py,
# tests/test_rollout_table.py): importing numpy costs more than a small run's pass.
COLUMNAR_ROWS = 20_000


def _columnar(records: Any) -> TypeGuard[RolloutTable]:
    return isinstance(records, RolloutTable) and len(records) >= COLUMNAR_ROWS


def item_metrics(
    records: Iterable[dict[str, Any]], rollouts: int, *, derived: bool = True
) -> dict[str, Mapping[str, float]]:
    """metric → {item id: per-item value}; includes pass@k / pass^k when k > 1 (and
    ``derived``: a comparison that gates none of them leaves them out).

    One pass, keeping per item only its values (8 bytes each), not its records: ``records`` may
    be a run's :class:`~evalgate.run.rollouts.RolloutTable`, read without building a dict list.
    Rollouts whose scores are unusable (NaN, ±inf; see :func:`unusable`) count as errored.
    """
    if _columnar(records):  # the same values from its columns (numpy)
        return dict(records.item_metrics(rollouts if derived else 1, SUCCESS))
    # item → its first scored row's metrics (most items have one: a run of one rollout each),
    # or, once a second row comes (the items in ``multi``), metric → its rollouts' values.
    values: dict[str, dict[str, Any]] = {}
    multi: set[str] = set()
    counts: dict[str, list[int]] = {}  # item → [rollouts scored, rollouts at full marks]
    scored: Iterable[tuple[str, float | None, dict[str, float]]]
    if isinstance(records, RolloutTable):  # its rows' scores, not a dict per row
        scored = records.scored()
    else:
        scored = (
            (rec["example_id"], rec["reward"], rec["metrics"])
            for rec in records
            if rec["error"] is None and unusable(rec) is None
        )
    pass_k = rollouts > 1 and derived
    for item, reward, scores in scored:
        per = values.get(item)
        if per is None:
            values[item] = scores
            counts[item] = [1, reward >= SUCCESS if pass_k else 0]  # type: ignore[operator]
            continue
        count = counts[item]
        count[0] += 1
        if pass_k:
            count[1] += reward >= SUCCESS  # type: ignore[operator]  # a scored rollout's
        if item not in multi:
            multi.add(item)
            per = values[item] = {name: array("d", (value,)) for name, value in per.items()}
        for name, value in scores.items():
            column = per.get(name)
            if column is None:
                column = per[name] = array("d")
            column.append(value)
    out: defaultdict[str, dict[str, float]] = defaultdict(dict)
    for item_id, per in values.items():
        if item_id in multi:
            for name in sorted(per):
                out[name][item_id] = fmean(per[name])
        else:  # fmean of one float: the float, but -0.0 as math.fsum sums it (0.0)
            for name in sorted(per):
                v = per[name]
                out[name][item_id] = v + 0.0 if type(v) is float else fmean(array("d", (v,)))
        n, c = counts[item_id]
        if rollouts > 1 and derived and n >= rollouts:
            out[f"pass@{rollouts}"][item_id] = stats.pass_at_k(n, c, rollouts)
            out[f"pass^{rollouts}"][item_id] = stats.pass_hat_k(n, c, rollouts)
    return dict(out)


# eq=False: never compared (an identity, not a value); the generated methods would be
# compiled from source at every start-up (dataclasses exec each one: issue #36).
@dataclass(frozen=True, eq=False)
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
    # The first message of the commonest error kind: counts alone hide the cause (a sandbox that
    # refused to start says why only here).
    error_example: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Per-item values (metric → item → value; columns when read from them: ItemValues) and
    # the items' groups (items without one left out), for threshold tests; not serialised.
    per_item: dict[str, Mapping[str, float]] = field(default_factory=dict, repr=False)
    groups: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def error_rate(self) -> float:
        return self.errors / self.n_rollouts if self.n_rollouts else 0.0


def _error_kind(message: str) -> str:
    return message.split(":", 1)[0] if ":" in message else message[:40]


def _example(errors: list[str], kinds: Counter[str], limit: int = 200) -> str | None:
    if not errors:
        return None
    commonest = kinds.most_common(1)[0][0]
    first = next(e for e in errors if _error_kind(e) == commonest)
    # One line, whatever the error carried; a provider's error body may echo a key, and this
    # line goes into the PR's comment.
    text = redact_secrets(" ".join(first.split()), os.environ)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# From this many items a summary returns the heap's free pages when done (run/heap.py).
_LARGE = 1 << 16


def summarize(
    records: Collection[dict[str, Any]] | RolloutTable,  # iterated twice (no list of rows)
    *,
    benchmark: str,
    model: str,
    model_id: str,
    run_dir: str,
    n_items: int,
    rollouts: int,
    time_s: float,
) -> RunSummary:
    # One pass for what is counted per rollout (a table builds a dict per row on each pass).
    groups: dict[str, str] = {}  # items without a group left out
    errors: list[str] = []  # a rollout with a NaN or infinite score is an error of its own kind
    empty = 0
    usage: Counter[str] = Counter()
    if isinstance(records, RolloutTable):  # counted from its columns, not a dict per row
        groups, errors, empty, totals = records.tally()
        usage.update(totals)
        rows: Iterable[dict[str, Any]] = ()
    else:
        rows = records
    for r in rows:
        group = r.get("group")
        if group is not None:
            groups[r["example_id"]] = group
        elif groups:  # the last record's group, as before (None: none)
            groups.pop(r["example_id"], None)
        error = r["error"]
        why = error or unusable(r)
        if why is not None:
            errors.append(why)
        if error is None and why is None:
            completion = r.get("completion")
            empty += isinstance(completion, str | None) and not (completion or "").strip()
        usage.update(r.get("usage") or {})
    clustered = bool(groups)
    metrics = {}
    values = item_metrics(records, rollouts)
    for name, per_item in values.items():
        if isinstance(per_item, ItemValues) and not clustered:
            # Read from its columns: an unclustered estimate sums with math.fsum (exact), so
            # the items' order does not change it and no sorted list of a million ids is made.
            metrics[name] = stats.mean_ci(per_item.array)
            continue
        ids = sorted(per_item)
        # Plain floats: numpy would load for nothing (start-up time of every run).
        scores = [per_item[i] for i in ids]
        clusters = [groups.get(i) or i for i in ids] if clustered else None
        metrics[name] = stats.mean_ci(scores, clusters=clusters)
    if n_items >= _LARGE:  # the lists of a million floats just freed: their pages returned
        trim()
    kinds = Counter(_error_kind(e) for e in errors)
    return RunSummary(
        benchmark=benchmark,
        model=model,
        model_id=model_id,
        run_dir=run_dir,
        n_items=n_items,
        rollouts=rollouts,
        n_rollouts=len(records),
        errors=len(errors),
        error_kinds=dict(kinds),
        error_example=_example(errors, kinds),
        empty_replies=empty,
        metrics=metrics,
        usage=dict(usage),
        time_s=time_s,
        per_item=values,
        groups=groups,
    )
