"""The numpy-free part of :mod:`evalgate.stats`: what every run summary needs.

Every run summarises its per-item scores (:func:`evalgate.stats.mean_ci`), but only a run that
compares or tests needs arrays. Importing numpy costs about a tenth of a second and scipy a third,
so the summary path uses plain floats (``math.fsum``: exactly rounded sums) and imports scipy only
for a t quantile (graded scores, n ≥ 2). The array versions in ``_common`` compute the same
quantities for the paired machinery.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from types import ModuleType
from typing import Any


def _special() -> ModuleType:
    """scipy.special alone (~0.25 s to import, against ~0.85 s for scipy.stats): enough for the
    t quantile of a graded metric's interval."""
    from scipy import special

    return special


def _scipy_stats() -> ModuleType:
    """scipy.stats, imported on first use rather than with this module.

    Importing scipy.stats takes most of a second (it pulls in scipy.linalg, scipy.optimize and
    the distribution zoo), which would dominate the CLI's start-up for commands that never
    compute a statistic (``validate``, ``schema``). After the first call this is a dictionary
    lookup in sys.modules.
    """
    from scipy import stats

    return stats


def _check_alpha(alpha: float, name: str = "alpha") -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {alpha!r}")


def floats(values: Any, name: str) -> list[float]:  # anything: it says what is wrong
    """``values`` as finite floats, one-dimensional; the same errors as the array version."""
    shape = getattr(values, "shape", None)
    if shape is not None and len(shape) != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {tuple(shape)}")
    try:
        out = [float(v) for v in values]
    except TypeError:  # nested sequences: let the array version word the error
        from evalgate.stats._common import _as_scores

        _as_scores(values, name)
        raise
    if not all(math.isfinite(v) for v in out):
        raise ValueError(f"{name} contains NaN or infinite values")
    return out


def is_binary(values: Iterable[float]) -> bool:
    return all(v == 0.0 or v == 1.0 for v in values)


def cluster_codes(clusters: Iterable[Hashable], n: int) -> tuple[list[int], int]:
    """Map arbitrary hashable group ids to 0..C−1 in order of first appearance."""
    labels = list(clusters)
    if len(labels) != n:
        raise ValueError(f"clusters has {len(labels)} entries for {n} items")
    index: dict[Hashable, int] = {}
    return [index.setdefault(c, len(index)) for c in labels], len(index)


def mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def plain_se(values: list[float]) -> float:
    n = len(values)
    if n < 2:
        return math.nan
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (n - 1)) / math.sqrt(n)


def clustered_se(values: list[float], codes: list[int], n_clusters: int) -> float:
    # Miller 2024 eq. (4): SE_C = sqrt(Σ_c (Σ_{i∈c} (s_i − s̄))²) / n, times the small-sample
    # factor sqrt(C / (C − 1)) that inspect_ai applies (the CR1-style correction).
    if n_clusters < 2:
        return math.nan
    m = mean(values)
    residuals: list[list[float]] = [[] for _ in range(n_clusters)]
    for v, c in zip(values, codes, strict=True):
        residuals[c].append(v - m)
    total = math.fsum(math.fsum(r) ** 2 for r in residuals)
    return math.sqrt(total) / len(values) * math.sqrt(n_clusters / (n_clusters - 1))
