"""Read a run's results.jsonl after a crash, and tell what is left to run.

The engine appends one JSON line per finished rollout. A process killed mid-write (kill -9, OOM,
a lost runner) can leave a torn last line; a resumed run that re-ran a pair, or two writers, can
leave duplicates. :func:`read_journal` tolerates both: it keeps the first complete record of each
(example_id, rollout) pair and says which pairs of the plan are missing; :func:`resume_journal`
also repairs the file, so the resumed run appends to a clean journal. The engine then runs only
the missing pairs: ``run_suite(..., skip=state.done)``.

A record is kept only if it belongs to the plan: its item is among the run's items with the same
``item_hash`` (``fingerprint.identity``: an item whose prompt, answer or exam changed since is
re-run) and its rollout index is below k.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from evalgate.run.fingerprint import identity
from evalgate.run.rollouts import RolloutTable

if TYPE_CHECKING:
    from evalgate.suites.base import Item

try:  # a journal of 100k rollouts parses 5x faster; both raise ValueError on a bad line
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - where orjson is not installed
    # json.loads's signature has keyword options orjson's lacks; both take one str or bytes.
    from json import loads as _loads  # type: ignore[assignment]

__all__ = [
    "RECORD_KEYS",
    "JournalState",
    "Pairs",
    "is_complete",
    "kept_records",
    "order_records",
    "order_tables",
    "read_journal",
    "resume_journal",
    "rewrite_journal",
]

_Record = TypeVar("_Record", bound=Mapping[str, object])  # a record, as its caller types it

# Every results.jsonl line has at least these keys (see evalgate.run.engine; a suite may add
# `reason` or `cost_usd`).
RECORD_KEYS = frozenset(
    {
        "example_id",
        "item_hash",
        "rollout",
        "group",
        "prompt",
        "completion",
        "answer",
        "reward",
        "metrics",
        "usage",
        "timing",
        "error",
    }
)

Pair = tuple[str, int]


class Pairs(AbstractSet[Pair]):
    """A set of (example_id, rollout) pairs in a few bytes a pair: per item a bit mask of its
    rollouts (below 64; a rare higher index in a plain set), not a tuple per rollout."""

    def __init__(self, pairs: Iterable[Pair] = ()) -> None:
        self._masks: dict[str, int] = {}
        self._high: set[Pair] = set()
        self._n = 0
        for pair in pairs:
            self.add(pair)

    def add(self, pair: Pair) -> None:
        item, rollout = pair
        if not 0 <= rollout < 64:
            if pair not in self._high:
                self._high.add(pair)
                self._n += 1
            return
        mask = self._masks.get(item, 0)
        if not mask >> rollout & 1:
            self._masks[item] = mask | 1 << rollout
            self._n += 1

    def __contains__(self, pair: object) -> bool:
        if not isinstance(pair, tuple) or len(pair) != 2 or type(pair[1]) is not int:
            return False
        item, rollout = pair
        if not 0 <= rollout < 64:
            return pair in self._high
        return bool(self._masks.get(item, 0) >> rollout & 1)

    def __iter__(self) -> Iterator[Pair]:
        for item, mask in self._masks.items():
            for rollout in range(mask.bit_length()):
                if mask >> rollout & 1:
                    yield item, rollout
        yield from self._high

    def __len__(self) -> int:
        return self._n


# eq=False, repr=False: never compared (an identity, not a value); the generated methods would be
# compiled from source at every start-up (dataclasses exec each one: issue #36).
@dataclass(eq=False, repr=False)
class JournalState:
    """What a journal holds, after de-duplication: the kept rollouts as columns
    (:class:`~evalgate.run.rollouts.RolloutTable`; the file keeps the records) and their pairs
    as bits, so a resume of a million rollouts holds tens of bytes a rollout."""

    records: RolloutTable = field(default_factory=RolloutTable)  # kept, in file order
    done: Pairs = field(default_factory=Pairs)  # (example_id, rollout) of the kept records
    kept_lines: bytearray = field(default_factory=bytearray, repr=False)  # 1: a line kept
    torn: bool = False  # the last line has no newline: cut short by a crash mid-write
    bad_lines: int = 0  # other lines that are not complete records (torn tail excluded)
    duplicates: int = 0  # complete records of a pair already kept
    stale: int = 0  # complete records not in the plan (unknown or changed item, rollout ≥ k)
    retried_errors: int = 0  # errored records dropped so that their pairs run again
    # Of those, the ones the model had answered (scoring failed after: a judge's outage): their
    # prompt and reply by (example_id, rollout), so the retry asks only the scorer again.
    # The prompt: a string, or chat messages (JSON as the journal holds it).
    answered: dict[Pair, tuple[object, str, dict[str, int]]] = field(default_factory=dict)
    size: int = 0  # bytes read
    clean_size: int = 0  # bytes up to the end of the last complete line

    @property
    def dropped(self) -> int:
        """Lines not kept (the torn tail included)."""
        return self.bad_lines + self.duplicates + self.stale + self.retried_errors + self.torn

    def missing(self, items: Iterable[Item], rollouts: int) -> list[Pair]:
        """The plan's (example_id, rollout) pairs not in the journal, in run order."""
        return [(it.id, r) for it in items for r in range(rollouts) if (it.id, r) not in self.done]


def is_complete(rec: object) -> bool:
    """A whole record as the engine writes it: all keys, a scored or an errored rollout."""
    if not isinstance(rec, dict) or not rec.keys() >= RECORD_KEYS:
        return False
    if not isinstance(rec["example_id"], str) or type(rec["rollout"]) is not int:
        return False
    if rec["error"] is not None:
        return isinstance(rec["error"], str)
    reward = rec["reward"]
    return isinstance(reward, int | float) and not isinstance(reward, bool)


def _tabular(rec: Mapping[str, object]) -> bool:
    """A complete record (:func:`is_complete`: its rollout an int) whose columns
    (:class:`RolloutTable`) can hold it: a rollout index that fits, metrics and token counts as
    objects of numbers."""
    usage, metrics, rollout = rec["usage"] or {}, rec["metrics"] or {}, rec["rollout"]
    return (
        isinstance(rollout, int)
        and 0 <= rollout < 1 << 32
        and isinstance(metrics, dict)
        and isinstance(usage, dict)
        and all(type(v) in (int, float) for v in usage.values())
    )


def read_journal(
    path: str | os.PathLike[str],
    *,
    items: Iterable[Item] | None = None,
    rollouts: int | None = None,
    retry_errors: bool = False,
) -> JournalState:
    """Parse ``path`` (missing: empty). With ``items``/``rollouts``, keep only the plan's records.

    ``retry_errors``: drop errored records, so that their pairs count as missing and run again
    (resuming after an outage); by default an errored rollout is a result like any other.
    """
    state = JournalState()
    try:
        fh = Path(path).open("rb")  # noqa: SIM115 - closed by the `with` below
    except FileNotFoundError:
        return state
    plan = {it.id: identity(it) for it in items} if items is not None else None
    with fh:  # a line at a time: the journal of a long run is never held whole
        for line in fh:
            state.size += len(line)
            if not line.endswith(b"\n"):  # after the last newline: a line never finished
                state.torn = bool(line.strip())
                state.kept_lines.append(0)
                break
            state.clean_size = state.size
            state.kept_lines.append(_read_line(state, line, plan, rollouts, retry_errors))
    return state


def _read_line(
    state: JournalState,
    line: bytes,
    plan: dict[str, str] | None,
    rollouts: int | None,
    retry_errors: bool,
) -> int:
    """Count one complete line into ``state``; 1 when its record is kept."""
    if not line.strip():
        return 0
    try:
        rec = _loads(line)
    except ValueError:
        state.bad_lines += 1
        return 0
    if not is_complete(rec) or not _tabular(rec):
        state.bad_lines += 1
        return 0
    pair = (rec["example_id"], rec["rollout"])
    if pair in state.done:
        state.duplicates += 1
        return 0
    if plan is not None and plan.get(pair[0]) != rec.get("item_hash"):
        state.stale += 1
        return 0
    if rollouts is not None and not 0 <= pair[1] < rollouts:
        state.stale += 1
        return 0
    if retry_errors and rec["error"] is not None:
        state.retried_errors += 1
        completion = rec.get("completion")
        if isinstance(completion, str) and completion and rec.get("prompt"):
            state.answered[pair] = (rec["prompt"], completion, rec["usage"] or {})
        return 0
    state.done.add(pair)
    state.records.append({**rec, "metrics": rec["metrics"] or {}})
    return 1


def kept_records(path: str | os.PathLike[str], state: JournalState) -> Iterator[dict[str, object]]:
    """The records ``state`` kept, as written (texts included), read again from ``path`` one at
    a time: the file as :func:`read_journal` read it (before :func:`resume_journal` repairs it)."""
    with Path(path).open("rb") as src:
        for kept, line in zip(state.kept_lines, src, strict=False):
            if kept:
                yield _loads(line)


def _keep_lines(path: Path, state: JournalState) -> None:
    """Rewrite the journal with only the records ``state`` kept, as :func:`rewrite_journal`
    writes them, without holding them all."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for rec in kept_records(path, state):
            fh.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def rewrite_journal(path: str | os.PathLike[str], records: Iterable[Mapping[str, object]]) -> None:
    """Replace the journal with exactly ``records``, atomically (temp file, fsync, rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def resume_journal(
    path: str | os.PathLike[str],
    items: Iterable[Item],
    rollouts: int,
    *,
    retry_errors: bool = False,
) -> JournalState:
    """Read the journal for a resumed run and leave the file holding only the kept records.

    A torn tail alone is cut off (truncate to the last newline); anything else dropped makes the
    file be rewritten. Afterwards appending the missing pairs' records gives a clean journal.
    """
    items = list(items)
    state = read_journal(path, items=items, rollouts=rollouts, retry_errors=retry_errors)
    if state.dropped == state.torn:  # nothing dropped but (maybe) the torn tail
        if state.torn:
            os.truncate(path, state.clean_size)
    else:  # the kept records as written: the file is read again, line by line
        _keep_lines(Path(path), state)
    return state


def order_records(records: Iterable[_Record], items: Iterable[Item]) -> list[_Record]:
    """Records in the run's order: item order, then rollout (as ``run_suite`` returns them)."""
    order: dict[object, int] = {it.id: i for i, it in enumerate(items)}

    def key(rec: _Record) -> tuple[int, int]:
        rollout = rec["rollout"]
        if not isinstance(rollout, int):  # a complete record's is (is_complete)
            raise TypeError(f"rollout {rollout!r} is not an int")
        return order.get(rec["example_id"], len(order)), rollout

    return sorted(records, key=key)


def order_tables(tables: Iterable[RolloutTable], items: Iterable[Item]) -> RolloutTable:
    """:func:`order_records` for a resumed run's kept and new rollouts, kept as columns."""
    return RolloutTable.ordered(tables, {it.id: i for i, it in enumerate(items)})
