"""Missing outcomes never help a PASS: the PR's errored rollouts at the worst score.

A rollout that errored has no score, and the paired tests read only the items with scores on
both sides. Dropped, an error is a free pass: a PR model that returns HTTP 500 (or an empty or
too-large reply, a timeout, a NaN reward) on exactly the items it would get wrong, within
``eval.max_error_rate``, showed Δ = 0 on the rest and PASSed, where answering them wrongly
FAILs (issue 35). So the two sides of the gate read the PR's errors differently:

* PASS (non-inferiority: ``lo``, ``p_noninferiority``) is decided with every errored PR rollout
  scored the worst value of the metric's scale (0 for 0/1 and fractional scores, the scale's
  minimum for graded ones), and with the items whose every PR rollout errored paired at that
  value. An error can then only lower the PR's scores, never raise its chance to PASS;
* FAIL (regression: ``hi``, ``p_regression``) reads the scores the PR has, as before: an
  infrastructure error is no evidence of a regression, and imputing it would make the gate fail
  PRs on a flaky endpoint.

Every error kind is imputed, whatever it says it is. The kind is the text before the first
colon of the error message (:func:`evalgate.run.summary._error_kind`), and that text is often
the provider's own words (an HTTP error body, a verifier's exception): a candidate that controls
the endpoint can write any kind it likes, so no kind can be trusted to mean "not the PR's
doing". The errors the candidate truly cannot cause (a sandbox that refused to start, a judge
endpoint that went down) cost an honest PR some power, and ``docs/gate.md`` measures how much.
An endpoint that stops answering ends the run as an infrastructure ERROR before any of this.

The base run's errors are not imputed: the base is fixed before the PR, which cannot steer
them, and its errored items stay out of the pairs on both sides.

Both the sequential looks (:mod:`evalgate.run.sequential`) and ``evalgate compare``
(:func:`evalgate.compare.paired.compare_runs`) read a run through this module, so they decide
alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalgate import stats
from evalgate.run.scored import unusable
from evalgate.run.summary import SUCCESS  # a rollout at full marks, for pass@k

if TYPE_CHECKING:
    import numpy as np

    from evalgate.stats import PairedResult, Scale

__all__ = ["PassSide", "WorstCase", "pass_side", "worst_case_result", "worst_case_values"]


@dataclass(frozen=True)
class WorstCase:
    """A metric's PR per-item values for the PASS decision, errored rollouts at ``worst``.

    ``values``: item → the mean over its rollouts, each errored one scored ``worst`` (an item
    whose every rollout errored is ``worst``); ``errored``: item → its errored rollouts.
    """

    values: dict[str, float]
    errored: dict[str, int]
    worst: float

    def imputed(self, items: Iterable[str]) -> int:
        """How many errored PR rollouts of ``items`` were scored ``worst``."""
        return sum(self.errored.get(i, 0) for i in items)


def _derived(metric: str) -> tuple[str, int] | None:
    """("pass@" or "pass^", k) for a derived metric, else None."""
    for prefix in ("pass@", "pass^"):
        if metric.startswith(prefix) and metric[len(prefix) :].isdigit():
            return prefix, int(metric[len(prefix) :])
    return None


def worst_case_values(records: Iterable[dict[str, Any]], metric: str, worst: float) -> WorstCase:
    """The PR's per-item values of ``metric`` with each errored rollout scored ``worst``.

    A rollout is errored when it recorded an error or its scores are unusable (NaN, ±inf,
    non-numeric: :func:`evalgate.run.scored.unusable`), as :func:`evalgate.run.summary.
    item_metrics` counts it. A scored rollout that lacks ``metric`` is left out, as there.
    pass@k / pass^k count an errored rollout as a failure (its reward is the worst).
    """
    derived = _derived(metric)
    sums: dict[str, list[float]] = {}  # item → [sum of values, rollouts counted, successes]
    errored: dict[str, int] = {}
    for rec in records:
        item = rec["example_id"]
        acc = sums.get(item)
        if acc is None:
            acc = sums[item] = [0.0, 0.0, 0.0]
        if rec["error"] is not None or unusable(rec) is not None:
            errored[item] = errored.get(item, 0) + 1
            acc[0] += worst
            acc[1] += 1.0
            continue
        if derived is not None:
            acc[1] += 1.0
            acc[2] += rec["reward"] >= SUCCESS
            continue
        value = rec["metrics"].get(metric)
        if value is not None:
            acc[0] += float(value)
            acc[1] += 1.0
    values: dict[str, float] = {}
    for item, (total, count, successes) in sums.items():
        if derived is not None:
            prefix, k = derived
            if count >= k:
                rate = stats.pass_at_k if prefix == "pass@" else stats.pass_hat_k
                values[item] = rate(int(count), int(successes), k)
        elif count > 0:
            values[item] = total / count
    return WorstCase(values, errored, float(worst))


@dataclass(frozen=True)
class PassSide:
    """The paired data the PASS decision reads: ``ids`` in the order given, their base values
    and the PR's worst-case values (:class:`WorstCase`), on ``scale``."""

    ids: list[str]
    base: np.ndarray
    head: np.ndarray
    scale: Scale
    imputed: int  # errored PR rollouts of these items, scored ``worst``
    worst: float


def pass_side(
    records: Iterable[dict[str, Any]],
    metric: str,
    base: Mapping[str, float],
    candidates: Sequence[str],
    observed: np.ndarray,
    declared: str | Sequence[float] | None,
) -> PassSide:
    """The PASS side's data: ``candidates`` (items with a base value and PR rollouts, in the
    run's order) with the PR's errored rollouts at the worst value of the metric's scale.

    The scale is :func:`evalgate.stats.metric_scale` of the ``observed`` values (both runs'
    paired values) and the candidates' base values, so the worst value is inside it and the
    bounds' range holds every value tested. ``records``: the PR's rollouts (read twice).
    """
    import numpy as np

    wide = stats.metric_scale(
        np.concatenate([observed, np.array([base[i] for i in candidates], dtype=float)]),
        declared,
    )
    worst = worst_case_values(records, metric, wide.low)
    ids = [i for i in candidates if i in worst.values]
    return PassSide(
        ids,
        np.array([base[i] for i in ids], dtype=float),
        np.array([worst.values[i] for i in ids], dtype=float),
        wide,
        worst.imputed(ids),
        worst.worst,
    )


def worst_case_result(observed: PairedResult, passing: PairedResult) -> PairedResult:
    """``observed`` (the test on the scores the PR has) with its PASS side taken from
    ``passing`` (the same test with every errored PR rollout at the worst score).

    The lower bound and ``p_noninferiority`` are the worst-case data's: an error can only make
    PASS harder. Everything else, the FAIL side included, is the observed data's.
    """
    # Coherent with the estimate shown (the observed one): L ≤ Δ̂ (stats._coherent); lowering L
    # only removes PASSes.
    lo = min(passing.lo, observed.delta)
    return dataclasses.replace(observed, lo=lo, p_noninferiority=passing.p_noninferiority)
