"""A pairwise judge's position bias must not manufacture equality (issue #35).

A pairwise PR run scores each item by the judge's preference for the PR's completion over the
baseline's, shown in both orders; its ``win_rate`` is the average over the orders. Averaging
turns a pure position preference into a tie: a judge that always answers "A" scores every pair
½, Δ = 0 on every item, and a PR that answers nothing right would PASS.

The rule, per pair: for the PASS decision the pair counts as its **worse order** for the PR
(``judge.worse_order``, the smaller of the two orders' preferences; the same as the average when
the orders agree). For the FAIL decision the average stays. Why this keeps both errors ≤ α under
a judge that shows the first response's side with probability β and otherwise judges honestly
(verdict h): in the base-first order the judge's expected preference for the PR is (1 − β)·h ≤ h,
so E[worse order] ≤ E[base-first order] ≤ h, and the PASS test, valid for any distribution on
the scale whose mean is ≤ −δ, sees a mean no higher than the honest one; the average's
expectation is ½ + (1 − β)(h − ½), pulled towards a tie, never past it, so a FAIL it finds is the
honest sign. An honest (consistent) judge loses nothing: there the worse order is the average.

And a judge whose verdicts follow the order more than the content — fewer than
:data:`CONSISTENCY_FLOOR` of the pairs it judged keep their verdict when the order is swapped —
cannot PASS a comparison at all: it is INCONCLUSIVE, with that reason first. (Not FAIL: a
FAIL found on the average is still evidence, and is kept.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from statistics import fmean
from typing import TYPE_CHECKING

from evalgate.run.scored import unusable

if TYPE_CHECKING:
    import numpy as np

    from evalgate.compare.paired import MetricComparison

__all__ = ["CONSISTENCY_FLOOR", "PairwiseSide", "guard", "pairwise_side"]

# The least share of judged pairs whose two orders agree for a comparison to PASS. Half: below
# it, a verdict is more often the order's than the content's. (Strong judges measure 65-85 %
# on MT-Bench-style pairs; judges that mostly pick a position measure 20-45 %.)
CONSISTENCY_FLOOR = 0.5


@dataclasses.dataclass(frozen=True)
class PairwiseSide:
    """What a pairwise PR run's records say for the PASS decision: per item, the mean over its
    scored rollouts of each pair's worse order (None when a judged record lacks it: a run from
    an older evalgate), and the position-swap consistency over the pairs judged."""

    worse: dict[str, float] | None
    consistent: int
    pairs: int

    @property
    def consistency(self) -> float | None:
        return self.consistent / self.pairs if self.pairs else None


def pairwise_side(records: Iterable[dict[str, object]]) -> PairwiseSide:
    """Read ``records`` (a run's table or its journal) once. Pairs not judged (the PR's
    completion is the baseline's: a tie by construction, no call) count at their score, ½."""
    values: dict[str, list[float]] = {}
    consistent = pairs = 0
    complete = True
    for rec in records:
        judge = rec.get("judge")
        judge = judge if isinstance(judge, dict) else {}  # a mapping, when the rollout was judged
        if "consistent" in judge:  # counted like the run's own figure: every judged pair
            pairs += 1
            consistent += bool(judge["consistent"])
        if rec["error"] is not None or unusable(rec) is not None:
            continue
        if "consistent" in judge and "worse_order" not in judge:
            complete = False
        value = judge.get("worse_order", rec["reward"])
        values.setdefault(str(rec["example_id"]), []).append(float(value))  # ids are strings
    worse = {i: fmean(v) for i, v in values.items()} if complete else None
    return PairwiseSide(worse, consistent, pairs)


def guard(
    average: MetricComparison,
    ids: list[str],
    side: PairwiseSide,
    test: Callable[[np.ndarray], MetricComparison],
) -> MetricComparison:
    """``average``'s comparison (the metric's per-item averages over the orders, items
    ``ids``), its PASS side decided on each pair's worse order (``test`` runs the same paired
    test on those per-item values), and no PASS below the consistency floor."""
    import numpy as np

    from evalgate import stats

    result = average.result
    if result is None:
        return average
    blocked = ""
    if side.worse is None:
        blocked = (
            "the PR run's pairwise judgements lack each pair's worse order (written by an older "
            "evalgate): a position-biased judge could PASS it; run it again"
        )
        combined = result
    else:
        worse = test(np.array([side.worse[i] for i in ids]))
        assert worse.result is not None  # the same items as the average's
        note = (
            f"PASS bound on each pair's worse order for the PR "
            f"(mean Δ {worse.result.delta:+.3f}), so position bias cannot raise it"
        )
        combined = dataclasses.replace(
            result,
            lo=min(worse.result.lo, result.lo),
            p_noninferiority=max(worse.result.p_noninferiority, result.p_noninferiority),
            note="; ".join(x for x in (result.note, note) if x),
        )
    rate = side.consistency
    if not blocked and rate is not None and rate < CONSISTENCY_FLOOR:
        blocked = (
            f"the judge's position-swap consistency is {100 * rate:.1f}% over {side.pairs} "
            f"pairs, below {100 * CONSISTENCY_FLOOR:.0f}%: its verdicts follow the order the "
            "responses are shown in, so it cannot PASS a comparison"
        )
    status = stats.verdict(combined)
    if blocked and status == "PASS":
        status = "INCONCLUSIVE"
    return dataclasses.replace(average, result=combined, status=status, blocked=blocked)
