"""The typed columns a :class:`~evalgate.run.rollouts.RolloutTable` appends a record's numbers
to: token counts as 4-byte integers widened to 8 when one does not fit, scores as doubles (NaN
where a row lacks the metric), an item's content hash as its 8 bytes."""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping

__all__ = ["HASH_BYTES", "LIMIT", "NAN", "add_scores", "add_usage", "pack_hash"]

NAN = math.nan
HASH_BYTES = 8  # an item's content hash, as the engine writes it: 16 hex digits
# One past the largest value each integer column holds: a rollout index and a token count are
# "I" (4 bytes); a count that does not fit widens its column to "q" (add_usage). The run-folder
# reader refuses a record whose numbers no column can hold (run.records).
LIMIT = {"I": 2**32, "q": 2**63}


def _fill(columns: Mapping[str, array[int] | array[float]], row: int, fill: float) -> None:
    for col in columns.values():
        if len(col) == row:  # a name this record lacks
            col.append(fill)  # type: ignore[arg-type]  # 0 for usage's ints, NaN for scores


def add_usage(columns: dict[str, array[int]], usage: Mapping[str, float], row: int) -> None:
    """Row ``row``'s token counts into ``columns`` (a new name: earlier rows had 0 of it).
    4 bytes a count ("I") until one does not fit (negative, 2^32 or more): that column is then
    widened to 8 ("q")."""
    for name, value in usage.items():
        col = columns.get(name)
        if col is None:
            col = columns[name] = array("I", [0]) * row
        try:
            col.append(int(value))
        except OverflowError:
            col = columns[name] = array("q", col)
            col.append(int(value))
    if len(usage) != len(columns):  # names this record lacks (the common record has all)
        _fill(columns, row, 0)


def add_scores(columns: dict[str, array[float]], scores: Mapping[str, float], row: int) -> None:
    """Row ``row``'s metric values into ``columns`` (NaN: a row without that metric)."""
    for name, score in scores.items():
        col = columns.get(name)
        if col is None:
            col = columns[name] = array("d", [NAN]) * row
        col.append(float(score))
    if len(scores) != len(columns):
        _fill(columns, row, NAN)


def pack_hash(ihash: str | None) -> bytes | None:
    """The bytes of a hash of 2 × HASH_BYTES lowercase hex digits (the engine's), else None."""
    if type(ihash) is not str or len(ihash) != 2 * HASH_BYTES:
        return None
    try:
        packed = bytes.fromhex(ihash)
    except ValueError:
        return None
    return packed if packed.hex() == ihash else None
