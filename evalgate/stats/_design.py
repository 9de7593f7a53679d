"""The design of a paired comparison: what is fixed before any score is seen.

One value carries the constants every paired test of the gate reads (the level, the margin,
the metric's range, the plan of the run: its items, looks and groups, and the resampling), so
:func:`~evalgate.stats.paired_compare`, :func:`~evalgate.stats.sequential_compare` and
:func:`~evalgate.stats.sequential_decision` take the data and one :class:`Design` instead of
the same dozen keyword arguments each. What varies from one reading to the next (the look, the
item's groups) stays an argument of the call.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

from evalgate.stats._pure import _check_alpha


@dataclass(frozen=True)
class Design:
    """The constants of a paired PR-vs-base comparison (Δ = head − base).

    * ``alpha``: the one-sided level of each test (PASS: non-inferiority; FAIL: regression);
      over a sequential design, the overall α the looks spend.
    * ``margin``: δ ≥ 0; PASS ⇔ the lower bound on Δ is above −δ.
    * ``bounds``: (low, high), the range every score can take (a metric's
      :class:`~evalgate.stats.Scale`); None: [0, 1]. It is widened to hold the scores given and
      sets the range of the differences that the betting and Hoeffding bounds assume.
    * ``horizon``: the planned number of items; the items given are then the first of them in
      an order fixed before any score was seen (:func:`~evalgate.stats.item_order`), and the
      betting bound bets on them in that order, tuned to ``horizon``. None: a seeded random
      order, tuned to the items given. A sequential decision needs it (the run's items).
    * ``looks``: the number of looks of a group-sequential design (1: a fixed design).
    * ``groups_total`` / ``group_size``: with groups and a horizon, the planned number of
      groups and the largest planned group, the constants of the betting process over groups
      (None: the groups given, the largest given).
    * ``n_resamples`` / ``seed``: the sign-flip patterns drawn at most (all of them when there
      are fewer) and the seed of the draws and of the betting order without a horizon.
    """

    alpha: float = 0.05
    margin: float = 0.03
    bounds: tuple[float, float] | None = None
    horizon: int | None = None
    looks: int = 1
    groups_total: int | None = None
    group_size: int | None = None
    n_resamples: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        # Checked here, once, where every comparison's constants are made (the comparisons
        # used to check them each on its own).
        _check_alpha(self.alpha)
        if not (math.isfinite(self.margin) and self.margin >= 0.0):
            raise ValueError(f"margin must be a finite number ≥ 0, got {self.margin!r}")
        if operator.index(self.n_resamples) < 1:
            raise ValueError("n_resamples must be ≥ 1")
        if operator.index(self.looks) < 1:
            raise ValueError("looks must be ≥ 1")
        if self.horizon is not None and operator.index(self.horizon) < 1:
            raise ValueError(f"horizon must be ≥ 1, got {self.horizon!r}")


__all__ = ["Design"]
