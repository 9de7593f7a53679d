"""What scale a metric's per-item values live on, and what the gate assumes about it.

The tests need bounded values: the exact test and the sign-flip take 0/1 or any values, but the
betting bounds (PASS for fractional scores, and over groups) are valid only for values inside
a known range. Rewards are usually proportions in [0, 1]; verifiers rewards can
be any real, and some metrics are counts (``n_claims``). A metric's scale is declared in the
gate policy (``gate.scales``) or inferred from the values of both runs:

* ``proportion``: every value in [0, 1]; shown in % and Δ in percentage points;
* ``bounded``: a declared range [low, high]; shown in its own units;
* ``count``: non-negative integers, unbounded above; the gate assumes the largest value seen;
* ``real``: anything else; the gate assumes the range seen in both runs.

An assumed range is stated on the scorecard: if the PR could score outside it, PASS's bound
does not hold, and declaring the range is the fix.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Scale", "metric_scale"]

KINDS = ("proportion", "bounded", "count", "real")


@dataclass(frozen=True)
class Scale:
    kind: str  # one of KINDS
    low: float
    high: float
    assumption: str = ""  # what the gate assumes about the range ("" when it is known)

    @property
    def proportion(self) -> bool:
        return self.kind == "proportion"


def _fmt(value: float) -> str:
    return f"{value:g}"


def metric_scale(values: Iterable[float], declared: str | Sequence[float] | None = None) -> Scale:
    """The scale of a metric with these (finite) per-item values, from both runs.

    ``declared``: "proportion", "count", or [low, high] (from ``gate.scales``); None infers it.
    A declared range that the values leave is widened to hold them, and the assumption says so.
    """
    if hasattr(values, "__array__"):  # numpy is loaded already (a comparison): use it
        import numpy as np

        arr = np.asarray(values, dtype=float)
        lo = float(arr.min()) if arr.size else 0.0
        hi = float(arr.max()) if arr.size else 1.0
        integral = bool(np.all((arr >= 0.0) & (arr == np.floor(arr))))
    else:  # plain floats: a run's own summary loads no numpy (tests/test_startup.py)
        lo, hi, integral = _plain_range(values)
    if declared is None:
        if lo >= 0.0 and hi <= 1.0:
            declared = "proportion"
        elif integral:
            declared = "count"
    if declared == "proportion":
        return _bounded("proportion", 0.0, 1.0, lo, hi)
    if declared == "count":
        top = max(hi, 1.0)
        return Scale(
            "count",
            0.0,
            top,
            f"count scale: the gate assumes no item scores above {_fmt(top)} (the most seen)",
        )
    if declared is not None and not isinstance(declared, str):
        low, high = (float(x) for x in declared)
        return _bounded("bounded", low, high, lo, hi)
    return Scale(
        "real",
        lo,
        hi,
        f"unbounded scale: the gate assumes every value lies in [{_fmt(lo)}, {_fmt(hi)}], the "
        "range seen in both runs (declare gate.scales to set it)",
    )


def _plain_range(values: Iterable[float]) -> tuple[float, float, bool]:
    """(min, max, whether every value is a whole number ≥ 0) in one pass, as ``min`` and
    ``max`` of a list would give them (the first of equal values; 0 and 1 when there are none),
    without the list: a million items' values stream by (report._run_scale)."""
    lo = hi = math.nan
    integral, seen = True, False
    for value in values:
        v = float(value)
        if not seen:
            lo = hi = v
            seen = True
        else:
            if v < lo:
                lo = v
            if v > hi:
                hi = v
        if integral and not (v >= 0.0 and v == math.floor(v)):
            integral = False
    return (lo, hi, integral) if seen else (0.0, 1.0, True)


def _bounded(kind: str, low: float, high: float, lo: float, hi: float) -> Scale:
    if low <= lo and hi <= high:
        return Scale(kind, low, high)
    wide_low, wide_high = min(low, lo), max(high, hi)
    return Scale(
        kind,
        wide_low,
        wide_high,
        f"values outside the declared range [{_fmt(low)}, {_fmt(high)}]: the gate assumes "
        f"[{_fmt(wide_low)}, {_fmt(wide_high)}]",
    )
