"""Scorers: each one on its own, with the cases that trip naive implementations."""

from __future__ import annotations

import pytest

from evalgate.config.spec import (
    ChoiceScorer,
    ContainsScorer,
    ExactScorer,
    NumericScorer,
    RegexScorer,
)
from evalgate.score.scorers import extract_choice, extract_number, make_scorer


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("The answer is 42.", 42.0),
        ("3 apples and 4 pears make 7", 7.0),
        ("Natalia sold 48/2 = 24 clips.\n#### 72", 72.0),
        ("#### 1,234", 1234.0),
        ("it is -3.5 degrees", -3.5),
        ("no digits here", None),
        ("#### -0.25 done", -0.25),
    ],
)
def test_extract_number(text: str, number: float | None) -> None:
    assert extract_number(text) == number


def test_numeric_scorer() -> None:
    score = make_scorer(NumericScorer(type="numeric"))
    assert score("so the total is 72", "#### 72") == 1.0
    assert score("72.0", "72") == 1.0
    assert score("73", "72") == 0.0
    assert score("I don't know", "72") == 0.0
    assert make_scorer(NumericScorer(type="numeric", tolerance=0.5))("72.4", "72") == 1.0


def test_exact_scorer() -> None:
    score = make_scorer(ExactScorer(type="exact"))
    assert score("  Paris. ", "paris") == 1.0
    assert score("Paris, France", "Paris") == 0.0
    assert make_scorer(ExactScorer(type="exact", case_sensitive=True))("paris", "Paris") == 0.0


def test_contains_scorer() -> None:
    score = make_scorer(ContainsScorer(type="contains"))
    assert score("The capital is Paris.", "paris") == 1.0
    assert score("The capital is Lyon.", "Paris") == 0.0


def test_regex_scorer_with_answer_placeholder() -> None:
    score = make_scorer(RegexScorer(type="regex", pattern=r"\bfinal: {answer}\b"))
    assert score("reasoning... FINAL: 3.5", "3.5") == 1.0
    assert score("final: 345", "3.5") == 0.0  # the answer is escaped: '.' is not a wildcard
    assert make_scorer(RegexScorer(type="regex", pattern=r"^yes"))("yes sir", "ignored") == 1.0


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("B", "B"),
        ("(C) because it is larger", "C"),
        ("The answer is D.", "D"),
        ("Answer: a", "A"),
        ("I think option (B) fits", "B"),
        ("None of them", None),
    ],
)
def test_extract_choice(text: str, letter: str | None) -> None:
    assert extract_choice(text) == letter


def test_choice_scorer() -> None:
    score = make_scorer(ChoiceScorer(type="choice"))
    assert score("The answer is (b)", "B") == 1.0
    assert score("A", "B") == 0.0
    assert make_scorer(ChoiceScorer(type="choice", choices="AB"))("(C)", "C") == 0.0
