"""A run's item ids, in the order first seen, and id → index: ~30 bytes an item.

A dict of str → int with a list of the ids cost ~145 bytes an item (the str object, the dict's
entry, a boxed int): 145 MB for each of the two runs `evalgate compare` reads at a million
items (bench/compare_scale.py). Here the ids are kept as text, a block of :data:`_BLOCK` ids
joined into one str with their end offsets, and the index is an open-addressing hash table: the
item index per slot (linear probing, at most half full) and the id's ``hash()`` per item (8
bytes an item, not 8 a slot: a million items, 8 MB less a run). A lookup compares the id found
at a slot with the one asked for without building a copy (``str.startswith`` at an offset), so
two ids with one hash never share an index.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, ValuesView
from itertools import accumulate
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # numpy loads with the first column read: a 1-item run needs none
    import numpy as np
    import numpy.typing as npt

__all__ = ["BLOCK", "ItemIds", "ItemValues", "Lookup"]

_BLOCK = 4096  # ids per block of text: one str and its end offsets once full
BLOCK = _BLOCK
_EMPTY = -1
_code = hash  # an id's code (tests put many ids on one code: lookups compare the ids)
_VECTOR_GROW = 1 << 15  # from this many items a table grows with numpy (see _placed)
_VECTOR_PROBES = 4  # probe steps taken for a batch of ids at once (lookup, extend)


class Lookup(NamedTuple):
    """:meth:`ItemIds.lookup` of a batch of ids."""

    found: npt.NDArray[np.int64]  # per id, its index (an id not yet there: the next ones)
    new: list[int]  # the places of the first of each id not yet there
    # (size, mask) of the table looked in, and per new id its code and the empty slot its
    # probe ended at (:meth:`ItemIds.extend` places it there when the table is unchanged).
    ends: tuple[int, int, npt.NDArray[np.int64], npt.NDArray[np.int64]]


class ItemIds:
    """Item ids in the order added; :meth:`find` and :meth:`add` map an id to its index."""

    def __init__(self) -> None:
        # Full blocks: (text, end offsets; a block's text is far below 2^32 characters).
        self._blocks: list[tuple[str, array[int]]] = []
        self._open: list[str] = []  # the block being filled, as str objects
        self._codes = array("q")  # per item: its id's hash()
        self._slots = array("i", [_EMPTY]) * 8  # per slot: the item index, _EMPTY when free
        self._mask = 7
        self.size = 0  # the number of ids (``len``, without a method call: read once a rollout)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> str:
        block, at = divmod(index, _BLOCK)
        if block == len(self._blocks):
            return self._open[at]
        text, ends = self._blocks[block]
        return text[ends[at - 1] if at else 0 : ends[at]]

    def __iter__(self) -> Iterator[str]:
        for text, ends in self._blocks:
            start = 0
            for end in ends:
                yield text[start:end]
                start = end
        yield from self._open

    def is_id(self, index: int, item_id: str) -> bool:
        """Whether item ``index``'s id is ``item_id`` (no copy of the stored id is made)."""
        block, at = divmod(index, _BLOCK)
        if block == len(self._blocks):
            return self._open[at] == item_id
        text, ends = self._blocks[block]
        start = ends[at - 1] if at else 0
        return ends[at] - start == len(item_id) and text.startswith(item_id, start)

    def block_ids(self, block: int) -> list[str]:
        """The ids of block ``block`` (:data:`_BLOCK` of them from index ``block * _BLOCK``;
        the last may hold fewer), in order."""
        if block == len(self._blocks):
            return list(self._open)
        text, ends = self._blocks[block]
        out, start = [], 0
        for end in ends:
            out.append(text[start:end])
            start = end
        return out

    def same_block(self, other: ItemIds, block: int) -> bool:
        """Whether full block ``block`` of ids (:data:`_BLOCK` of them, from index
        ``block * _BLOCK``) is the same ids in the same order here and in ``other``: one
        comparison of the blocks' texts and ends, where a join would check each id."""
        if block >= len(self._blocks) or block >= len(other._blocks):
            return False
        mine, theirs = self._blocks[block], other._blocks[block]
        return mine[1] == theirs[1] and mine[0] == theirs[0]

    def find(self, item_id: str) -> int:
        """The id's index, −1 when absent."""
        code = _code(item_id)
        slot = code & self._mask
        codes, slots = self._codes, self._slots
        while (index := slots[slot]) != _EMPTY:
            if codes[index] == code and self.is_id(index, item_id):
                return index
            slot = (slot + 1) & self._mask
        return -1

    def add(self, item_id: str) -> int:
        """The id's index, added (as the next index) when absent."""
        code = _code(item_id)
        mask = self._mask
        slot = code & mask
        codes, slots = self._codes, self._slots
        while (index := slots[slot]) != _EMPTY:
            if codes[index] == code and self.is_id(index, item_id):
                return index
            slot = (slot + 1) & mask
        index = self.size
        slots[slot] = index
        codes.append(code)
        self.size += 1
        self._open.append(item_id)
        if len(self._open) == _BLOCK:
            self._close_block()
        if 2 * self.size > mask:  # more than half full: probes stay short
            self._grow()
        return index

    def lookup(self, ids: list[str]) -> Lookup:
        """What :meth:`add` of each id in turn would return, without adding any (per id, its
        index; the places in ``ids`` of the first of each id not yet here, whose indices are
        the next ones in that order), and where the new ids' probes ended, for
        :meth:`extend`. A journal's lines are read a batch at a time (records.py): the ids are
        probed a step for all at once with numpy, the few still probing after a few steps one
        by one."""
        import numpy as np

        distinct = list(dict.fromkeys(ids))  # in the order first seen
        codes = np.fromiter(map(_code, distinct), dtype=np.int64, count=len(distinct))
        found = np.full(len(distinct), _EMPTY, dtype=np.int64)
        place = codes & self._mask  # per id: the slot its probe is at (ends at an empty one)
        if self.size:
            slots = np.frombuffer(self._slots, dtype=np.int32)
            known = np.frombuffer(self._codes, dtype=np.int64)
            pending = np.arange(len(distinct))
            for _ in range(_VECTOR_PROBES):
                at = slots[place[pending]]
                held = at != _EMPTY  # an empty slot: not here
                pending, at = pending[held], at[held]
                same = np.flatnonzero(known[at] == codes[pending])
                for j, index in zip(pending[same].tolist(), at[same].tolist(), strict=True):
                    if self.is_id(index, distinct[j]):  # one code, two ids: compared
                        found[j] = index
                if same.size:
                    pending = pending[found[pending] == _EMPTY]
                place[pending] = (place[pending] + 1) & self._mask
            del slots, known  # views of the arrays: they must be free to grow
            for j in pending.tolist():  # far from home: probed on one by one
                found[j], place[j] = self._probe(distinct[j], int(codes[j]), int(place[j]))
        absent = np.flatnonzero(found == _EMPTY)
        found[absent] = self.size + np.arange(absent.size)
        ends = (self.size, self._mask, codes[absent], place[absent])
        if len(distinct) == len(ids):  # no id twice (one rollout an item)
            return Lookup(found, absent.tolist(), ends)
        where = dict(zip(distinct, range(len(distinct)), strict=True))
        at_ids = np.fromiter(map(where.__getitem__, ids), dtype=np.intp, count=len(ids))
        first = np.full(len(distinct), len(ids), dtype=np.intp)
        np.minimum.at(first, at_ids, np.arange(len(ids)))
        return Lookup(found[at_ids], first[absent].tolist(), ends)

    def _probe(self, item_id: str, code: int, slot: int) -> tuple[int, int]:
        """(the id's index, −1 when absent; the slot its probe ended at), probing on from
        ``slot`` (every slot from the id's home to there holds another id)."""
        codes, slots = self._codes, self._slots
        while (index := slots[slot]) != _EMPTY:
            if codes[index] == code and self.is_id(index, item_id):
                return index, slot
            slot = (slot + 1) & self._mask
        return _EMPTY, slot

    def extend(self, ids: list[str], looked: Lookup | None = None) -> None:
        """Add ids that are not here, each once (:meth:`lookup`'s new ones, in its order, and
        that lookup when nothing was added since): the indices, blocks and codes :meth:`add` of
        each in turn gives."""
        import numpy as np

        if not ids:
            return
        grow = 2 * (self.size + len(ids)) > self._mask  # at most half full, as add keeps it
        if looked is not None and looked.ends[:2] == (self.size, self._mask) and not grow:
            # Each where its probe ended (an empty slot, every slot from its home to there
            # taken); of the ids that ended at one slot, the first takes it, the others probe
            # on from there.
            _, _, codes, ends = looked.ends
            slots = np.frombuffer(self._slots, dtype=np.int32)
            _, first = np.unique(ends, return_index=True)
            slots[ends[first]] = first + self.size
            del slots
            if first.size < len(ids):
                later = np.ones(len(ids), dtype=bool)
                later[first] = False
                for i in np.flatnonzero(later).tolist():
                    _put(self._slots, self._mask, int(codes[i]), self.size + i)
        else:
            codes = np.fromiter(map(_code, ids), dtype=np.int64, count=len(ids))
            while 2 * (self.size + len(ids)) > self._mask:
                self._grow()
            self._place(codes)
        self._codes.frombytes(codes.tobytes())
        self.size += len(ids)
        at = 0
        while at < len(ids):
            take = _BLOCK - len(self._open)
            self._open.extend(ids[at : at + take])
            at += take
            if len(self._open) == _BLOCK:
                self._close_block()

    def _place(self, codes: npt.NDArray[np.int64]) -> None:
        """New items (their codes ``codes``, the next indices) each into the first free slot
        from its home: a probe step for all at once (the first of the ids that reach a free
        slot there takes it), the few left one by one."""
        import numpy as np

        slots = np.frombuffer(self._slots, dtype=np.int32)
        place = codes & self._mask
        pending = np.arange(codes.size)
        for _ in range(_VECTOR_PROBES):
            free = np.flatnonzero(slots[place[pending]] == _EMPTY)
            _, first = np.unique(place[pending[free]], return_index=True)
            won = free[first]
            slots[place[pending[won]]] = pending[won] + self.size
            left = np.ones(pending.size, dtype=bool)
            left[won] = False
            pending = pending[left]
            place[pending] = (place[pending] + 1) & self._mask
        del slots
        for i, code in zip(pending.tolist(), codes[pending].tolist(), strict=True):
            _put(self._slots, self._mask, code, self.size + i)

    def _close_block(self) -> None:
        ends = array("I", accumulate(map(len, self._open)))
        self._blocks.append(("".join(self._open), ends))
        self._open = []

    def _grow(self) -> None:
        size = 2 * (self._mask + 1)
        if self.size >= _VECTOR_GROW:
            self._slots = _placed(self._codes, size)
            self._mask = size - 1
            return
        mask = size - 1
        slots = array("i", [_EMPTY]) * size
        for index, code in enumerate(self._codes):
            _put(slots, mask, code, index)
        self._slots, self._mask = slots, mask

    def codes(self) -> npt.NDArray[np.int64]:
        """Each item's ``hash()`` of its id, by index (equal ids have equal codes: the join of
        two runs' items, :func:`evalgate.compare.join.pair_items`, matches codes first)."""
        import numpy as np

        # A copy: a view would pin the array's buffer (it could then no longer grow).
        return np.frombuffer(self._codes, dtype=np.int64).copy()


def _put(slots: array[int], mask: int, code: int, index: int) -> None:
    """Item ``index`` (its id's code ``code``) into the first free slot from its home."""
    slot = code & mask
    while slots[slot] != _EMPTY:
        slot = (slot + 1) & mask
    slots[slot] = index


def _placed(codes: array[int], size: int) -> array[int]:
    """The slots of a table of ``size`` holding every item (their ids' codes ``codes``, by
    index), placed with numpy (a million items: a Python loop took ~0.5 s a doubling). Taken
    in order of their home slot, linear probing puts each at max(home, the previous one's slot
    + 1): a running maximum. The few pushed past the last slot wrap round to the start, one by
    one. The slots are written in place through a numpy view, and each temporary is let go
    once used."""
    import numpy as np

    mask = size - 1
    home = np.frombuffer(codes, dtype=np.int64) & mask
    index = np.argsort(home, kind="stable").astype(np.int32)
    place = home[index]  # each item's home slot, in order of home
    del home
    step = np.arange(place.size)
    place -= step
    np.maximum.accumulate(place, out=place)
    place += step
    del step
    inside = place < size
    out = array("i", [_EMPTY]) * size
    np.frombuffer(out, dtype=np.int32)[place[inside]] = index[inside]
    for i in index[~inside].tolist():
        _put(out, mask, codes[i], i)
    return out


class ItemValues(Mapping[str, float]):
    """item id → a metric's per-item value, as columns: the items' indices in ``ids`` (in the
    mapping's order) and their values (numpy), not a dict of a str and a float per item (a
    million items: 16 MB, not ~140). Reads like the dict the records' pass builds, and equals it.
    """

    def __init__(
        self, ids: ItemIds, index: npt.NDArray[np.intp], values: npt.NDArray[np.float64]
    ) -> None:
        self.ids, self.index, self.array = ids, index, values
        self._at: npt.NDArray[np.intp] | None = None  # item index → place here, −1: none

    def __len__(self) -> int:
        return len(self.index)

    def __iter__(self) -> Iterator[str]:
        step = 1 << 16  # a block of indices at a time: no list of a million ints
        for start in range(0, len(self.index), step):
            for i in self.index[start : start + step].tolist():
                yield self.ids[i]

    def _place(self, key: object) -> int:
        found = self.ids.find(key) if isinstance(key, str) else -1
        if found < 0 or (self._at is not None and found >= len(self._at)):
            return -1  # absent, or an item added to the table after these values
        if self._at is None:
            import numpy as np

            at = np.full(len(self.ids), -1, dtype=np.intp)
            at[self.index] = np.arange(len(self.index))
            self._at = at
        return int(self._at[found])

    def __getitem__(self, key: str) -> float:
        place = self._place(key)
        if place < 0:
            raise KeyError(key)
        return float(self.array[place])

    def __contains__(self, key: object) -> bool:
        return self._place(key) >= 0

    def values(self) -> ValuesView[float]:
        return _Values(self)

    def dense(self) -> npt.NDArray[np.float64]:
        """The values by item index (every item of ``ids``), NaN where an item has none."""
        import numpy as np

        out = np.full(len(self.ids), np.nan)
        out[self.index] = self.array
        return out


class _Values(ValuesView[float]):
    """The values in the mapping's order, read from its array (no lookup per id)."""

    _mapping: ItemValues

    def __iter__(self) -> Iterator[float]:
        values, step = self._mapping.array, 1 << 16  # a block at a time: no list of a million
        for start in range(0, len(values), step):
            yield from values[start : start + step].tolist()
