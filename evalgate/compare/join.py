"""Which PR items pair with which baseline items: a join of two runs' tables, in numpy.

Items pair on their id and their content hash (a changed item is never paired with its old
self) and when the same models answered them on both sides (a LiteLLM fallback on one side only
would pair two models). The join reads the tables' columns: per item an 8-byte code of its id,
sorted and searched (``np.searchsorted``), each match then confirmed on the ids themselves (two
ids with one code never pair), and the packed content hashes compared as integers: no dict or
str per item (a million items compared: bench/compare_scale.py).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalgate.run.item_ids import BLOCK

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from evalgate.run.rollouts import RolloutTable

__all__ = ["Pairing", "join_ids", "pair_items"]


@dataclass(frozen=True)
class Pairing:
    """How a PR run's items meet its baseline's, per PR item (its index in the PR's table)."""

    at_base: npt.NDArray[np.intp]  # its index in the baseline's table, −1 where absent
    paired: npt.NDArray[np.bool_]  # same id and content, answered by the same models
    n_in_base: int  # PR items the baseline has (by id)
    n_changed: int  # of those, with other content
    n_fallback: int  # same content, answered by a fallback model on one side only


def pair_items(base: RolloutTable, head: RolloutTable) -> Pairing:
    """The join of ``head``'s items with ``base``'s."""
    at = join_ids(base, head)
    found = at >= 0
    same = found & _same_content(base, head, at)
    mixed = _answered_apart(base, head, same)
    n_in, n_same = int(found.sum()), int(same.sum())
    return Pairing(at, same & ~mixed, n_in, n_in - n_same, int(mixed.sum()))


# The last join per PR table, while it lives: (the base table, its item count, the result,
# read-only). The report joins the same two runs the comparison just did (a million items: a
# second of CPU and ~50 MB of temporaries, again). Tables only grow: equal counts, equal join.
_JOINED: weakref.WeakKeyDictionary[RolloutTable, tuple[weakref.ref[RolloutTable], int, Any]] = (
    weakref.WeakKeyDictionary()
)


def join_ids(base: RolloutTable, head: RolloutTable) -> npt.NDArray[np.intp]:
    """Per head item, the base item of the same id (−1: none), read-only."""
    known = _JOINED.get(head)
    if (
        known is not None
        and known[0]() is base
        and known[1] == base.n_items
        and len(known[2]) == head.n_items
    ):
        return known[2]
    at = _join_ids(base, head)
    at.flags.writeable = False
    _JOINED[head] = (weakref.ref(base), base.n_items, at)
    return at


def _join_ids(base: RolloutTable, head: RolloutTable) -> npt.NDArray[np.intp]:
    import numpy as np

    head_codes, base_codes = head.id_codes(), base.id_codes()
    at = np.full(head_codes.size, -1, dtype=np.intp)
    if not base_codes.size or not head_codes.size:
        return at
    order = np.argsort(base_codes, kind="stable")
    ranked = base_codes[order]
    where = np.minimum(np.searchsorted(ranked, head_codes), ranked.size - 1)
    hit = ranked[where] == head_codes
    at[hit] = order[where[hit]]
    del order, ranked, where, hit
    # Equal ids have equal codes; equal codes need not be equal ids: each match is checked,
    # a block of ids at a time where both runs list the same ids in the same order (the
    # common case: one block's text compared, not 4,096 ids one by one).
    base_ids, head_ids = base.id_table, head.id_table
    for start in range(0, at.size, BLOCK):
        block, number = at[start : start + BLOCK], start // BLOCK
        if head_ids.same_block(base_ids, number) and bool(
            np.all(block == np.arange(start, start + block.size))
        ):
            continue
        for offset, (item_id, index) in enumerate(
            zip(head_ids.block_ids(number), block.tolist(), strict=True)
        ):
            if index >= 0 and not base_ids.is_id(index, item_id):
                at[start + offset] = base_ids.find(item_id)
    return at


def _same_content(
    base: RolloutTable, head: RolloutTable, at: npt.NDArray[np.intp]
) -> npt.NDArray[np.bool_]:
    """Per head item, whether the base item ``at`` it joined has its content hash."""
    import numpy as np

    base_hash, base_odd = base.content_hashes()
    head_hash, head_odd = head.content_hashes()
    if not base_hash.size:  # a baseline that recorded nothing (stopped before its first record)
        return np.zeros(at.size, dtype=bool)
    index = np.maximum(at, 0)
    same = (at >= 0) & (base_hash[index] == head_hash)
    if base_odd or head_odd:  # hashes not the engine's: compared as their text, one by one
        odd = np.zeros(at.size, dtype=bool)
        odd[list(head_odd)] = True
        if base_odd:
            odd_base = np.zeros(base_hash.size, dtype=bool)
            odd_base[list(base_odd)] = True
            odd |= (at >= 0) & odd_base[index]
        for i in np.nonzero(odd)[0].tolist():
            same[i] = at[i] >= 0 and base.same_hash(int(at[i]), head.item_hash(i))
    return same


def _answered_apart(
    base: RolloutTable, head: RolloutTable, same: npt.NDArray[np.bool_]
) -> npt.NDArray[np.bool_]:
    """Per head item, whether other models answered it on the two sides (fallbacks: few)."""
    import numpy as np

    mixed = np.zeros(same.size, dtype=bool)
    base_served, head_served = base.served(), head.served()
    none: frozenset[str] = frozenset()
    for item_id in base_served.keys() | head_served.keys():
        index = head.index_of(item_id)
        if index is not None and same[index]:
            mixed[index] = base_served.get(item_id, none) != head_served.get(item_id, none)
    return mixed
