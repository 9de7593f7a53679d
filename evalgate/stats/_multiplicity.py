"""Multiplicity correction across the gate's many (benchmark, metric) tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from evalgate.stats._common import _check_alpha


def holm(pvalues: Sequence[float] | ArrayLike, alpha: float = 0.05) -> list[bool]:
    """Holm (1979) step-down rejections, in input order.

    Sort p ascending; reject p_(i) while p_(i) ≤ alpha / (m − i + 1); stop at the first failure.
    Controls the family-wise error rate under any dependence between the tests.
    """
    _check_alpha(alpha)
    p = np.asarray(pvalues, dtype=float).reshape(-1)
    if np.any(np.isnan(p)) or np.any((p < 0.0) | (p > 1.0)):
        raise ValueError("p-values must lie in [0, 1]")
    m = p.size
    reject = [False] * m
    for rank, idx in enumerate(np.argsort(p, kind="stable")):
        if p[idx] > alpha / (m - rank):
            break
        reject[int(idx)] = True
    return reject
