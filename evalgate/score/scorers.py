"""Scorers: a completion and a reference answer in, a reward in [0, 1] out.

Pure functions built from the benchmark's ``scorer`` config; unit-tested on their own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalgate.config.spec.benchmarks import (
        ChoiceScorer,
        ContainsScorer,
        ExactScorer,
        NumericScorer,
        RegexScorer,
    )

    # The scorers that are rules (a judge is :mod:`evalgate.score.judge`).
    RuleScorer = ExactScorer | NumericScorer | RegexScorer | ContainsScorer | ChoiceScorer

__all__ = ["Scorer", "extract_choice", "extract_number", "make_scorer", "normalize"]

Scorer = Callable[[str, str], float]

# Numbers like -1,234.5 or 3/4 are rare in answers; commas as thousands separators are common
# (GSM8K), so they are stripped before parsing.
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_GSM8K_FINAL = re.compile(r"####\s*(.+)")


def normalize(text: str, *, case_sensitive: bool = False) -> str:
    """Collapse whitespace, strip surrounding punctuation/quotes; lower-case unless asked not to."""
    text = " ".join(text.split()).strip().strip(".\"'`").strip()
    return text if case_sensitive else text.lower()


def extract_number(text: str) -> float | None:
    """The final number: after ``####`` when present (GSM8K), else the last number in the text."""
    match = _GSM8K_FINAL.search(text)
    if match:
        text = match.group(1)
    numbers = _NUMBER.findall(text)
    if not numbers:
        return None
    try:
        return float(numbers[-1].replace(",", ""))
    except ValueError:
        return None


_CHOICE_PATTERNS = (
    r"answer\s*(?:is|:)?\s*\(?([{L}])\)?\b",  # "Answer: B", "the answer is (C)"
    r"^\s*\(?([{L}])\)?(?:[.):\s]|$)",  # "B", "B.", "(B) because…"
    r"\(([{L}])\)",  # "(B)" anywhere
)


def extract_choice(text: str, letters: str = "ABCD") -> str | None:
    """The option letter a completion picks, or None when it names none."""
    for pattern in _CHOICE_PATTERNS:
        match = re.search(pattern.replace("{L}", letters), text, re.IGNORECASE | re.MULTILINE)
        if match:
            return match.group(1).upper()
    return None


def make_scorer(spec: RuleScorer) -> Scorer:
    """Build the scoring function for a scorer config (see :mod:`evalgate.config.load`)."""
    if spec.type == "exact":
        cs = spec.case_sensitive

        def exact(completion: str, answer: str) -> float:
            return float(
                normalize(completion, case_sensitive=cs) == normalize(answer, case_sensitive=cs)
            )

        return exact
    if spec.type == "numeric":
        tolerance = spec.tolerance

        def numeric(completion: str, answer: str) -> float:
            want, got = extract_number(answer), extract_number(completion)
            if want is None or got is None:
                return 0.0
            return float(math.isclose(got, want, rel_tol=0.0, abs_tol=tolerance))

        return numeric
    if spec.type == "regex":
        flags = 0 if spec.case_sensitive else re.IGNORECASE
        template = spec.pattern

        def regex(completion: str, answer: str) -> float:
            pattern = template.replace("{answer}", re.escape(answer.strip()))
            return float(re.search(pattern, completion, flags) is not None)

        return regex
    if spec.type == "contains":
        cs = spec.case_sensitive

        def contains(completion: str, answer: str) -> float:
            return float(
                normalize(answer, case_sensitive=cs) in normalize(completion, case_sensitive=cs)
            )

        return contains
    if spec.type == "choice":
        letters = spec.choices

        def choice(completion: str, answer: str) -> float:
            want = extract_choice(answer, letters) or answer.strip().upper()
            return float(extract_choice(completion, letters) == want)

        return choice
    raise ValueError(f"unknown scorer type {spec.type!r}")
