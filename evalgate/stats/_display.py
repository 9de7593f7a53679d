"""How many decimals a bound needs so that, shown, it stays on its side of the decision point.

PASS ⇔ L > −δ and FAIL ⇔ U < 0, but a bound printed at a fixed precision can land on the
other side or on the point itself: U = −0.004 pp prints as "-0.0 pp" beside a FAIL, and
L = −2.9996 pp as "-3.0 pp" beside a PASS at δ = 3 pp. The shown value is rounded, so the
precision grows until the rounded value compares with the rounded edge as the value does.
"""

from __future__ import annotations

import math

__all__ = ["decimals_against"]

_MOST = 9  # beyond this a bound that close to the edge is shown as far as a float allows


def decimals_against(value: float, edge: float, decimals: int = 1, scale: float = 100.0) -> int:
    """The fewest decimals (at least ``decimals``) at which ``value · scale``, rounded, lies on
    the same side of ``edge · scale`` (also rounded) as ``value`` lies of ``edge``.

    ``scale`` = 100 for percentage points, 1 for fractions. Non-finite values keep ``decimals``.
    """
    if not (math.isfinite(value) and math.isfinite(edge)):
        return decimals
    side = (value > edge) - (value < edge)
    digits = decimals
    while digits < _MOST:
        shown, at = round(value * scale, digits), round(edge * scale, digits)
        if (shown > at) - (shown < at) == side:
            break
        digits += 1
    return digits
