"""Means with standard errors and confidence intervals (plain, clustered or Wilson)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING

from evalgate.stats import _pure

if TYPE_CHECKING:  # numpy loads only for item_scores: a run's summary needs none (start-up time)
    import numpy as np
    from numpy.typing import ArrayLike


@dataclass(frozen=True)
class Estimate:
    """A mean with its standard error and a two-sided (1 − α) confidence interval."""

    mean: float
    se: float
    lo: float
    hi: float
    n: int
    method: str = "t"  # "t", "cluster-t" or "wilson"
    n_clusters: int | None = None


def item_scores(rewards: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """Per-item mean reward over its rollouts; items may have different numbers of rollouts."""
    import numpy as np

    from evalgate.stats._common import _as_scores

    if isinstance(rewards, np.ndarray) and rewards.ndim == 2:
        if rewards.shape[1] == 0:
            raise ValueError("every item needs at least one rollout")
        return _as_scores(rewards.mean(axis=1), "rewards")
    out = np.empty(len(rewards))
    for i, item in enumerate(rewards):
        arr = _as_scores(np.asarray(item, dtype=float).reshape(-1), f"rewards[{i}]")
        if arr.size == 0:
            raise ValueError(f"item {i} has no rollouts")
        out[i] = arr.mean()
    return out


def _wilson(mean: float, n: int, alpha: float) -> tuple[float, float]:
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    denom = 1.0 + z * z / n
    centre = (mean + z * z / (2.0 * n)) / denom
    half = z / denom * math.sqrt(mean * (1.0 - mean) / n + z * z / (4.0 * n * n))
    # All right (or all wrong): the Wilson bound is exactly 1 (0); avoid 0.9999999999999999.
    return (0.0 if mean == 0.0 else centre - half), (1.0 if mean == 1.0 else centre + half)


def mean_ci(
    scores: ArrayLike | Sequence[float],
    *,
    clusters: Sequence[Hashable] | np.ndarray | None = None,
    alpha: float = 0.05,
) -> Estimate:
    """Mean with SE and a two-sided (1 − alpha) CI.

    * clusters given: clustered SE (Miller 2024) and a t interval with C − 1 df;
    * binary scores, no clusters: Wilson score interval (Wilson 1927), because the Wald interval
      collapses to zero width at 0 % / 100 % and undercovers for small n (Brown, Cai & DasGupta
      2001); ``se`` is still the plain sample SE, for display;
    * otherwise: sample SE and a t interval with n − 1 df.

    The interval is clipped to [0, 1] only when every score lies in [0, 1]. n = 0 gives NaN
    everywhere; n = 1 gives the mean with NaN se / lo / hi.
    """
    _pure._check_alpha(alpha)
    if clusters is None and getattr(scores, "dtype", None) is not None:
        return _array_mean_ci(scores, alpha)  # type: ignore[arg-type]  # a numpy array
    s = _pure.floats(scores, "scores")
    n = len(s)
    codes, n_clusters = _pure.cluster_codes(clusters, n) if clusters is not None else (None, None)
    binary = n > 0 and _pure.is_binary(s)
    method = "cluster-t" if codes is not None else ("wilson" if binary else "t")
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0, method, n_clusters)
    mean = _pure.mean(s)
    if n == 1:
        return Estimate(mean, math.nan, math.nan, math.nan, 1, method, n_clusters)
    if codes is not None and n_clusters is not None:
        se, df = _pure.clustered_se(s, codes, n_clusters), n_clusters - 1
    else:
        se, df = _pure.plain_se(s), n - 1
    unit = all(0.0 <= v <= 1.0 for v in s)
    return _interval(mean, se, df, n, method, n_clusters, unit, alpha)


# Scores summed a block at a time from an array (math.fsum is exact: any split gives its sum).
_BLOCK = 1 << 16


def _array_mean_ci(scores: np.ndarray, alpha: float) -> Estimate:
    """:func:`mean_ci` of an array of scores without clusters, to the same bits as of its list
    (exact sums, the same squares) without a list of a float object per score (a million
    items' summary: ~40 MB)."""
    import numpy as np

    from evalgate.stats._common import _as_scores

    arr = _as_scores(scores, "scores")
    n = int(arr.size)
    binary = n > 0 and bool(np.all((arr == 0.0) | (arr == 1.0)))
    method = "wilson" if binary else "t"
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0, method, None)
    blocks = range(0, n, _BLOCK)
    mean = math.fsum(v for at in blocks for v in arr[at : at + _BLOCK].tolist()) / n
    if n == 1:
        return Estimate(mean, math.nan, math.nan, math.nan, 1, method, None)
    # Python's square (pow), as the list's: numpy's x * x differs from it in the last bit.
    squares = ((v - mean) ** 2 for at in blocks for v in arr[at : at + _BLOCK].tolist())
    se = math.sqrt(math.fsum(squares) / (n - 1)) / math.sqrt(n)
    unit = bool(np.all((arr >= 0.0) & (arr <= 1.0)))
    return _interval(mean, se, n - 1, n, method, None, unit, alpha)


def _interval(
    mean: float,
    se: float,
    df: int,
    n: int,
    method: str,
    n_clusters: int | None,
    unit: bool,
    alpha: float,
) -> Estimate:
    """The estimate's interval (``unit``: every score lies in [0, 1])."""
    if method == "wilson":
        lo, hi = _wilson(mean, n, alpha)
    elif df >= 1 and math.isfinite(se):
        t = float(_pure._special().stdtrit(df, 1.0 - alpha / 2.0))
        lo, hi = mean - t * se, mean + t * se
    else:
        lo = hi = math.nan
    if unit and math.isfinite(lo):
        lo, hi = max(lo, 0.0), min(hi, 1.0)
    return Estimate(mean, se, lo, hi, n, method, n_clusters)
