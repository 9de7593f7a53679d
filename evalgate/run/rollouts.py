"""What a run keeps in memory of its rollouts: columns of numbers, not a dict per rollout.

The journal (results.jsonl) holds every record in full. Summaries, budget stops, sequential looks
and costs read a few fields of each: the item, the rollout index, the reward and metrics, the
error, the token usage, whether the reply was blank, a reported cost. :class:`RolloutTable`
stores those as typed arrays (~50 bytes a rollout where a record dict costs kilobytes with its
prompt and completion) and hands out a small read-only dict per rollout when iterated, so the
code that reads records reads it unchanged. bench/rollout_memory.py measures it.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["RolloutTable", "unusable"]

_NAN = math.nan
_JUDGE_FIELDS = ("usage", "cost_usd", "consistent", "worse_order")


def unusable(rec: dict[str, Any]) -> str | None:
    """Why a scored rollout's values cannot enter the statistics, as an error message whose
    kind (before the colon) is "non-finite score" or "non-numeric score"; None when they can.

    A NaN or infinite reward (a verifier that divided by zero, a judge that returned "inf") has
    no mean and no bound: the rollout is counted as errored, against ``eval.max_error_rate``,
    like any other rollout that produced no score, instead of stopping the gate.
    """
    if _finite_floats(rec):  # the common record, answered without building the list below
        return None
    values = [("reward", rec.get("reward")), *(rec.get("metrics") or {}).items()]
    for name, value in values:
        if value is None and name == "reward":
            continue  # no reward field: the metrics carry the scores
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"non-numeric score: {name} = {value!r:.40}"
        if not math.isfinite(value):
            return f"non-finite score: {name} = {value!r}"
    return None


def _finite_floats(rec: dict[str, Any]) -> bool:
    """The common case of :func:`unusable` answered fast: a float reward (or none) and float
    metrics, all finite (``x - x`` is 0 exactly when ``x`` is finite). False sends the record
    to :func:`unusable`, which decides."""
    reward = rec.get("reward")
    if reward is not None and (type(reward) is not float or reward - reward != 0.0):
        return False
    for value in (rec.get("metrics") or {}).values():
        if type(value) is not float or value - value != 0.0:
            return False
    return True


def _fill(columns: dict[str, array[Any]], row: int, fill: float) -> None:
    for col in columns.values():
        if len(col) == row:  # a name this record lacks
            col.append(fill)  # 0 for usage's "q" columns, NaN for the metrics' "d"


class RolloutTable:
    """Rollouts appended as records, iterated back as slim records (in the order appended)."""

    def __init__(self) -> None:
        self._item_index: dict[str, int] = {}
        self._items: list[tuple[str, str | None, str]] = []  # (example_id, group, item_hash)
        self._item = array("I")
        self._rollout = array("I")
        self._reward = array("d")
        self._blank = bytearray()
        # array[Any]: the loops below treat both alike (usage holds ints "q", metrics floats "d")
        self._usage: dict[str, array[Any]] = {}
        self._metrics: dict[str, array[Any]] = {}
        self._errors: dict[int, str] = {}  # row → error message (errors are few)
        self._costs: dict[int, float] = {}  # row → cost_usd, where a suite reported one
        # row → a judge's tokens, cost and position-swap consistency (the metadata's judge
        # figures); its reasoning and raw replies stay in the journal.
        self._judges: dict[int, dict[str, Any]] = {}
        self._served: dict[int, dict[str, Any]] = {}  # row → served_by, where a fallback answered
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def errored(self) -> int:
        """Rollouts that errored (or scored NaN, ±inf: :func:`unusable`)."""
        return len(self._errors)

    def append(self, rec: dict[str, Any]) -> int:
        """Add one record; returns its item's index (in the order items were first seen)."""
        row = self._n
        index = self._item_index.get(rec["example_id"])
        if index is None:
            index = self._item_index[rec["example_id"]] = len(self._items)
            self._items.append((rec["example_id"], rec.get("group"), rec.get("item_hash", "")))
        self._item.append(index)
        self._rollout.append(rec.get("rollout", 0))  # a hand-made record may leave it out
        error = rec["error"] if rec["error"] is not None else unusable(rec)
        if error is not None and rec["error"] is None:  # kept as an error, its values dropped
            rec = {**rec, "reward": None, "metrics": {}, "error": error}
        reward = rec["reward"]
        self._reward.append(_NAN if reward is None else float(reward))
        completion = rec.get("completion")
        blank = completion is None or (isinstance(completion, str) and not completion.strip())
        self._blank.append(1 if blank else 0)
        usage, metrics = rec.get("usage") or {}, rec["metrics"]
        columns = self._usage
        for name, value in usage.items():
            col = columns.get(name)
            if col is None:  # a new name: earlier rows did not have it
                col = columns[name] = array("q", [0]) * row
            col.append(int(value))
        if len(usage) != len(columns):  # names this record lacks (the common record has all)
            _fill(columns, row, 0)
        columns = self._metrics
        for name, value in metrics.items():
            col = columns.get(name)
            if col is None:
                col = columns[name] = array("d", [_NAN]) * row
            col.append(float(value))
        if len(metrics) != len(columns):
            _fill(columns, row, _NAN)
        if rec["error"] is not None:
            self._errors[row] = rec["error"]
        if rec.get("cost_usd") is not None:
            self._costs[row] = rec["cost_usd"]
        judge = rec.get("judge")
        if judge:
            self._judges[row] = {k: judge[k] for k in _JUDGE_FIELDS if k in judge}
        if rec.get("served_by"):  # costs price these tokens as the model that answered
            self._served[row] = rec["served_by"]
        self._n += 1
        return index

    def items(self) -> list[tuple[str, str | None, str | None]]:
        """(example_id, group, item_hash) of each item, as its first rollout recorded them, in
        the order first seen: per item, what pairing a run with a baseline reads."""
        return list(self._items)

    def served(self) -> dict[str, frozenset[str]]:
        """item id → the models other than the configured one that answered its rollouts
        (items no fallback answered are left out)."""
        out: dict[str, set[str]] = {}
        for row, by in self._served.items():
            out.setdefault(self._items[self._item[row]][0], set()).update(by)
        return {item: frozenset(names) for item, names in out.items()}

    def extend(self, records: Iterable[dict[str, Any]]) -> None:
        for rec in records:
            self.append(rec)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        usage, metrics = list(self._usage.items()), list(self._metrics.items())
        for row in range(self._n):
            yield self._row(row, usage, metrics)

    def _row(
        self, row: int, usage: list[tuple[str, array[Any]]], metrics: list[tuple[str, array[Any]]]
    ) -> dict[str, Any]:
        example_id, group, ihash = self._items[self._item[row]]
        reward = self._reward[row]
        rec: dict[str, Any] = {
            "example_id": example_id,
            "item_hash": ihash,
            "rollout": self._rollout[row],
            "group": group,
            "reward": None if math.isnan(reward) else reward,
            "error": self._errors.get(row),
            "completion": "" if self._blank[row] else "…",  # only blank or not is kept
            "usage": {name: col[row] for name, col in usage},
            "metrics": {n: v for n, col in metrics if not math.isnan(v := col[row])},
        }
        if row in self._costs:
            rec["cost_usd"] = self._costs[row]
        if row in self._judges:
            rec["judge"] = self._judges[row]
        if row in self._served:
            rec["served_by"] = self._served[row]
        return rec

    @classmethod
    def ordered(cls, parts: Iterable[RolloutTable], order: dict[str, int]) -> RolloutTable:
        """The rows of ``parts`` in one table, sorted by (``order`` of their item, rollout):
        a resumed run's kept rollouts and its new ones in run order, without a dict per row."""
        import numpy as np  # only a resumed run merges (start-up time of every other run)

        parts = list(parts)
        unknown = len(order)
        span = 1 + max((max(t._rollout, default=0) for t in parts), default=0)
        keys = []
        for part in parts:
            places = np.array(
                [order.get(example_id, unknown) for example_id, _, _ in part._items], dtype=np.int64
            )
            item = np.frombuffer(part._item, dtype=np.uint32) if part._n else np.zeros(0, int)
            rollout = np.frombuffer(part._rollout, dtype=np.uint32) if part._n else np.zeros(0, int)
            keys.append(places[item] * span + rollout if part._n else np.zeros(0, np.int64))
        # Stable: rows of one key keep their order (the parts' order, then appended order), as
        # sorting the records themselves did.
        sequence = np.argsort(np.concatenate(keys), kind="stable")
        sizes = [t._n for t in parts]
        part_of = np.repeat(np.arange(len(parts)), sizes)[sequence]
        row_of = sequence - np.cumsum([0, *sizes])[:-1][part_of]
        columns = [(list(t._usage.items()), list(t._metrics.items())) for t in parts]
        out = cls()
        step = 1 << 16  # a block at a time: no list of a million ints
        for at in range(0, len(sequence), step):
            block = zip(
                part_of[at : at + step].tolist(), row_of[at : at + step].tolist(), strict=True
            )
            for p, row in block:
                out.append(parts[p]._row(row, *columns[p]))
        return out

    def __add__(self, other: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*self, *other]

    def __radd__(self, other: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*other, *self]
