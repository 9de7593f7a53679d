"""A judge's verdict read from its reply: one final ``VERDICT:`` line, or a structured verdict.

What the parsing accepts is part of what a judge's score means (``JUDGE_PROTOCOL`` in
:mod:`evalgate.score.judge`): a reply the parser cannot read is no verdict, never a 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from evalgate.config.spec.judge import JudgeScale

__all__ = ["Scale", "Verdict", "asks_for_verdict", "parse_reply", "parse_verdict", "verdict_schema"]

# What a verdict is read on: pass/fail, an integer scale, or pairwise (which response is better).
Scale = Literal["pass-fail", "pairwise"] | JudgeScale

# Pairwise, per order: how much the verdict prefers response A (1), B (0), or neither (0.5).
_PREFER_A = {"a": 1.0, "b": 0.0, "tie": 0.5}

# The verdict is the reply's last non-empty line, and the only line that is a verdict on its own:
# "VERDICT: X", markdown emphasis, quotes or a final period around it tolerated, nothing else. A
# judge may mention the instruction's "VERDICT: PASS" inside a sentence; a reply with two
# verdict lines (one quoted from the completion, say), or one followed by more text, has none.
_VERDICT_LINE = re.compile(
    r"""^[\s*_`>"'#]*VERDICT\s*[:：]\s*[*_`]*\s*([A-Za-z]+|-?\d+(?:\.\d+)?)\s*[*_`."']*\s*$""",
    re.IGNORECASE,
)
_MENTION = re.compile(r"VERDICT\s*[:：]", re.IGNORECASE)
# The word the parser reads, as a judge's prompt must ask for it.
_ASKS = re.compile(r"\bVERDICT\b", re.IGNORECASE)
_PASS = {"pass": 1.0, "correct": 1.0, "yes": 1.0, "fail": 0.0, "incorrect": 0.0, "no": 0.0}


@dataclass(frozen=True)
class Verdict:
    """One judgement: the score in [0, 1] (None: unparseable), the reply and its reasoning."""

    score: float | None
    raw: str
    reasoning: str
    problem: str | None = None  # why no score could be read


def parse_verdict(text: str, scale: Scale) -> Verdict:
    """The score a judge's reply gives, on ``scale`` (``"pass-fail"``, a JudgeScale, or
    ``"pairwise"``: how much it prefers response A, 1 / 0.5 / 0): read from exactly one verdict
    line, the reply's last non-empty line."""
    lines = text.splitlines()
    found = [i for i, line in enumerate(lines) if _VERDICT_LINE.match(line)]
    if not found:
        problem = (
            "no line of its own holds the verdict (a last line `VERDICT: …`)"
            if _MENTION.search(text)
            else "no `VERDICT:` line in the judge's reply"
        )
        return Verdict(None, text, text.strip(), problem)
    if len(found) > 1:
        problem = f"{len(found)} verdict lines (lines {', '.join(str(i + 1) for i in found)})"
        return Verdict(None, text, text.strip(), f"{problem}: exactly one is read")
    (at,) = found
    if any(line.strip() for line in lines[at + 1 :]):
        return Verdict(None, text, text.strip(), "text follows the verdict line: it is not last")
    match = _VERDICT_LINE.match(lines[at])
    assert match is not None
    return _score(match.group(1), scale, text, "\n".join(lines[:at]).strip())


def _score(value: str, scale: Scale, text: str, reasoning: str) -> Verdict:
    """The verdict ``value`` (as written) on ``scale``, or why it is not one."""
    if scale == "pairwise":
        prefer = _PREFER_A.get(value.lower())
        if prefer is None:
            return Verdict(None, text, reasoning, f"verdict {value!r} is not A, B or TIE")
        return Verdict(prefer, text, reasoning)
    if not isinstance(scale, JudgeScale):  # pass-fail
        score = _PASS.get(value.lower())
        if score is None:
            return Verdict(None, text, reasoning, f"verdict {value!r} is not PASS or FAIL")
        return Verdict(score, text, reasoning)
    try:
        number = float(value)
    except ValueError:
        return Verdict(None, text, reasoning, f"verdict {value!r} is not a number")
    if not number.is_integer():
        return Verdict(
            None,
            text,
            reasoning,
            f"verdict {value} is not an integer on the scale {scale.min}-{scale.max}",
        )
    if not scale.min <= number <= scale.max:
        return Verdict(
            None, text, reasoning, f"verdict {value} is outside the scale {scale.min}-{scale.max}"
        )
    return Verdict((number - scale.min) / (scale.max - scale.min), text, reasoning)


def verdict_schema(scale: Scale, reasoning_chars: int | None = None) -> dict[str, object]:
    """The JSON schema of a structured verdict on ``scale``: its reasoning first (a judge
    reasons before it decides), at most ``reasoning_chars`` long (a small model constrained to
    a string may never close it: the verdict must fit in the judge's max_tokens), then the
    verdict, one of the scale's values."""
    values: list[str] | list[int]
    if scale == "pairwise":
        values = ["A", "B", "TIE"]
    elif not isinstance(scale, JudgeScale):  # pass-fail
        values = ["PASS", "FAIL"]
    else:
        values = list(range(scale.min, scale.max + 1))
    return {
        "type": "object",
        "properties": {
            "reasoning": {
                "type": "string",
                **({"maxLength": reasoning_chars} if reasoning_chars is not None else {}),
            },
            "verdict": {"enum": values},
        },
        "required": ["reasoning", "verdict"],
        "additionalProperties": False,
    }


def parse_reply(text: str, scale: Scale, *, structured: bool) -> Verdict:
    """A judge's reply read as a structured verdict when it was asked for one and the reply is
    a JSON object (exactly ``reasoning`` and ``verdict``; anything else in it, or a verdict
    off the scale, is no verdict), else as free text (:func:`parse_verdict`): a server that
    ignored ``response_format`` answered in text."""
    stripped = text.strip()
    if not structured or not stripped.startswith("{"):
        return parse_verdict(text, scale)
    import json

    try:
        data = json.loads(stripped)
    except ValueError:
        return Verdict(None, text, stripped, "the structured verdict is not valid JSON")
    if not isinstance(data, dict) or set(data) != {"reasoning", "verdict"}:
        keys = sorted(data) if isinstance(data, dict) else type(data).__name__
        return Verdict(
            None, text, stripped, f"the structured verdict is not {{reasoning, verdict}}: {keys}"
        )
    reasoning, value = str(data["reasoning"]).strip(), data["verdict"]
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return Verdict(None, text, reasoning, f"verdict {value!r} is not a value of the scale")
    if isinstance(value, str) and isinstance(scale, JudgeScale):
        return Verdict(None, text, reasoning, f"verdict {value!r} is not a number")
    return _score(str(value), scale, text, reasoning)


def asks_for_verdict(messages: list[dict[str, str]]) -> bool:
    """Whether a judge's prompt asks for the verdict this module reads (the word ``VERDICT``
    in a message): a prompt that never does gets replies no verdict can be read from."""
    return any(_ASKS.search(m["content"]) for m in messages)
