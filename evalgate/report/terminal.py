"""The scorecard for a person at a terminal: the same Markdown, rendered for reading.

The scorecard is written for GitHub: tables, ``<details>``/``<summary>`` folds, ``<sub>`` notes
and HTML-escaped text (``&amp;``). Printed raw to a terminal those read as markup. For a TTY it
goes through rich's Markdown renderer (tables drawn, entities decoded); the folds become bold
headings and the notes plain paragraphs, since a terminal has neither. A CI log or a pipe gets
the Markdown as plain text (:func:`for_log`): its tables and code spans, but none of what only a
Markdown renderer undoes — HTML tags and entities (``&gt;``, ``&amp;``), backslash escapes, the
zero-width spaces that keep GitHub from linking mentions. ``scorecard.md`` keeps the Markdown.
"""

from __future__ import annotations

import re
import shutil
from typing import IO

__all__ = ["for_log", "for_terminal", "print_scorecard", "wants_rendering"]

_SUMMARY = re.compile(r"<details>\s*<summary>(.*?)</summary>", re.S)
_TAGS = re.compile(r"</?(details|summary|sub|sup|br|p|span|b|i|em|strong)\b[^>]*>", re.I)


def for_terminal(markdown: str) -> str:
    """The scorecard's Markdown without its HTML: a fold's title becomes a bold line."""
    text = _SUMMARY.sub(lambda m: f"\n**{m.group(1).strip()}**\n", markdown)
    return _TAGS.sub("", text)


# A code span (its content is verbatim: no entity or escape inside but the cell separator's).
_CODE = re.compile(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)")
# escape_text's backslash escapes; `\|` stays, a table row would end at a bare pipe.
_ESCAPED = re.compile(r"\\([\\`*~_\]])")
_ZWSP = "\u200b"  # inserted by escape_text / neutralise; the user's own are shown as "\u200b"


def _plain(text: str) -> str:
    """Text outside code spans: evalgate's tags dropped, then the user's text unescaped."""
    text = for_terminal(text)
    if "&" in text:  # html.unescape changes nothing else: its entity table (~1 ms) loads only then
        import html

        text = html.unescape(text)
    return _ESCAPED.sub(r"\1", text).replace(_ZWSP, "")


def for_log(markdown: str) -> str:
    """The scorecard for a CI log or a pipe: Markdown a person reads as plain text."""
    out = []
    for line in markdown.splitlines(keepends=True):
        pos = 0
        for match in _CODE.finditer(line):
            out.append(_plain(line[pos : match.start()]))
            out.append(match.group(0).replace(_ZWSP, ""))
            pos = match.end()
        out.append(_plain(line[pos:]))
    return "".join(out)


def wants_rendering(out: IO[str]) -> bool:
    """A person reads ``out``: it is a terminal (not a CI log, a pipe or a file)."""
    isatty = getattr(out, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):
        return False


def print_scorecard(markdown: str, out: IO[str]) -> None:
    """Print the scorecard to ``out``: rendered on a terminal, as plain text in a log."""
    if not wants_rendering(out):
        print(for_log(markdown), file=out)
        return
    from rich.console import Console
    from rich.markdown import Markdown

    width = min(shutil.get_terminal_size((120, 40)).columns, 200)
    console = Console(file=out, force_terminal=True, width=width, soft_wrap=False)
    console.print(Markdown(for_terminal(markdown), hyperlinks=False))
