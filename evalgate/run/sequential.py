"""Sequential early stopping: spend fewer model calls when the verdict is already clear.

Group-sequential design (Wang & Tsiatis 1987, see :mod:`evalgate.stats._sequential`): the
items paired with the baseline run in the run's one data-independent order
(:func:`evalgate.stats.item_order`, a keyed hash of the id under a key the gate drew when the
run started: :class:`evalgate.stats.OrderKey`, never the candidate's seed), and after each of
``looks`` equal
slices the paired test looks at what it has, at the look's nominal level, so that its bounds are
repeated confidence intervals that keep the overall error rates at α. The decision is
:func:`evalgate.stats.sequential_decision`'s (the verdict of :func:`evalgate.stats.
sequential_compare`), its PASS side read with the PR's errored rollouts at the worst score
(:mod:`evalgate.run.imputed`), as ``evalgate compare`` reads it; this module only schedules the
calls. On ``resume``
the rollouts kept from the journal count at every look (``prior``): the looks see the same items
as an uninterrupted run would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import numpy as np

from evalgate import stats
from evalgate.run.fingerprint import identity
from evalgate.run.imputed import pass_side, worst_case_result
from evalgate.run.rollouts import RolloutTable
from evalgate.run.scored import unusable
from evalgate.run.summary import item_metrics
from evalgate.suites.base import Item, Outcome

if TYPE_CHECKING:
    from evalgate.run.rundir import LoadedRun
    from evalgate.serve.client import ChatClient
    from evalgate.suites import Suite

__all__ = ["SequentialResult", "Subset", "plan_order", "run_sequential"]


@dataclass
class Subset:
    """A suite restricted to some of its items (the engine runs ``.items``)."""

    suite: Suite
    items: list[Item]

    @property
    def name(self) -> str:
        return self.suite.name

    async def rollout(self, item: Item, index: int, client: ChatClient) -> Outcome:
        return await self.suite.rollout(item, index, client)

    def plan(self, pairs: list[tuple[Item, int]]) -> None:
        plan = getattr(self.suite, "plan", None)
        if plan is not None:
            plan(pairs)


class LookRecord(TypedDict):
    """One look that read paired items: its number, how many, what it decided (None: go on)."""

    look: int
    items: int
    decision: str | None


@dataclass(frozen=True)
class SequentialResult:
    metric: str
    decision: Literal["PASS", "FAIL", "INCONCLUSIVE"]
    look: int
    looks: int
    items_used: int
    items_total: int
    stopped_early: bool
    history: list[LookRecord] = field(default_factory=list)
    # Grouped items: the groups planned and the largest of them, the constants of the betting
    # process over groups (compare reads the run with them); None without groups.
    groups_total: int | None = None
    group_size: int | None = None


def plan_order(
    items: list[Item], baseline: LoadedRun, metric: str, key: stats.OrderKey
) -> tuple[list[Item], list[Item], Mapping[str, float]]:
    """(paired items in the order of ``key``, unpaired items, baseline per-item scores).

    The order is :func:`evalgate.stats.item_order`, the one ``evalgate compare`` reads the
    results in: what a look has seen is a prefix of the graded tests' process (the betting
    bound's capital), so one process decides every look and the scorecard. Grouped items run
    whole group by whole group (the groups in a keyed order of their ids), so a look's groups
    are a prefix of the process over groups.
    """
    base_scores = item_metrics(baseline.records, baseline.rollouts).get(metric, {})
    hashes = {r["example_id"]: r.get("item_hash") for r in baseline.records}
    paired = [it for it in items if it.id in base_scores and hashes.get(it.id) == identity(it)]
    chosen = {it.id for it in paired}  # by id: a list's `in` made this quadratic in items
    unpaired = [it for it in items if it.id not in chosen]
    grouping = {it.id: it.group for it in paired}
    grouped = any(g is not None for g in grouping.values())
    ranked = stats.item_order(chosen, key, grouping if grouped else None)
    rank = {i: r for r, i in enumerate(ranked)}
    order = sorted(paired, key=lambda it: rank[it.id])
    return order, unpaired, base_scores


async def run_sequential(
    suite: Suite,
    baseline: LoadedRun,
    *,
    metric: str,
    rollouts: int,
    looks: int,
    margin: float,
    alpha: float,
    key: stats.OrderKey,
    run_items: Callable[[Subset], Awaitable[RolloutTable]],
    prior: Iterable[dict[str, Any]] | None = None,
    scale: str | Sequence[float] | None = None,
) -> tuple[RolloutTable, SequentialResult | None]:
    """Run ``suite`` look by look; returns the new records and the sequential decision.

    Unpaired items (new, or changed since the baseline) run with the first look: they don't
    inform the paired test but still count for thresholds. Without paired items it runs all.
    ``prior``: records already made (a resumed run's journal); they are not returned again,
    but every look counts them, as it would have had the run not been interrupted.
    ``scale``: the metric's declared scale (``gate.scales``): each look uses the range
    :func:`evalgate.stats.metric_scale` gives, as ``evalgate compare`` does reading the run.
    With groups the looks end at group ends (:func:`evalgate.stats.look_sizes`), so each
    look's groups are complete. ``key``: the order's key, the exam's (drawn by the gate when the
    run started and recorded in its plan, so a resume and `evalgate compare` read the same
    order), never the candidate's ``sampling.seed``, which a PR could shop for.
    """
    order, unpaired, base_scores = plan_order(suite.items, baseline, metric, key)
    if not order:
        return await run_items(Subset(suite, list(suite.items))), None
    groups = {it.id: it.group for it in order}
    grouped = any(g is not None for g in groups.values())
    counts = _group_sizes([groups[it.id] or f"item:{it.id}" for it in order]) if grouped else []
    # With groups, each look ends at a group's end: its groups are complete.
    sizes = stats.look_sizes(len(order), looks, counts if grouped else None)
    records = RolloutTable()  # columns, as the engine keeps them: no dict per rollout
    # The statistics' seed (sign-flip draws, betting order) is the one `evalgate compare`
    # uses, so the scorecard reproduces each look's decision exactly.
    design = stats.Design(alpha=alpha, margin=margin, looks=looks, horizon=len(order), seed=0)
    done, decision = 0, None
    history: list[LookRecord] = []
    for look, size in enumerate(sizes, 1):
        if size == done and look < looks:
            continue  # a group larger than a slice: this look would see nothing new
        chunk = order[done:size] + (unpaired if look == 1 else [])
        records.extend(await run_items(Subset(suite, chunk)))
        done = size
        seen, paired = _compare_look(
            _Look(order[:size], base_scores, groups, counts, metric, rollouts, scale),
            lambda: chain(prior or (), records),
            errored=bool(records.errored) or any(_errored(r) for r in prior or ()),
            design=design,
            at=look,
        )
        if paired is None:
            continue
        decision = stats.verdict(paired)
        if decision == stats.INCONCLUSIVE and look < looks:
            decision = None
        history.append({"look": look, "items": len(seen), "decision": decision})
        if decision is not None:
            result = SequentialResult(
                metric=metric,
                decision=decision,
                look=look,
                looks=looks,
                items_used=size,
                items_total=len(order),
                stopped_early=size < len(order),
                history=history,
                groups_total=len(counts) if grouped else None,
                group_size=max(counts) if grouped else None,
            )
            return records, result
    return records, None


@dataclass(frozen=True)
class _Look:
    """What one look compares: the items read so far in the run's order and what pairs them."""

    items: list[Item]  # the ordered paired items up to this look's end
    base_scores: Mapping[str, float]
    groups: dict[str, str | None]
    counts: list[int]  # group sizes in the run's order (empty: no groups)
    metric: str
    rollouts: int
    scale: str | Sequence[float] | None


def _compare_look(
    look: _Look,
    rows: Callable[[], Iterable[dict[str, Any]]],
    *,
    errored: bool,
    design: stats.Design,
    at: int,
) -> tuple[list[str], stats.PairedResult | None]:
    """The paired comparison at look ``at`` of ``design`` (the worse of it and its
    errors-imputed PASS side), and the ids it read; None when no item has a result yet.
    ``rows``: the records so far, read afresh on each call (a table builds its rows as it is
    read)."""
    head = item_metrics(rows(), look.rollouts).get(look.metric, {})
    # The items seen so far in the order they ran in, which is the order `evalgate compare`
    # pairs them in: graded bounds (betting, sign-flips) depend on order, and this way each
    # look reads one betting process at its prefix. Errored items drop out of the FAIL side
    # (the rest keep their order: the key is the id's own).
    seen = [it.id for it in look.items if it.id in head]
    if not seen:
        return seen, None
    b = np.array([look.base_scores[i] for i in seen])
    h = np.array([head[i] for i in seen])
    # The metric's range as `evalgate compare` finds it from the same values (its scale).
    found = stats.metric_scale(np.concatenate([b, h]), look.scale)
    clusters, plan = _grouping(seen, look.groups, look.counts, design)
    paired = stats.sequential_compare(
        b, h, replace(plan, bounds=(found.low, found.high)), look=at, clusters=clusters
    )
    if errored:
        # The PASS side with every errored rollout at the worst score (evalgate.run.imputed),
        # on the items run so far, those whose every rollout errored included, as
        # `evalgate compare` reads it.
        ran = {r["example_id"] for r in rows()}
        candidates = [it.id for it in look.items if it.id in ran]
        side = pass_side(
            rows(), look.metric, look.base_scores, candidates, np.concatenate([b, h]), look.scale
        )
        if side.imputed:
            clusters, plan = _grouping(side.ids, look.groups, look.counts, design)
            passing = stats.sequential_compare(
                side.base,
                side.head,
                replace(plan, bounds=(side.scale.low, side.scale.high)),
                look=at,
                clusters=clusters,
            )
            paired = worst_case_result(paired, passing)
    return seen, paired


def _errored(rec: dict[str, Any]) -> bool:
    return rec["error"] is not None or unusable(rec) is not None


def _grouping(
    seen: list[str], groups: dict[str, str | None], counts: list[int], design: stats.Design
) -> tuple[list[str] | None, stats.Design]:
    """The clusters of the items ``seen``, and ``design`` with the plan of the betting process
    over groups (the groups planned and the largest of them), as
    :func:`stats.sequential_decision` takes them; no clusters when none of ``seen`` has a
    group."""
    if not any(groups[i] is not None for i in seen):
        return None, design
    clusters = [groups[i] or f"item:{i}" for i in seen]
    return clusters, replace(design, groups_total=len(counts), group_size=max(counts))


def _group_sizes(groups: list[str]) -> list[int]:
    """Sizes of the contiguous runs of equal group ids, in order (whole groups, as planned)."""
    counts: list[int] = []
    for i, g in enumerate(groups):
        if i and g == groups[i - 1]:
            counts[-1] += 1
        else:
            counts.append(1)
    return counts
