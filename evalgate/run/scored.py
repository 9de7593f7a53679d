"""Whether a scored rollout's values can enter the statistics (:func:`unusable`): the one rule
the summary, the comparison, the sequential looks and the engine share."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["finite_floats", "unusable"]


def unusable(rec: dict[str, Any]) -> str | None:
    """Why a scored rollout's values cannot enter the statistics, as an error message whose
    kind (before the colon) is "non-finite score" or "non-numeric score"; None when they can.

    A NaN or infinite reward (a verifier that divided by zero, a judge that returned "inf") has
    no mean and no bound: the rollout is counted as errored, against ``eval.max_error_rate``,
    like any other rollout that produced no score, instead of stopping the gate.
    """
    if finite_floats(rec):  # the common record, answered without building the list below
        return None
    values = [("reward", rec.get("reward")), *(rec.get("metrics") or {}).items()]
    for name, value in values:
        if value is None and name == "reward":
            continue  # no reward field: the metrics carry the scores
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"non-numeric score: {name} = {value!r:.40}"
        if not math.isfinite(value):
            return f"non-finite score: {name} = {value!r}"
    return None


def finite_floats(rec: dict[str, Any]) -> bool:
    """The common case of :func:`unusable` answered fast: a float reward (or none) and float
    metrics, all finite (``x - x`` is 0 exactly when ``x`` is finite). False sends the record
    to :func:`unusable`, which decides."""
    reward = rec.get("reward")
    if reward is not None and (type(reward) is not float or reward - reward != 0.0):
        return False
    for value in (rec.get("metrics") or {}).values():
        if type(value) is not float or value - value != 0.0:
            return False
    return True
