"""Narrowing for values read back from JSON (run files, API replies, worker messages).

A decoded JSON document is ``object`` all the way down: these turn one value into the type the
reader needs, or the reader's default when it is something else (an older or hand-edited file
must not crash a report). ``bool`` is not a number here, though Python says it is an ``int``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["integer", "items", "mapping", "number", "text"]


def mapping(value: object) -> Mapping[str, object]:
    """``value`` when it is a JSON object, else an empty one (missing, null, another type)."""
    return value if isinstance(value, Mapping) else {}


def items(value: object) -> Sequence[object]:
    """``value`` when it is a JSON array, else an empty one (a string is not a list here)."""
    return value if isinstance(value, list | tuple) else ()


def number(value: object, default: float = 0.0) -> float:
    """``value`` as a float when it is a JSON number, else ``default``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return default


def integer(value: object, default: int = 0) -> int:
    """``value`` truncated to an int when it is a JSON number, else ``default``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    return default


def text(value: object, default: str = "") -> str:
    """``value`` when it is a string, else ``default``."""
    return value if isinstance(value, str) else default
