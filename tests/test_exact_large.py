"""The exact test's large-n path (evalgate/stats/_exact_interval.py, _LARGE_N) decides as the
bounded supremum does, and its bounds hold the bounded supremum's.

From _LARGE_N items on, the bounds' points are checked on the grid's p with an allowance, and
the p-values at the decision points are bounded from above more loosely (a decision near α
settled exactly). Here both paths run on the same tables at n = _LARGE_N, where both apply:
tables whose non-inferiority or regression p is near α (the decisions that could move), and
one far from both.
"""

from __future__ import annotations

import pytest

from evalgate.stats import _exact, _exact_interval

N = _exact_interval._LARGE_N
ALPHA, MARGIN = 0.05, 0.05


def _both(b: int, c: int, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple[float, ...], ...]:
    _exact_interval.exact_paired.cache_clear()
    large = _exact_interval.exact_paired(b, c, N, MARGIN, ALPHA)
    with monkeypatch.context() as patch:
        patch.setattr(_exact_interval, "_LARGE_N", N + 1)  # the bounded supremum everywhere
        _exact_interval.exact_paired.cache_clear()
        small = _exact_interval.exact_paired(b, c, N, MARGIN, ALPHA)
    _exact_interval.exact_paired.cache_clear()
    return large, small


@pytest.mark.slow
@pytest.mark.parametrize(
    ("b", "c"),
    [
        (950, 0),  # p_ni near α (0.053): the PR only breaks items, Δ̂ = −4.75 pp
        (960, 10),  # the same with a few fixes
        (125, 100),  # p_reg near α (0.052)
        (130, 100),  # p_reg below α (0.025): FAIL
        (1200, 220),  # far from both
    ],
)
def test_the_large_path_decides_as_the_bounded_supremum(
    b: int, c: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    (lo, hi, p_ni, p_reg), (s_lo, s_hi, s_ni, s_reg) = _both(b, c, monkeypatch)
    # The same decisions at −δ and 0, and the bounds agree with them.
    assert (p_ni <= ALPHA) == (s_ni <= ALPHA)
    assert (p_reg <= ALPHA) == (s_reg <= ALPHA)
    assert (lo > -MARGIN) == (p_ni <= ALPHA) and (hi < 0.0) == (p_reg <= ALPHA)
    # Never narrower than the bounded supremum's bounds, and within the shown precision.
    assert lo <= s_lo and hi >= s_hi
    assert s_lo - lo < 5e-4 and hi - s_hi < 5e-4
    # The p-values: upper bounds, at most 1 % + 1e-4 above the tighter ones.
    assert s_ni <= p_ni <= s_ni * 1.01 + 2e-4
    assert s_reg <= p_reg <= s_reg * 1.01 + 2e-4


def test_below_the_large_path_nothing_changes() -> None:
    """Under _LARGE_N items the bounded supremum decides and bounds, as before (the values of
    tests/test_stats.py and tests/test_exact_sup.py): the p is bounded to 1e-6."""
    _exact_interval.exact_paired.cache_clear()
    lo, hi, p_ni, _ = _exact_interval.exact_paired(30, 5, 1000, MARGIN, ALPHA)
    z = float(_exact.score_z(_exact.np.array(30), _exact.np.array(5), 1000, -MARGIN))
    assert p_ni == _exact._sup_tail(z, 1000, -MARGIN)
    assert lo > -MARGIN and hi < 0.0
