"""Sequential early stopping: spend fewer model calls when the verdict is already clear.

Group-sequential design (Wang & Tsiatis 1987, see :mod:`evalgate.stats._sequential`): the
items paired with the baseline run in a seeded order, and after each of ``looks`` equal slices
the paired test looks at what it has, at the look's nominal level, so that its bounds are
repeated confidence intervals that keep the overall error rates at α. The decision is
:func:`evalgate.stats.sequential_decision`; this module only schedules the calls. On ``resume``
the rollouts kept from the journal count at every look (``prior``): the looks see the same items
as an uninterrupted run would.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from evalgate import stats
from evalgate.run.fingerprint import identity
from evalgate.run.rollouts import RolloutTable
from evalgate.run.summary import item_metrics
from evalgate.suites.base import Item, Outcome

if TYPE_CHECKING:
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

    async def rollout(self, item: Item, index: int, client: Any) -> Outcome:
        return await self.suite.rollout(item, index, client)

    def plan(self, pairs: list[tuple[Item, int]]) -> None:
        plan = getattr(self.suite, "plan", None)
        if plan is not None:
            plan(pairs)


@dataclass(frozen=True)
class SequentialResult:
    metric: str
    decision: Literal["PASS", "FAIL", "INCONCLUSIVE"]
    look: int
    looks: int
    items_used: int
    items_total: int
    stopped_early: bool
    history: list[dict[str, Any]] = field(default_factory=list)


def plan_order(
    items: list[Item], baseline: Any, metric: str, seed: int
) -> tuple[list[Item], list[Item], dict[str, float]]:
    """(paired items in a seeded order, unpaired items, baseline per-item scores)."""
    base_scores = item_metrics(baseline.records, baseline.rollouts).get(metric, {})
    hashes = {r["example_id"]: r.get("item_hash") for r in baseline.records}
    paired = [it for it in items if it.id in base_scores and hashes.get(it.id) == identity(it)]
    chosen = {it.id for it in paired}  # by id: a list's `in` made this quadratic in items
    unpaired = [it for it in items if it.id not in chosen]
    order = sorted(paired, key=lambda it: it.id)
    random.Random(seed).shuffle(order)
    return order, unpaired, base_scores


async def run_sequential(
    suite: Suite,
    baseline: Any,
    *,
    metric: str,
    rollouts: int,
    looks: int,
    margin: float,
    alpha: float,
    seed: int,
    run_items: Callable[[Subset], Awaitable[RolloutTable]],
    prior: Iterable[dict[str, Any]] | None = None,
) -> tuple[RolloutTable, SequentialResult | None]:
    """Run ``suite`` look by look; returns the new records and the sequential decision.

    Unpaired items (new, or changed since the baseline) run with the first look: they don't
    inform the paired test but still count for thresholds. Without paired items it runs all.
    ``prior``: records already made (a resumed run's journal); they are not returned again,
    but every look counts them, as it would have had the run not been interrupted.
    """
    order, unpaired, base_scores = plan_order(suite.items, baseline, metric, seed)
    if not order:
        return await run_items(Subset(suite, list(suite.items))), None
    sizes = stats.look_sizes(len(order), looks)
    groups = {it.id: it.group for it in order}
    records = RolloutTable()  # columns, as the engine keeps them: no dict per rollout
    done, decision, history = 0, None, []
    for look, size in enumerate(sizes, 1):
        chunk = order[done:size] + (unpaired if look == 1 else [])
        records.extend(await run_items(Subset(suite, chunk)))
        done = size
        head = item_metrics(chain(prior or (), records), rollouts).get(metric, {})
        # The items seen so far in id order, as `evalgate compare` pairs them: graded bounds
        # (betting, sign-flips) depend on order, and the shuffled order the looks ran in would
        # give the scorecard a verdict this look did not reach. Errored items drop out.
        seen = sorted(it.id for it in order[:size] if it.id in head)
        if not seen:
            continue
        b = np.array([base_scores[i] for i in seen])
        h = np.array([head[i] for i in seen])
        clustered = any(groups[i] is not None for i in seen)
        clusters = [groups[i] or f"item:{i}" for i in seen] if clustered else None
        decision = stats.sequential_decision(
            b,
            h,
            look=look,
            looks=looks,
            margin=margin,
            alpha=alpha,
            n_total=len(order),
            clusters=clusters,
            # The statistics' seed (sign-flip draws, betting order) is the one `evalgate
            # compare` uses, so the scorecard reproduces this decision exactly.
            seed=0,
        )
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
            )
            return records, result
    return records, None
