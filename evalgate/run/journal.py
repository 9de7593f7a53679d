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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.run.fingerprint import identity

try:  # a journal of 100k rollouts parses 5x faster; both raise ValueError on a bad line
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - where orjson is not installed
    # json.loads's signature has keyword options orjson's lacks; both take one str or bytes.
    from json import loads as _loads  # type: ignore[assignment]

__all__ = [
    "RECORD_KEYS",
    "JournalState",
    "is_complete",
    "order_records",
    "read_journal",
    "resume_journal",
    "rewrite_journal",
]

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


@dataclass
class JournalState:
    """What a journal holds, after de-duplication."""

    records: list[dict[str, Any]] = field(default_factory=list)  # kept, in file order
    done: set[Pair] = field(default_factory=set)  # (example_id, rollout) of the kept records
    torn: bool = False  # the last line has no newline: cut short by a crash mid-write
    bad_lines: int = 0  # other lines that are not complete records (torn tail excluded)
    duplicates: int = 0  # complete records of a pair already kept
    stale: int = 0  # complete records not in the plan (unknown or changed item, rollout ≥ k)
    retried_errors: int = 0  # errored records dropped so that their pairs run again
    size: int = 0  # bytes read
    clean_size: int = 0  # bytes up to the end of the last complete line

    @property
    def dropped(self) -> int:
        """Lines not kept (the torn tail included)."""
        return self.bad_lines + self.duplicates + self.stale + self.retried_errors + self.torn

    def missing(self, items: Iterable[Any], rollouts: int) -> list[Pair]:
        """The plan's (example_id, rollout) pairs not in the journal, in run order."""
        return [(it.id, r) for it in items for r in range(rollouts) if (it.id, r) not in self.done]


def is_complete(rec: Any) -> bool:
    """A whole record as the engine writes it: all keys, a scored or an errored rollout."""
    if not isinstance(rec, dict) or not rec.keys() >= RECORD_KEYS:
        return False
    if not isinstance(rec["example_id"], str) or type(rec["rollout"]) is not int:
        return False
    if rec["error"] is not None:
        return isinstance(rec["error"], str)
    reward = rec["reward"]
    return isinstance(reward, int | float) and not isinstance(reward, bool)


def read_journal(
    path: str | os.PathLike[str],
    *,
    items: Iterable[Any] | None = None,
    rollouts: int | None = None,
    retry_errors: bool = False,
) -> JournalState:
    """Parse ``path`` (missing: empty). With ``items``/``rollouts``, keep only the plan's records.

    ``retry_errors``: drop errored records, so that their pairs count as missing and run again
    (resuming after an outage); by default an errored rollout is a result like any other.
    """
    state = JournalState()
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return state
    state.size = len(data)
    plan = {it.id: identity(it) for it in items} if items is not None else None
    lines = data.split(b"\n")
    tail = lines.pop()  # after the last newline: b"" when the file ends cleanly
    state.clean_size = len(data) - len(tail)
    if tail.strip():
        state.torn = True  # a line without its newline was never finished
    for line in lines:
        if not line.strip():
            continue
        try:
            rec = _loads(line)
        except ValueError:
            state.bad_lines += 1
            continue
        if not is_complete(rec):
            state.bad_lines += 1
            continue
        pair = (rec["example_id"], rec["rollout"])
        if pair in state.done:
            state.duplicates += 1
            continue
        if plan is not None and plan.get(pair[0]) != rec.get("item_hash"):
            state.stale += 1
            continue
        if rollouts is not None and not 0 <= pair[1] < rollouts:
            state.stale += 1
            continue
        if retry_errors and rec["error"] is not None:
            state.retried_errors += 1
            continue
        state.done.add(pair)
        state.records.append(rec)
    return state


def rewrite_journal(path: str | os.PathLike[str], records: Iterable[dict[str, Any]]) -> None:
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
    items: Iterable[Any],
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
    else:
        rewrite_journal(path, state.records)
    return state


def order_records(records: Iterable[dict[str, Any]], items: Iterable[Any]) -> list[dict[str, Any]]:
    """Records in the run's order: item order, then rollout (as ``run_suite`` returns them)."""
    order = {it.id: i for i, it in enumerate(items)}
    return sorted(records, key=lambda r: (order.get(r["example_id"], len(order)), r["rollout"]))
