"""Per-item means of a metric column, to the bits a pass over the records gave (fmean).

:meth:`evalgate.run.rollouts.RolloutTable.item_metrics` sums each item's values with numpy
(row order); where that could round otherwise than ``statistics.fmean`` (which rounds the exact
sum once), the exact sum per item is taken instead.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["dyadic", "fsum_means"]

# Per-item means are sums of 8-byte floats: numpy adds them in row order, fmean (what a pass over
# the records computes) rounds the exact sum once. The two agree when every value is a multiple
# of 2^-_DYADIC_BITS below 2^_DYADIC_ROOM (0/1 rewards, k-ths of a power of two...): the row-order
# sums are then exact. Other values take math.fsum per item, as the records' pass did.
_DYADIC_BITS = 24
_DYADIC_ROOM = 2**26


def dyadic(values: npt.NDArray[np.float64]) -> bool:
    """Whether every value is a multiple of 2^-_DYADIC_BITS below 2^_DYADIC_ROOM (row-order sums
    of them are then exact), checked a block at a time (no temporaries of the whole column)."""
    import numpy as np

    step = 1 << 16
    for at in range(0, values.size, step):
        block = values[at : at + step]
        scaled = block * 2.0**_DYADIC_BITS
        if not (np.all(scaled == np.floor(scaled)) and np.all(np.abs(block) < _DYADIC_ROOM)):
            return False
    return True


def fsum_means(
    per: npt.NDArray[np.intp],
    values: npt.NDArray[np.float64],
    n_items: int,
    count: npt.NDArray[np.intp],
) -> npt.NDArray[np.float64]:
    """Per-item math.fsum(values) / count, items given by ``per`` (numpy arrays)."""
    import numpy as np

    order = np.argsort(per, kind="stable")  # each item's values in row order, as fmean saw them
    grouped = np.split(values[order], np.cumsum(np.bincount(per, minlength=n_items))[:-1])
    sums = np.array([math.fsum(chunk.tolist()) for chunk in grouped])
    return sums / np.maximum(count, 1)
