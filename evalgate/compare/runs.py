"""A PR run against its baseline, item by item: the join, each gated metric's test, the flips.

:func:`evalgate.compare.paired.compare_runs` runs this (numpy loads with this module only when a
run is compared). The items are joined on the tables' columns (:mod:`evalgate.compare.join`)
and each metric's values are arrays by item index: nothing per item is built but arrays, so a
million items compared stay within a few tens of bytes an item (bench/compare_scale.py).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict, overload

import numpy as np
import numpy.typing as npt

from evalgate import stats
from evalgate.compare import position
from evalgate.compare.join import Pairing, pair_items
from evalgate.compare.paired import (
    _DERIVED_PREFIXES,
    LEGACY_ORDER,
    Flip,
    LoadedRun,
    MetricComparison,
    RunComparison,
    _is_pairwise,
    _measurement_diff,
    _pairwise_diff,
    _subject_changes,
    compare_metric,
    group_plan_of,
    order_of,
    sequential_design,
)
from evalgate.run.heap import trim
from evalgate.run.imputed import pass_side, worst_case_result
from evalgate.run.item_ids import BLOCK, ItemValues
from evalgate.run.rollouts import RolloutTable
from evalgate.run.summary import item_metrics

__all__ = ["compare_runs"]


class _Counts(TypedDict):
    """The item counts a comparison reports (RunComparison's fields of those names)."""

    n_base_only: int
    n_not_run: int
    n_head_only: int
    n_changed: int
    n_fallback: int


@dataclass(frozen=True)
class _Plan:
    """What every metric of one run pair is tested with."""

    margin: float
    alpha: float
    seed: int
    scales: Mapping[str, str | list[float]]
    design: tuple[int, int] | None  # (look, looks) of a run decided by sequential looks
    order: stats.OrderKey
    horizon: int | None
    groups_total: int | None
    group_size: int | None

    def tester(self, name: str) -> functools.partial[MetricComparison]:
        """:func:`compare_metric` of ``name`` under this plan (what is left: the values, the
        clusters, the scale, the horizon)."""
        return functools.partial(
            compare_metric,
            name,
            margin=self.margin,
            alpha=self.alpha,
            seed=self.seed,
            design=self.design,
            groups_total=self.groups_total,
            group_size=self.group_size,
        )


def _counts(base: LoadedRun, head: LoadedRun, pairing: Pairing) -> _Counts:
    base_only = base.records.n_items - pairing.n_in_base
    seq = head.metadata.sequential
    not_run = min(base_only, seq.items_not_run) if seq is not None else 0
    return {
        "n_base_only": base_only - not_run,
        "n_not_run": not_run,
        "n_head_only": head.records.n_items - pairing.n_in_base,
        "n_changed": pairing.n_changed,
        "n_fallback": pairing.n_fallback,
    }


def _result(
    base: LoadedRun,
    head: LoadedRun,
    counts: _Counts,
    *,
    reason: str = "",
    n_paired: int = 0,
    metrics: tuple[MetricComparison, ...] = (),
    flips: tuple[Flip, ...] = (),
) -> RunComparison:
    return RunComparison(
        model=head.model,
        benchmark=head.benchmark,
        base_path=str(base.path),
        head_path=str(head.path),
        comparable=not reason,
        reason=reason,
        changes=_subject_changes(base, head),
        n_paired=n_paired,
        metrics=metrics,
        flips=flips,
        base_origin=base.origin,
        **counts,
    )


def compare_runs(
    base: LoadedRun,
    head: LoadedRun,
    *,
    margin: float,
    alpha: float,
    metrics: list[str] | None = None,
    seed: int = 0,
    scales: Mapping[str, str | list[float]] | None = None,
) -> RunComparison:
    """Pair ``head`` with ``base`` item by item and test every gated metric (``scales``: the
    declared scale of each metric, ``gate.scales``)."""
    # The items are joined on the tables' columns (compare/join.py): nothing per item is built
    # here but arrays (a million items compared: bench/compare_scale.py).
    pairing = pair_items(base.records, head.records)
    counts = _counts(base, head, pairing)
    reason = _measurement_diff(base, head) or _pairwise_diff(base, head)
    if reason is None and not pairing.paired.any():
        reason = (
            f"{pairing.n_fallback} items answered by a fallback model on one side only: none paired"
            if pairing.n_fallback
            else "no item in common (different dataset or item ids)"
        )
    if reason is not None:
        return _result(base, head, counts, reason=reason)
    # pass@k / pass^k are gated only when named (_DERIVED_PREFIXES): else none is computed.
    derived = any(m.startswith(_DERIVED_PREFIXES) for m in metrics or ())
    base_metrics = item_metrics(base.records, base.rollouts, derived=derived)
    head_metrics = item_metrics(head.records, head.rollouts, derived=derived)
    names = metrics or [
        m for m in head_metrics if m in base_metrics and not m.startswith(_DERIVED_PREFIXES)
    ]
    if not names:  # every rollout of one side errored: a baseline was given, nothing pairs
        which = "baseline" if not base_metrics else "PR run"
        why = f"no scored item in common: every rollout of the {which} errored"
        return _result(base, head, counts, reason=why)
    order, horizon = order_of(head)
    plan = _Plan(
        margin, alpha, seed, scales or {}, sequential_design(head), order, horizon,
        *group_plan_of(head),
    )  # fmt: skip
    pairwise = position.pairwise_side(head.records) if _is_pairwise(head) else None
    results: list[MetricComparison] = []
    flips: list[Flip] = []
    n_paired = 0
    for at, name in enumerate(names):
        b_all = _dense(base_metrics.get(name, {}), base.records)
        h_all = _dense(head_metrics.get(name, {}), head.records)
        if name not in names[at + 1 :]:  # its columns are the dense arrays now: let them go
            base_metrics.pop(name, None), head_metrics.pop(name, None)
        # Errored items drop out: the pairs are the items scored on both sides.
        usable = pairing.paired & ~np.isnan(h_all)
        usable[usable] = ~np.isnan(b_all[pairing.at_base[usable]])
        index = _in_run_order(head.records, np.nonzero(usable)[0], plan.order)
        if not index.size:
            results.append(MetricComparison(name, None, "INCONCLUSIVE", None, "no paired items"))
            continue
        b, h = b_all[pairing.at_base[index]], h_all[index]
        del h_all, usable
        mc = _test_metric(name, b, h, base, head, pairing, b_all, index, plan, pairwise)
        results.append(mc)
        n_paired = max(n_paired, index.size)
        if not flips:
            flips = _flips(index, b, h, base, head)
        # The statistics' and the flips' temporaries freed: their pages back to the system,
        # not kept under the next step's (run/heap.py).
        trim()
    return _result(
        base, head, counts, n_paired=n_paired, metrics=tuple(results), flips=tuple(flips)
    )


def _dense(values: Mapping[str, float], table: RolloutTable) -> npt.NDArray[np.float64]:
    """A metric's per-item values by ``table``'s item index, NaN where an item has none."""
    if isinstance(values, ItemValues) and values.ids is table.id_table:
        return values.dense()
    out = np.full(table.n_items, np.nan)
    for item_id, value in values.items():  # the records' pass (a small run): a dict
        index = table.index_of(item_id)
        if index is not None:
            out[index] = value
    return out


_BLOCK_BITS = BLOCK.bit_length() - 1  # ids are kept in blocks of BLOCK, a power of 2
_BLOCK_MASK = BLOCK - 1


class _IdsAt(Sequence[str]):
    """The ids of items ``index`` of ``table``, made when read (not a list of a million)."""

    def __init__(self, table: RolloutTable, index: npt.NDArray[np.intp]) -> None:
        self._table, self._index = table, index

    def __len__(self) -> int:
        return len(self._index)

    def __iter__(self) -> Iterator[str]:
        index = self._index
        if index.size > 1 and not bool(np.all(index[1:] >= index[:-1])):
            item_id, step = self._table.item_id, 1 << 16  # no numpy scalar per item
            for start in range(0, len(index), step):
                yield from map(item_id, index[start : start + step].tolist())
            return
        # Ascending (np.nonzero's, the comparison's): each block of ids is split once and its
        # items picked from the list, not each id looked up on its own (a million items: ~1 s).
        ids, block, listed = self._table.id_table, -1, []
        for start in range(0, len(index), 1 << 16):
            for i in index[start : start + (1 << 16)].tolist():
                if i >> _BLOCK_BITS != block:
                    block = i >> _BLOCK_BITS
                    listed = ids.block_ids(block)
                yield listed[i & _BLOCK_MASK]

    @overload
    def __getitem__(self, at: int) -> str: ...
    @overload
    def __getitem__(self, at: slice) -> Sequence[str]: ...
    def __getitem__(self, at: int | slice) -> str | Sequence[str]:
        if isinstance(at, slice):
            return _IdsAt(self._table, self._index[at])
        return self._table.item_id(int(self._index[at]))


def _groups_of(table: RolloutTable, index: npt.NDArray[np.intp]) -> dict[str, str]:
    """item id → group of the items ``index`` that have one."""
    if not table.has_groups:
        return {}
    return {
        table.item_id(i): group
        for i in index.tolist()
        if (group := table.item_group(i)) is not None
    }


def _in_run_order(
    table: RolloutTable, index: npt.NDArray[np.intp], order: stats.OrderKey
) -> npt.NDArray[np.intp]:
    """Items ``index`` in the run's order (a keyed hash of the id), not the order they finished
    in: graded scores' bounds (betting, sign-flips) depend on order, and this one is fixed
    before any score is and is the order the looks ran in, so the bounds stay valid and every
    reading (look or scorecard) is the same. Grouped items go whole group by whole group (the
    looks' order: stats.item_order)."""
    groups = _groups_of(table, index)
    if not groups:
        return index[stats.item_rank(_IdsAt(table, index), order)]
    ids = [table.item_id(i) for i in index.tolist()]
    place = dict(zip(ids, index.tolist(), strict=True))
    return np.array([place[i] for i in stats.item_order(ids, order, groups)], dtype=np.intp)


def _clusters(table: RolloutTable, index: npt.NDArray[np.intp]) -> list[str] | None:
    """Each item's cluster (its group, else itself) when any item has a group, else None."""
    if not _groups_of(table, index):
        return None
    return [table.item_group(i) or f"item:{table.item_id(i)}" for i in index.tolist()]


def _test_metric(
    name: str,
    b: npt.NDArray[np.float64],
    h: npt.NDArray[np.float64],
    base: LoadedRun,
    head: LoadedRun,
    pairing: Pairing,
    b_all: npt.NDArray[np.float64],
    index: npt.NDArray[np.intp],
    plan: _Plan,
    pairwise: position.PairwiseSide | None,
) -> MetricComparison:
    """One metric's comparison on the paired items ``index`` (values ``b``, ``h``): its test,
    its PASS side with the PR's errored rollouts at the worst score, its position guard."""
    test = functools.partial(
        plan.tester(name),
        b,
        clusters=_clusters(head.records, index),
        scale=plan.scales.get(name),
        horizon=max(plan.horizon or 0, index.size),
    )
    mc = test(h)
    if head.records.errored and mc.result is not None:
        mc = _imputed(mc, name, np.concatenate([b, h]), base, head, pairing, b_all, plan)
    if pairwise is not None and name == "win_rate":  # position bias: compare/position.py
        ids = list(_IdsAt(head.records, index))
        mc = position.guard(mc, ids, pairwise, functools.partial(test, with_mde=False))
    if plan.order.public:
        mc = dataclasses.replace(mc, reason="; ".join(x for x in (mc.reason, LEGACY_ORDER) if x))
    return mc


def _imputed(
    mc: MetricComparison,
    name: str,
    observed: npt.NDArray[np.float64],
    base: LoadedRun,
    head: LoadedRun,
    pairing: Pairing,
    b_all: npt.NDArray[np.float64],
    plan: _Plan,
) -> MetricComparison:
    """``mc`` with its PASS side on the PR's errored rollouts at the worst score: an error never
    helps a PASS (evalgate.run.imputed). The same items in the same order as the test, with
    those whose every PR rollout errored put back."""
    assert mc.result is not None
    ran = np.nonzero(pairing.paired)[0]
    ran = ran[~np.isnan(b_all[pairing.at_base[ran]])]
    candidates = _in_run_order(head.records, ran, plan.order)
    ids = list(_IdsAt(head.records, candidates))
    b_vals = dict(zip(ids, b_all[pairing.at_base[candidates]].tolist(), strict=True))
    side = pass_side(head.records, name, b_vals, ids, observed, plan.scales.get(name))
    if not side.imputed:  # else the same data as the test's
        return mc
    kept = np.array([head.records.index_of(i) for i in side.ids], dtype=np.intp)
    passing = plan.tester(name)(
        side.base,
        side.head,
        clusters=_clusters(head.records, kept),
        scale=[side.scale.low, side.scale.high],
        horizon=max(plan.horizon or 0, len(side.ids)),
        with_mde=False,
    )
    if passing.result is None:
        return mc
    result = worst_case_result(mc.result, passing.result)
    return dataclasses.replace(
        mc,
        result=result,
        status=stats.verdict(result),
        imputed=side.imputed,
        imputed_as=side.worst,
    )


def _excerpt(value: object, limit: int = 160) -> str:
    if isinstance(value, list):  # chat messages: the last user turn is what differs per item
        value = next((m.get("content", "") for m in reversed(value) if m.get("role") == "user"), "")
    text = " ".join(str(value or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_answers(run: LoadedRun, ids: set[str]) -> dict[str, _Answer]:
    """item → its first rollout without an error (its prompt and completion, as excerpts), for
    ``ids``: read again from the journal, which alone keeps the texts."""
    # Only those lines are parsed (the run's table knows which): a million-line journal is not.
    # Each is cut to its excerpt as it is read: 20,000 flips' full texts held ~50 MB.
    return {
        item: _Answer(
            bool(rec.get("prompt")), _excerpt(rec.get("prompt")), _excerpt(rec.get("completion"))
        )
        for item, rec in run.first_records(ids, answered=True)
    }


@dataclass(frozen=True)
class _Answer:
    """What a flip shows of one side's first answer: whether it had a prompt, the excerpts."""

    has_prompt: bool
    prompt: str
    completion: str


_NO_ANSWER = _Answer(False, "", "")


def _flips(
    index: npt.NDArray[np.intp],
    base_scores: npt.NDArray[np.float64],
    head_scores: npt.NDArray[np.float64],
    base: LoadedRun,
    head: LoadedRun,
) -> list[Flip]:
    """The paired items (``index``, in the run's order) whose outcome changed: an item passes
    when most of its rollouts do."""
    changed = np.nonzero((base_scores >= 0.5) != (head_scores >= 0.5))[0]
    flipped = [
        (head.records.item_id(int(index[at])), float(base_scores[at]), float(head_scores[at]))
        for at in changed.tolist()
    ]
    wanted = {item_id for item_id, _, _ in flipped}
    base_first = _first_answers(base, wanted) if wanted else {}
    head_first = _first_answers(head, wanted) if wanted else {}
    out = []
    for item_id, b, h in flipped:
        first_b = base_first.get(item_id, _NO_ANSWER)
        first_h = head_first.get(item_id, _NO_ANSWER)
        # The PR's prompt, else the base's (the excerpt of no prompt is "").
        prompt = first_h.prompt if first_h.has_prompt else first_b.prompt
        out.append(
            Flip(
                item_id=item_id,
                direction="improved" if h >= 0.5 else "regressed",
                base_score=b,
                head_score=h,
                prompt=prompt,
                base_completion=first_b.completion,
                head_completion=first_h.completion,
            )
        )
    # Most confident first: the largest per-item change, regressions before improvements.
    out.sort(key=lambda f: (f.direction != "regressed", -abs(f.head_score - f.base_score)))
    return out
