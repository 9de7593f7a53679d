"""Multiplicity correction across the gate's many (benchmark, metric) tests."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from evalgate.stats._pure import _check_alpha

if TYPE_CHECKING:  # numpy is not imported for this: a thresholded run needs none
    import numpy as np


def holm(pvalues: Sequence[float] | np.ndarray, alpha: float = 0.05) -> list[bool]:
    """Holm (1979) step-down rejections, in input order.

    Sort p ascending; reject p_(i) while p_(i) ≤ alpha / (m − i + 1); stop at the first failure.
    Controls the family-wise error rate under any dependence between the tests.
    """
    _check_alpha(alpha)
    # Plain floats: the gate calls this on every thresholded run, which needs no numpy.
    flat = pvalues.reshape(-1) if hasattr(pvalues, "reshape") else pvalues
    p = [float(v) for v in flat]
    if any(math.isnan(v) or not 0.0 <= v <= 1.0 for v in p):
        raise ValueError("p-values must lie in [0, 1]")
    m = len(p)
    reject = [False] * m
    for rank, idx in enumerate(sorted(range(m), key=p.__getitem__)):  # stable, as argsort's
        if p[idx] > alpha / (m - rank):
            break
        reject[idx] = True
    return reject
