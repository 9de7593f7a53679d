"""The scorecard for a person at a terminal: the same Markdown, rendered for reading.

The scorecard is written for GitHub: tables, ``<details>``/``<summary>`` folds, ``<sub>`` notes
and HTML-escaped text (``&amp;``). Printed raw to a terminal those read as markup. For a TTY it
goes through rich's Markdown renderer (tables drawn, entities decoded); the folds become bold
headings and the notes plain paragraphs, since a terminal has neither. Logs and files (CI, a
pipe, ``scorecard.md``) keep the Markdown as it is.
"""

from __future__ import annotations

import re
import shutil
from typing import IO

__all__ = ["for_terminal", "print_scorecard", "wants_rendering"]

_SUMMARY = re.compile(r"<details>\s*<summary>(.*?)</summary>", re.S)
_TAGS = re.compile(r"</?(details|summary|sub|sup|br|p|span|b|i|em|strong)\b[^>]*>", re.I)


def for_terminal(markdown: str) -> str:
    """The scorecard's Markdown without its HTML: a fold's title becomes a bold line."""
    text = _SUMMARY.sub(lambda m: f"\n**{m.group(1).strip()}**\n", markdown)
    return _TAGS.sub("", text)


def wants_rendering(out: IO[str]) -> bool:
    """A person reads ``out``: it is a terminal (not a CI log, a pipe or a file)."""
    isatty = getattr(out, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):
        return False


def print_scorecard(markdown: str, out: IO[str]) -> None:
    """Print the scorecard to ``out``: rendered on a terminal, Markdown elsewhere."""
    if not wants_rendering(out):
        print(markdown, file=out)
        return
    from rich.console import Console
    from rich.markdown import Markdown

    width = min(shutil.get_terminal_size((120, 40)).columns, 200)
    console = Console(file=out, force_terminal=True, width=width, soft_wrap=False)
    console.print(Markdown(for_terminal(markdown), hyperlinks=False))
