"""A summary's interval from an array of per-item scores (a million items: no list of a float
object per score) is the one its list gives, to the last bit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from evalgate.stats import mean_ci


def test_an_array_of_scores_gives_the_interval_of_its_list() -> None:
    rng = np.random.default_rng(0)
    for i in range(2000):
        # A few long ones: about 1 square in 1,000 differs in its last bit between numpy and
        # Python, which the exact sum then shows.
        n = int(rng.integers(0, 300)) if i % 500 != 2 else 50_000
        kind = i % 4
        scores = (
            (rng.random(n) < 0.7).astype(float)
            if kind == 0
            else rng.random(n)
            if kind == 1
            else rng.normal(0.0, 5.0, n)
            if kind == 2
            else rng.integers(0, 5, n) / 4
        )
        got, expected = mean_ci(scores), mean_ci(scores.tolist())
        # repr: NaN equals NaN, and -0.0 is not 0.0.
        assert repr(dataclasses.astuple(got)) == repr(dataclasses.astuple(expected)), (i, n)


@pytest.mark.parametrize(
    ("scores", "message"),
    [(np.zeros((2, 2)), "one-dimensional"), (np.array([1.0, np.nan]), "NaN or infinite")],
)
def test_an_array_is_refused_as_its_list_is(scores: np.ndarray, message: str) -> None:
    for given in (scores, scores.tolist()):
        with pytest.raises(ValueError, match=message):
            mean_ci(given)
