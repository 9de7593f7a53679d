"""A run's journal (``results.jsonl``) read back: every line checked as a
:class:`RolloutRecord`, streamed into a :class:`~evalgate.run.rollouts.RolloutTable`; a line that
is not what evalgate writes is refused in one line naming the file, the line and the field
(:class:`~evalgate.errors.UsageError`, exit 2). :mod:`evalgate.run.rundir` loads runs with it.
"""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Iterator
from itertools import accumulate, islice
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO, TypeGuard

from pydantic import ConfigDict, Field, ValidationError

from evalgate.config.spec._base import Deferred
from evalgate.errors import UsageError
from evalgate.run._columns import LIMIT
from evalgate.run.runfiles import field_error

try:  # orjson: parses a journal line ~4x faster than the stdlib; json is the fallback, and the
    # judge of every line orjson refuses (NaN, integers past 64 bits, lone surrogates: valid
    # to json.loads, as the engine writes them), so both read the same records.
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - where orjson is not installed
    _fast_loads = json.loads  # type: ignore[assignment]

if TYPE_CHECKING:
    from evalgate.run.rollouts import Batch, RolloutTable

__all__ = ["RolloutRecord", "iter_records", "journal_bytes", "parse_line", "read_records"]


# A rollout index and a token count past what the table's columns hold (run._columns), a
# negative or a non-finite count, are damage (a count was an internal error, exit 4).
_ROLLOUT_END, _COUNT_END = LIMIT["I"], LIMIT["q"]


class RolloutRecord(Deferred):
    """One line of ``results.jsonl`` (see :mod:`evalgate.run.engine` for every key written).
    Open (extra="allow"): the fields below are what evalgate's readers rely on; the prompt, the
    completion and a suite's own keys travel along untouched. Its validator is built by the
    first read (a run that reads no run files never builds it: ~8 ms of a 1-item run)."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    example_id: str
    rollout: int = Field(0, ge=0, lt=_ROLLOUT_END)
    item_hash: str | None = None
    error: str | None = None
    # The scores: numbers (NaN and ±inf are read as an errored rollout: see run.scored.unusable).
    reward: float | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    group: str | None = None
    cost_usd: float | None = Field(None, ge=0, allow_inf_nan=False)
    judge: dict[str, object] | None = None
    usage: dict[str, Annotated[float, Field(ge=0, lt=_COUNT_END)]] = Field(default_factory=dict)


_NUMBER = (float, int)
_INF = float("inf")
_NUMBERS = frozenset(_NUMBER)


def _numbers(values: object) -> TypeGuard[dict[str, float]]:
    # set(map(type, ...)) iterates in C: this check runs for every line of every run read.
    return type(values) is dict and _NUMBERS.issuperset(map(type, values.values()))


def _counts(values: object) -> bool:
    return _numbers(values) and all(0 <= v < _COUNT_END for v in values.values())


def _plain_record(value: dict[str, object]) -> bool:
    """:class:`RolloutRecord`'s checks, inlined: the model costs 60 % more than parsing the line
    (bench/rundir_load.py), and nearly every record is fine. Only a record failing these is
    validated by the model, for its one-line message. Every field a reader uses is checked:
    a baseline's damaged score must never turn into a quietly errored (left out) rollout."""
    rollout = value.get("rollout", 0)
    cost = value.get("cost_usd")
    return (
        type(value.get("example_id")) is str
        and type(rollout) is int
        and 0 <= rollout < _ROLLOUT_END
        and (value.get("item_hash") is None or type(value["item_hash"]) is str)
        and (value.get("error") is None or type(value["error"]) is str)
        and (value.get("reward") is None or type(value["reward"]) in _NUMBER)
        and ("metrics" not in value or _numbers(value["metrics"]))
        and ("usage" not in value or _counts(value["usage"]))
        and (value.get("group") is None or type(value["group"]) is str)
        and (cost is None or ((type(cost) is float or type(cost) is int) and 0 <= cost < _INF))
        and (value.get("judge") is None or type(value["judge"]) is dict)
    )


_READ_BUFFER = 1 << 16


def _open_journal(path: Path) -> BinaryIO:
    try:
        # 64 KiB blocks: iterating the lines of a ~1 GB journal costs half the CPU time of the
        # default 8 KiB buffer's (0.24 s against 0.48 s a million lines of ~920 bytes).
        return path.open("rb", buffering=_READ_BUFFER)
    except FileNotFoundError:
        raise UsageError(f"{path}: missing; not an evalgate run directory") from None
    except OSError as exc:
        raise UsageError(f"{path}: unreadable ({exc.strerror})") from exc


def journal_bytes(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, raw bytes) of each line of a journal, read a block at a time: a run of a
    million rollouts is never held whole, as text or as records. orjson parses the bytes without
    a decoded copy; a line that is not UTF-8 is refused by :func:`_slow_record`."""
    with _open_journal(path) as fh:
        lineno = 0
        try:
            for raw in fh:  # split on b"\n" only, as the writer does
                lineno += 1
                yield lineno, raw  # a line without its newline is the torn last one
        except OSError as exc:
            raise UsageError(f"{path}: unreadable ({exc.strerror})") from exc


def _journal_batches(path: Path) -> Iterator[list[bytes]]:
    """The lines of a journal as :func:`journal_bytes` reads them, :data:`_BATCH` at a time."""
    with _open_journal(path) as fh:
        try:
            while batch := list(islice(fh, _BATCH)):
                yield batch
        except OSError as exc:
            raise UsageError(f"{path}: unreadable ({exc.strerror})") from exc


def parse_line(raw: bytes) -> dict[str, object]:
    """A line of a journal :func:`read_records` has checked: a JSON object."""
    try:
        return _fast_loads(raw)
    except ValueError:  # NaN, big integers: as the stdlib reads them
        return json.loads(raw)


def _slow_record(path: Path, lineno: int, raw: bytes, ended: bool) -> object:
    """A line orjson refused, read as the stdlib reads it, or refused in one line: not UTF-8,
    cut off mid-line (no newline after it), or not JSON."""
    where = f"{path}:{lineno}"
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where}: not UTF-8 text ({exc.reason})") from None
    try:
        return json.loads(line)
    except ValueError as exc:
        if not ended:  # no newline after it: the writer was killed mid-line
            raise UsageError(
                f"{where}: cut off mid-line (the run was interrupted: `evalgate resume "
                f"{path.parent.name}` finishes it)"
            ) from None
        raise UsageError(f"{where}: not JSON ({exc})") from None


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every record of a run's journal, in file order, one at a time (unchecked: for readers of
    a run :func:`~evalgate.run.rundir.load_run` has checked, that need fields its table does not
    keep, such as the prompt and the completion)."""
    for _, raw in journal_bytes(Path(path)):
        try:
            yield _fast_loads(raw)
        except ValueError:
            if raw.decode("utf-8", "replace").strip():
                yield json.loads(raw)


# Lines between two trims of the heap while a journal is read (every 2^17 lines), and lines
# parsed and checked at once (read_records: the batch's records are ~1 MB).
_TRIM_SHIFT = 17
_BATCH = 512
_BATCH_FROM = 4 * _BATCH  # lines read a line at a time before batching loads numpy


class _Seen:
    """Which (item, rollout) pairs a journal has recorded so far, in a few bytes a rollout:
    a bit mask per item (rollouts below 64; the rare higher index in a set)."""

    def __init__(self) -> None:
        self.masks: list[int] = []  # per item: bit r set once rollout r < 64 is recorded
        self._high: set[tuple[int, int]] = set()

    def add(self, item: int, rollout: int) -> bool:
        """Record the pair; False when it was already there."""
        if item == len(self.masks):
            self.masks.append(0)
        if rollout >= 64:
            if (item, rollout) in self._high:
                return False
            self._high.add((item, rollout))
            return True
        bit = 1 << rollout
        if self.masks[item] & bit:
            return False
        self.masks[item] |= bit
        return True


def _first_line(path: Path, item: str, rollout: int | None = None) -> int:
    """The line of ``item``'s first record (of its ``rollout``, when given): an error message's
    "first on line N", looked up again only when there is an error to report."""
    for lineno, raw in journal_bytes(path):
        try:
            value = json.loads(raw) if raw.strip() else None
        except ValueError:  # not JSON, or not UTF-8 (a UnicodeDecodeError is a ValueError)
            continue
        if (
            isinstance(value, dict)
            and value.get("example_id") == item
            and (rollout is None or value.get("rollout", 0) == rollout)
        ):
            return lineno
    return 0  # pragma: no cover - the record was read from this file a moment ago


def _check_batch(
    table: RolloutTable, masks: list[int], lines: list[bytes], rollouts: int | None
) -> tuple[Batch, list[int], dict[int, int]] | None:
    """A batch of lines that :func:`read_records`'s loop would add each as a common record, with
    no error on any (a duplicate, another item's content, a rollout out of range): what adding
    them takes, and the rollout masks of _Seen after them (the new items', in order; the items
    seen before whose mask changed); None otherwise (nothing is changed: the loop then reads
    the batch a line at a time)."""
    batch = table.check_batch(map(_fast_loads, lines))
    if batch is None:
        return None
    top = max(batch.rollout)
    if (rollouts is not None and top >= rollouts) or top >= 64:  # _Seen keeps those in a set
        return None
    # Each (item, rollout) once: the new items' first rollouts set their mask, any other
    # record must add a bit not yet set (in the batch or before it).
    rollout = batch.rollout
    if len(batch.new) == len(rollout):  # every record a new item's first
        return batch, [1] * len(rollout) if not top else [1 << r for r in rollout], {}
    known = len(masks)
    index = batch.index.tolist()
    fresh = [1 << rollout[p] for p in batch.new]
    firsts = set(batch.new)
    changed: dict[int, int] = {}
    for place, (item, r) in enumerate(zip(index, rollout, strict=True)):
        if place in firsts:
            continue
        bit = 1 << r
        mask = changed.get(item)
        if mask is None:
            mask = fresh[item - known] if item >= known else masks[item]
        if mask & bit:
            return None
        changed[item] = mask | bit
    old: dict[int, int] = {}
    for item, mask in changed.items():
        if item >= known:
            fresh[item - known] = mask
        else:
            old[item] = mask
    return batch, fresh, old


def read_records(path: Path, rollouts: int | None = None) -> RolloutTable:
    """Every line a whole record; duplicates and torn lines are errors (`resume` repairs both),
    and so is a rollout index at or past the run's configured ``rollouts`` (k), when known.

    Streamed into a :class:`~evalgate.run.rollouts.RolloutTable` (the columns summaries and
    comparisons read; per item, its first content hash, which the checks read back) with a bit
    per rollout for the checks: tens of bytes a rollout, however long the run
    (bench/gate_memory.py). A batch of common records is checked and added at once
    (:func:`_check_batch`: ~2.5x faster a line); any other batch a line at a time."""
    from evalgate.run.heap import trim
    from evalgate.run.rollouts import RolloutTable

    table = RolloutTable()
    seen = _Seen()
    # Bound once: this loop runs once a rollout (a million times for a large run).
    loads, plain, add, common, mark, same = (
        _fast_loads,
        _plain_record,
        table.add_checked,
        table.add_common,
        seen.add,
        table.same_hash,
    )
    offset = 0  # where each item's first line starts: table.item_offsets
    masks = seen.masks
    lineno = 0
    for lines in _journal_batches(path):
        if (lineno + len(lines)) >> _TRIM_SHIFT != lineno >> _TRIM_SHIFT:
            trim()  # the freed records' pages back to the system (run/heap.py)
        # Batches need numpy (the ids' look-up): a short journal is read a line at a time,
        # without loading it (a small run's start-up: tests/test_startup.py).
        batching = lineno >= _BATCH_FROM or "numpy" in sys.modules
        checked = _check_batch(table, masks, lines, rollouts) if batching else None
        if checked is not None:
            batch, new_masks, old = checked
            ends = list(accumulate(map(len, lines), initial=offset))
            if len(batch.new) == len(lines):  # every line a new item's first
                _add_offsets(table, ends[:-1])
            else:
                _add_offsets(table, [ends[p] for p in batch.new])
            table.add_batch(batch)
            masks += new_masks
            for item, mask in old.items():
                masks[item] = mask
            offset = ends[-1]
            lineno += len(lines)
            continue
        starts = table.item_offsets
        known = len(table.id_table)  # items so far: only this loop adds them
        for raw in lines:
            lineno += 1
            at, offset = offset, offset + len(raw)
            try:
                value = loads(raw)
            except ValueError:
                if not raw.decode("utf-8", "replace").strip():  # a blank line, as str.strip sees it
                    continue
                value = _slow_record(path, lineno, raw, raw.endswith(b"\n"))
            if not isinstance(value, dict):
                raise UsageError(f"{path}:{lineno}: not a JSON object (a {type(value).__name__})")
            # The common record is checked and added in one call; any other is checked field by
            # field (the model says what is wrong) and added the general way.
            index = common(value)
            if index < 0:
                if not plain(value):
                    try:
                        RolloutRecord.model_validate(value)
                    except ValidationError as exc:
                        raise UsageError(f"{path}:{lineno}: {field_error(exc)}") from None
                index = add(value)
            rollout = value.get("rollout", 0)  # the id and the hash are read only for a message
            new = index == known
            if new:
                known += 1
                try:
                    starts.append(at)
                except OverflowError:  # a journal past 4 GiB: its offsets take 8 bytes from here
                    starts = table.item_offsets = array("q", starts)
                    starts.append(at)
                if rollout < 64:  # _Seen.add's common case inline: a new item's first rollout
                    masks.append(1 << rollout)
                    fresh = True
                else:
                    fresh = mark(index, rollout)
            else:
                fresh = mark(index, rollout)
            if not fresh:
                item = value["example_id"]
                where, first = f"{path}:{lineno}", _first_line(path, item, rollout)
                raise UsageError(
                    f"{where}: duplicate record of item {item!r} rollout {rollout} "
                    f"(first on line {first}; `evalgate resume {path.parent.name}` repairs the "
                    "journal)"
                )
            if not new and not same(index, value.get("item_hash")):  # a new item's is its own
                item = value["example_id"]
                where, first = f"{path}:{lineno}", _first_line(path, item)
                raise UsageError(
                    f"{where}: item_hash: item {item!r} has other content than on line "
                    f"{first} (two items share one id)"
                )
            if rollouts is not None and rollout >= rollouts:
                raise UsageError(
                    f"{path}:{lineno}: rollout: {rollout} is out of range (the run has {rollouts} "
                    f"rollout{'s' if rollouts != 1 else ''} per item: 0 to {rollouts - 1})"
                )
    trim()
    return table


def _add_offsets(table: RolloutTable, offsets: list[int]) -> None:
    """The new items' first lines' offsets, widening the column past 4 GiB (read_records)."""
    if offsets and offsets[-1] >= LIMIT["I"] and table.item_offsets.typecode == "I":
        table.item_offsets = array("q", table.item_offsets)
    table.item_offsets.extend(offsets)
