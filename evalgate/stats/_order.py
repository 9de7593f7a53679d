"""The one order in which a run's paired items enter the graded tests.

The betting bound (:mod:`._betting`) is a capital process over the items in some order, and
Ville's inequality makes it valid at α over the whole process: checked after every item, or after
every look of a sequential run, it crosses 1/α with probability ≤ α. That holds for ONE process
whose order is fixed before any score is seen. So the order is a keyed hash of the item id,
sha256(f"{seed}:{id}") with the run's recorded seed: computable from the id alone, independent of
every score, the same for the looks (which run the items in it, so the items a look has seen
are a prefix of the process) and for ``evalgate compare`` (which reads them back in it), and
unchanged when some items drop out (errors, a subset): dropping items never reorders the rest.

Grouped items (a ``group`` column) are run and read as whole groups: the groups in the order of
a keyed hash of the group id, the items inside a group by their own key. The group-level betting
process (:func:`._betting.betting_lower_groups`) then sees a prefix of groups at every look, each
one complete, in an order fixed before any score. An item without a group is a group of its own
whose key is the item's: with no groups at all the order is the plain item order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

__all__ = ["item_order", "order_key"]


def order_key(item_id: str, seed: int) -> bytes:
    """The sort key of ``item_id`` in the order of ``seed``: sha256(f"{seed}:{item_id}")."""
    return hashlib.sha256(f"{seed}:{item_id}".encode()).digest()


def _group_key(group: str, seed: int) -> bytes:
    # A NUL cannot occur in an item id read from JSON lines as text, so no group's key is an
    # item's key (an ungrouped item's group key is its own item key).
    return order_key(f"\x00group:{group}", seed)


def item_order(
    ids: Iterable[str], seed: int, groups: Mapping[str, str | None] | None = None
) -> list[str]:
    """``ids`` sorted by :func:`order_key` (ties, which need a sha256 collision, by id).

    ``groups`` (item id → group id or None): whole groups contiguous, the groups sorted by a
    keyed hash of the group id and the items inside each by their own key (the module
    docstring); without any group the order is the plain one.
    """
    if not groups:
        return sorted(ids, key=lambda i: (order_key(i, seed), i))

    def key(i: str) -> tuple[bytes, str, bytes, str]:
        group = groups.get(i)
        own = order_key(i, seed)
        if group is None:
            return own, "", own, i
        return _group_key(str(group), seed), str(group), own, i

    return sorted(ids, key=key)
