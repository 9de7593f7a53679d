"""stats._brent.brentq is scipy.optimize.brentq step for step: the same float, to the last bit,
so that the MDE the scorecard and verdict.json report did not move when scipy.optimize (and its
~23 MiB of modules) left `evalgate compare`."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import optimize

from evalgate.stats import _power
from evalgate.stats._brent import brentq


def _same(f, a: float, b: float, **kw: float) -> None:  # type: ignore[no-untyped-def]
    try:
        want: object = optimize.brentq(f, a, b, **kw).hex()
    except (ValueError, RuntimeError) as exc:
        want = type(exc)
    try:
        got: object = brentq(f, a, b, **kw).hex()
    except (ValueError, RuntimeError) as exc:
        got = type(exc)
    assert got == want, (a, b, kw)


def test_brentq_gives_scipys_float_on_many_functions() -> None:
    rng = random.Random(7)
    for _ in range(400):
        c = rng.uniform(-5.0, 5.0)
        a, b = c - rng.uniform(1e-3, 10.0), c + rng.uniform(1e-3, 10.0)
        kw = rng.choice([{}, {"xtol": 1e-6 * abs(a) + 1e-12, "rtol": 1e-6}, {"xtol": 1e-3}])
        power = rng.choice([1.0, 2.0, 3.0, 0.5])
        _same(lambda x, c=c, p=power: math.copysign(abs(x - c) ** p, x - c), a, b, **kw)
        _same(lambda x, c=c: math.tanh(3.0 * (x - c)) + (x - c) ** 3, a, b, **kw)
        _same(lambda x, c=c: math.exp(x) - math.exp(c) * (1.0 + 0.1 * math.cos(x)), a, b, **kw)


def test_brentq_ends_and_errors_as_scipys() -> None:
    _same(lambda x: x - 1.0, 1.0, 3.0)  # a root at an end
    _same(lambda x: x - 3.0, 1.0, 3.0)
    _same(lambda x: x * x + 1.0, 0.0, 1.0)  # no change of sign: ValueError
    _same(lambda x: x**3 - 2.0, 0.0, 4.0, maxiter=3)  # too few steps: RuntimeError
    with pytest.raises(ValueError):
        brentq(lambda x: x, -1.0, 1.0, xtol=0.0)


@pytest.mark.parametrize(("n", "p", "drop"), [(200, 0.7, 0.02), (5000, 0.55, 0.01), (40, 0.9, 0.1)])
def test_the_exact_tests_mde_is_the_one_scipys_root_gave(
    n: int, p: float, drop: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(n)
    base = (rng.random(n) < p).astype(float)
    head = np.where((base == 1.0) & (rng.random(n) < drop), 0.0, base)
    ours = _power.mde_for_test(base, head)
    monkeypatch.setattr(
        _power, "brentq", lambda f, a, b, **kw: float(optimize.brentq(f, a, b, **kw))
    )
    assert ours.hex() == _power.mde_for_test(base, head).hex()
