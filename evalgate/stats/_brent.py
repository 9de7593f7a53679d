"""Brent's root finder (inverse quadratic interpolation, secant steps, bisection), step for step
the variant ``scipy.optimize.brentq`` runs (Charles Harris's C code in scipy: the same
iterates, so the same float to the last bit). Importing scipy.optimize for its one call in the
MDE costs ~23 MiB of resident modules and a third of a second (scipy.optimize pulls in
scipy.linalg, scipy.sparse, scipy.spatial...); tests/test_stats_brent.py checks this one
against scipy's, float for float, on the MDE's own functions and on others.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["brentq"]

_RTOL_FLOOR = 4 * 2.220446049250313e-16  # scipy's smallest rtol: 4 machine epsilons


def brentq(
    f: Callable[[float], float],
    a: float,
    b: float,
    *,
    xtol: float = 2e-12,
    rtol: float = _RTOL_FLOOR,
    maxiter: int = 100,
) -> float:
    """A root of ``f`` in [a, b], where f(a) and f(b) have opposite signs (or one is 0), to
    within ``xtol + rtol·|x|``. ValueError when the signs do not differ, RuntimeError when
    ``maxiter`` steps do not converge (as scipy's)."""
    if not xtol > 0:
        raise ValueError(f"xtol too small ({xtol:g} <= 0)")
    if not rtol >= _RTOL_FLOOR:
        raise ValueError(f"rtol too small ({rtol:g} < {_RTOL_FLOOR:g})")
    # ``now`` is the best estimate; ``prev`` the one before; ``far`` the point on the other
    # side of the root (the bracket is [now, far]); ``step`` the last step, ``step_before``
    # the one before it (a step may interpolate only while steps keep shrinking).
    prev, now = float(a), float(b)
    f_prev, f_now = float(f(prev)), float(f(now))
    if f_prev * f_now > 0:
        raise ValueError("f(a) and f(b) must have different signs")
    if f_prev == 0:
        return prev
    if f_now == 0:
        return now
    far = f_far = step = step_before = 0.0
    for _ in range(maxiter):
        if f_prev * f_now < 0:  # the root lies between prev and now: prev is the new far side
            far, f_far = prev, f_prev
            step = step_before = now - prev
        if abs(f_far) < abs(f_now):  # keep the smaller |f| as the estimate
            prev, now, far = now, far, now
            f_prev, f_now, f_far = f_now, f_far, f_now
        tol = (xtol + rtol * abs(now)) / 2
        half = (far - now) / 2  # the bisection step
        if f_now == 0 or abs(half) < tol:
            return now
        if abs(step_before) > tol and abs(f_now) < abs(f_prev):
            if prev == far:  # two points: the secant
                trial = -f_now * (now - prev) / (f_now - f_prev)
            else:  # three: inverse quadratic interpolation
                slope_prev = (f_prev - f_now) / (prev - now)
                slope_far = (f_far - f_now) / (far - now)
                trial = (
                    -f_now
                    * (f_far * slope_far - f_prev * slope_prev)
                    / (slope_far * slope_prev * (f_far - f_prev))
                )
            if 2 * abs(trial) < min(abs(step_before), 3 * abs(half) - tol):
                step_before, step = step, trial  # a short, trusted step
            else:
                step_before = step = half
        else:
            step_before = step = half
        prev, f_prev = now, f_now
        now += step if abs(step) > tol else (tol if half > 0 else -tol)  # at least tol
        f_now = float(f(now))
    raise RuntimeError(f"brentq: no convergence after {maxiter} iterations")
