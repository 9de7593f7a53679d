"""Data and scoring shared by both API generations of the example environment.

No verifiers import here: the v1 taskset (`evalgate_arith`) and the legacy environment
(`evalgate_arith_legacy`) both read these, and each generation must import without the other.
"""

from __future__ import annotations

import re

__all__ = ["PROBLEMS", "SYSTEM_PROMPT", "final_number", "is_correct"]

SYSTEM_PROMPT = "You are a calculator. Reply with the number only."

# (id, question, answer). Fixed rows with durable ids: evalgate pairs runs on them.
PROBLEMS: list[tuple[str, str, str]] = [
    ("add-2-3", "What is 2 + 3?", "5"),
    ("add-7-5", "What is 7 + 5?", "12"),
    ("sub-9-4", "What is 9 - 4?", "5"),
    ("add-10-10", "What is 10 + 10?", "20"),
    ("sub-15-6", "What is 15 - 6?", "9"),
    ("add-1-1", "What is 1 + 1?", "2"),
    ("mul-3-4", "What is 3 * 4?", "12"),
    ("sub-20-7", "What is 20 - 7?", "13"),
]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def final_number(text: str) -> str | None:
    """The last number in ``text`` (the model's answer), or None."""
    found = _NUMBER.findall(text or "")
    return found[-1] if found else None


def is_correct(reply: str, answer: str) -> float:
    """Exact match of the reply's final number against the reference."""
    return 1.0 if final_number(reply) == answer else 0.0
