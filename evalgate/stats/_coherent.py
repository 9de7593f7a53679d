"""Coherent bounds: the interval a row shows holds its own estimate, and so does the verdict.

The betting (PASS) bound is a capital process over the items in one order. Ville's inequality
makes it valid whatever the data, but a single run can still read it where it disagrees with
the run's own mean: when the items that came first were the good ones, the capital can reach
1/α before the broken items arrive (the fixed design's bets then stop), and the inverted bound
sits above the estimate ("PASS −4.0 pp [−3.0, −1.1]", issue 35), even above the upper bound.
With the order fixed by a key the candidate cannot know (:mod:`._order`) that is as rare as any
false PASS, but a verdict beside an estimate it contradicts is never shown. The rule:

    L := min(L, Δ̂),   U := max(U, Δ̂),

and the p-values follow, so that PASS ⇔ L > −δ and FAIL ⇔ U < 0 still hold exactly: the
non-inferiority p is 1 when Δ̂ ≤ −δ (a PASS needs the estimate above the margin too), the
regression p is 1 when Δ̂ ≥ 0. Each new p is ≥ the old one, so each test only loses rejections:
the false-PASS and false-FAIL rates stay ≤ α, as they were.
"""

from __future__ import annotations

__all__ = ["coherent"]


def coherent(
    delta: float, lo: float, hi: float, p_ni: float, p_reg: float, margin: float
) -> tuple[float, float, float, float]:
    """(L, U, p_noninferiority, p_regression) made coherent with the estimate ``delta``: L ≤ Δ̂
    ≤ U, no PASS unless Δ̂ > −margin, no FAIL unless Δ̂ < 0 (the module docstring)."""
    if delta <= -margin:
        p_ni = 1.0
    if delta >= 0.0:
        p_reg = 1.0
    return min(lo, delta), max(hi, delta), p_ni, p_reg
