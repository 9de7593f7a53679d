"""Shared input validation and standard errors of :mod:`evalgate.stats`, on numpy arrays (the
numpy-free versions and the lazy scipy imports are in ``_pure``)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

# Re-exported: the rest of the package imports them from here.
from evalgate.stats._pure import _check_alpha as _check_alpha
from evalgate.stats._pure import _scipy_stats as _scipy_stats
from evalgate.stats._pure import _special as _special


def _as_scores(values: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _as_pair(base: ArrayLike, head: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    b = _as_scores(base, "base")
    h = _as_scores(head, "head")
    if b.size != h.size:
        raise ValueError(
            f"base and head must score the same items: got {b.size} and {h.size} scores"
        )
    return b, h


def _is_binary(arr: np.ndarray) -> bool:
    return bool(np.all((arr == 0.0) | (arr == 1.0)))


def _cluster_codes(clusters: Sequence[Hashable] | ArrayLike, n: int) -> tuple[np.ndarray, int]:
    """Map arbitrary hashable group ids to 0..C−1 in order of first appearance."""
    # A 1-d array of labels iterates as hashable scalars, like a sequence of labels.
    labels = list(cast("Iterable[Hashable]", clusters))
    if len(labels) != n:
        raise ValueError(f"clusters has {len(labels)} entries for {n} items")
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(c, len(index)) for c in labels), np.intp, count=n)
    return codes, len(index)


def _plain_se(values: np.ndarray) -> float:
    n = values.size
    return float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan


def _clustered_se(values: np.ndarray, codes: np.ndarray, n_clusters: int) -> float:
    # Miller 2024 eq. (4): SE_C = sqrt(Σ_c (Σ_{i∈c} (s_i − s̄))²) / n, times the small-sample
    # factor sqrt(C / (C − 1)) that inspect_ai applies (the CR1-style correction).
    if n_clusters < 2:
        return math.nan
    sums = np.bincount(codes, weights=values - values.mean(), minlength=n_clusters)
    return float(
        math.sqrt(float(np.sum(sums**2))) / values.size * math.sqrt(n_clusters / (n_clusters - 1))
    )
