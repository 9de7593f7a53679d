"""The one order in which a run's paired items enter the graded tests, and the key that fixes it.

The betting bound (:mod:`._betting`) is a capital process over the items in some order, and
Ville's inequality makes it valid at α over the whole process: checked after every item, or after
every look of a sequential run, it crosses 1/α with probability ≤ α. That holds for ONE process
whose order does not depend on the scores. So the order is a keyed hash of the item id: computable
from the id and the run's key alone, the same for the looks (which run the items in it, so the
items a look has seen are a prefix of the process) and for ``evalgate compare`` (which reads them
back in it), and unchanged when some items drop out (errors, a subset): dropping items never
reorders the rest.

Independent of the scores is not enough when the candidate can see the order: a PR that knows
it keeps the base's answers on the items read first and breaks the last ones, and the capital
reaches 1/α before the breaks arrive (issue 35: PASS at Δ̂ = −15 pp). So the key is an
:class:`OrderKey` the gate draws itself (:meth:`OrderKey.draw`, 32 random bytes), never a field
the candidate sets nor anything computable from the library and the base run: a fixed run's
after every output is recorded, a sequential run's when it starts (the exam's side). It is
recorded in the run (``metadata.json``'s ``order_key``) so that every reading is the same. Runs
written before keys existed are read in their public order, sha256(f"{seed}:{id}")
(:meth:`OrderKey.legacy`), as they always were, and the comparison says so.

Grouped items (a ``group`` column) are run and read as whole groups: the groups in the order of
a keyed hash of the group id, the items inside a group by their own key. The group-level betting
process (:func:`._betting.betting_lower_groups`) then sees a prefix of groups at every look, each
one complete, in an order fixed before any score. An item without a group is a group of its own
whose key is the item's: with no groups at all the order is the plain item order.
"""

from __future__ import annotations

import functools
import hashlib
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["OrderKey", "item_order", "item_rank", "order_key"]

_KEY_BYTES = 32
_RECORDED = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class OrderKey:
    """What fixes the order of a run's items: a secret the gate drew, or (``secret`` None) the
    public seed of a run recorded before keys existed."""

    secret: bytes | None = None
    seed: int = 0  # the legacy public order's seed; unused with a secret

    def __post_init__(self) -> None:
        if self.secret is not None and len(self.secret) != _KEY_BYTES:
            raise ValueError(f"an order key is {_KEY_BYTES} bytes, got {len(self.secret)}")

    @classmethod
    def draw(cls) -> OrderKey:
        """A fresh key from the operating system's random source: nobody knows it before now."""
        return cls(secrets.token_bytes(_KEY_BYTES))

    @classmethod
    def legacy(cls, seed: int = 0) -> OrderKey:
        """The public order of runs written before keys: sha256(f"{seed}:{id}")."""
        return cls(None, int(seed))

    @classmethod
    def parse(cls, text: object) -> OrderKey:
        """A key as :meth:`record` wrote it (64 lowercase hex digits); ValueError otherwise."""
        if not isinstance(text, str) or not _RECORDED.fullmatch(text):
            raise ValueError(f"an order key is {2 * _KEY_BYTES} lowercase hex digits")
        return cls(bytes.fromhex(text))

    @property
    def public(self) -> bool:
        """True for the legacy order, which anyone holding the library can compute."""
        return self.secret is None

    def record(self) -> str:
        """The key as a run records it (hex); a legacy order has none to record."""
        if self.secret is None:
            raise ValueError("the legacy public order has no key to record")
        return self.secret.hex()

    def item(self, item_id: str) -> bytes:
        """The sort key of ``item_id``."""
        if self.secret is None:
            return order_key(item_id, self.seed)
        return _mac(self.secret, b"evalgate item", item_id)

    def group(self, group: str) -> bytes:
        """The sort key of the group ``group`` (never an item's: another personalisation of
        the hash)."""
        if self.secret is None:
            # A NUL cannot occur in an item id read from JSON lines as text, so no group's key
            # is an item's key (an ungrouped item's group key is its own item key).
            return order_key(f"\x00group:{group}", self.seed)
        return _mac(self.secret, b"evalgate group", group)


def _plain_order(ids: list[str], order: OrderKey) -> list[str]:
    """``sorted(ids, key=lambda i: (order.item(i), i))``, through :func:`item_rank`."""
    return [ids[i] for i in item_rank(ids, order).tolist()]


def item_rank(ids: Sequence[str], key: OrderKey | int) -> npt.NDArray[np.intp]:
    """The permutation that sorts ``ids`` as :func:`item_order` does without groups (by
    keyed hash, ties by id), without a key object per id: the first 8 bytes of each key in
    one buffer, sorted by numpy (a million items: 8 MB, not a tuple, a bytes and a list slot
    each). Two equal 8-byte prefixes (once in ~10^7 pairs of a million items) send the whole
    sort to the 32-byte keys and the ids, so the order is always the full keys'."""
    import numpy as np

    order = key if isinstance(key, OrderKey) else OrderKey.legacy(key)
    buffer = bytearray()
    add = buffer.extend
    if order.secret is None:  # order.item's sha256, its method calls taken out of the loop
        sha256, seed = hashlib.sha256, f"{order.seed}:"
        for item_id in ids:
            add(sha256((seed + item_id).encode()).digest()[:8])
    else:
        keyed = _keyed(order.secret, b"evalgate item")
        for item_id in ids:
            state = keyed.copy()
            state.update(item_id.encode())
            add(state.digest()[:8])
    prefix = np.frombuffer(bytes(buffer), dtype=">u8")  # big-endian: compares as the bytes do
    del buffer
    ranked = np.argsort(prefix, kind="stable")
    in_order = prefix[ranked]
    if bool(np.any(in_order[1:] == in_order[:-1])):
        return np.array(
            sorted(range(len(ids)), key=lambda j: (order.item(ids[j]), ids[j])), dtype=np.intp
        )
    return ranked


@functools.lru_cache(maxsize=8)
def _keyed(secret: bytes, person: bytes) -> hashlib.blake2b:
    """A BLAKE2b MAC state under ``secret`` (its ``person`` separates items from groups), to copy
    per message: keyed BLAKE2b is a MAC in one pass (HMAC-SHA256 cost 4 × as much per item)."""
    return hashlib.blake2b(key=secret, digest_size=32, person=person)


def _mac(secret: bytes, person: bytes, text: str) -> bytes:
    state = _keyed(secret, person).copy()
    state.update(text.encode())
    return state.digest()


def order_key(item_id: str, seed: int) -> bytes:
    """The sort key of ``item_id`` in the legacy public order of ``seed``:
    sha256(f"{seed}:{item_id}")."""
    return hashlib.sha256(f"{seed}:{item_id}".encode()).digest()


def item_order(
    ids: Iterable[str], key: OrderKey | int, groups: Mapping[str, str | None] | None = None
) -> list[str]:
    """``ids`` sorted by their keyed hash (ties, which need a hash collision, by id); an int
    ``key`` is a legacy public seed (:meth:`OrderKey.legacy`).

    ``groups`` (item id → group id or None): whole groups contiguous, the groups sorted by a
    keyed hash of the group id and the items inside each by their own key (the module
    docstring); without any group the order is the plain one.
    """
    order = key if isinstance(key, OrderKey) else OrderKey.legacy(key)
    if not groups:
        return _plain_order(list(ids), order)

    def sort_key(i: str) -> tuple[bytes, str, bytes, str]:
        group = groups.get(i)
        own = order.item(i)
        if group is None:
            return own, "", own, i
        return order.group(str(group)), str(group), own, i

    return sorted(ids, key=sort_key)
