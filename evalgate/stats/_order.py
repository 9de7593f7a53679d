"""The one order in which a run's paired items enter the graded tests.

The betting bound (:mod:`._betting`) is a capital process over the items in some order, and
Ville's inequality makes it valid at α over the whole process: checked after every item, or after
every look of a sequential run, it crosses 1/α with probability ≤ α. That holds for ONE process
whose order is fixed before any score is seen. So the order is a keyed hash of the item id,
sha256(f"{seed}:{id}") with the run's recorded seed: computable from the id alone, independent of
every score, the same for the looks (which run the items in it, so the items a look has seen
are a prefix of the process) and for ``evalgate compare`` (which reads them back in it), and
unchanged when some items drop out (errors, a subset): dropping items never reorders the rest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = ["item_order", "order_key"]


def order_key(item_id: str, seed: int) -> bytes:
    """The sort key of ``item_id`` in the order of ``seed``: sha256(f"{seed}:{item_id}")."""
    return hashlib.sha256(f"{seed}:{item_id}".encode()).digest()


def item_order(ids: Iterable[str], seed: int) -> list[str]:
    """``ids`` sorted by :func:`order_key` (ties, which need a sha256 collision, by id)."""
    return sorted(ids, key=lambda i: (order_key(i, seed), i))
