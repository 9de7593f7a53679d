"""Making text from users and models inert in GitHub Markdown.

Everything the scorecard shows that evalgate did not write itself — model labels, benchmark and
metric names, item ids, prompts, completions, error messages — is controlled by the pull request
or by the model under test, and lands in a comment posted with the repository's token. In that
text nothing may act: no ``@team`` mention or ``#123`` reference (notifications, cross-links), no
link, image or HTML (tracking pixels, phishing), no table-cell break, no HTML comment that reads
as a sticky-comment marker. Two forms:

- :func:`escape_text`: prose and table cells. Whitespace collapses to one line, HTML is escaped,
  Markdown punctuation is backslash-escaped, and mentions, references and URLs are broken by a
  zero-width space (GitHub's autolinkers need them contiguous; backslashes do not stop them).
- :func:`code_span`: verbatim text (completions, error messages) in a code span whose backtick
  fence is longer than any backtick run inside, so no content can close it early.
"""

from __future__ import annotations

import re

from markupsafe import Markup

from evalgate._text import visible

__all__ = ["code_span", "escape_text", "neutralise"]

ZWSP = "\u200b"
# The patterns are compiled when first needed (re's own cache), and only tried on text holding
# the character each needs: most labels hold none, and compiling the five took ~0.5 ms of every
# run's last stretch.
# GitHub mentions only an @ that no word character precedes ("pass@2" and "a@b" mention no one);
# a reference is any # before a digit, "owner/repo#1" included.
_MENTION = r"(?<![A-Za-z0-9_])@(?=[A-Za-z0-9])"
_REF = r"#(?=\d)"
_URL = r"(?i)(?<=[a-z0-9])://|\bwww\."
# Backslash, backtick, emphasis, strike-through and the cell separator always; `_` only where it
# could open or close emphasis (GFM ignores it inside words: `max_error_rate` stays readable);
# brackets only where they would make an inline link or image, `](`.
_MARKDOWN = r"([\\`*~|])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|\](?=\()"
_MARKDOWN_CHARS = frozenset("\\`*~|_]")  # one of them is in every match of _MARKDOWN


def neutralise(text: str) -> str:
    """Break mentions, issue references, URLs and HTML comment openers (which GitHub would act
    on even inside code) with a zero-width space; everything else is left as it is."""
    if "@" in text:
        text = re.sub(_MENTION, "@" + ZWSP, text)
    if "#" in text:
        text = re.sub(_REF, "#" + ZWSP, text)
    if "://" in text or "www." in text.lower():  # (?i): "WWW." too
        text = re.sub(_URL, lambda m: m.group(0)[:-1] + ZWSP + m.group(0)[-1], text)
    return text.replace("<!--", "<" + ZWSP + "!--")


def escape_text(value: object) -> Markup:
    """``value`` as inert one-line Markdown text, safe in a table cell; characters that cannot
    be seen (a zero-width space in a URL, a bidi override) shown as their escape."""
    text = " ".join(visible(str(value)).split())
    text = neutralise(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
    if _MARKDOWN_CHARS.isdisjoint(text):
        return Markup(text)
    return Markup(re.sub(_MARKDOWN, lambda m: "\\" + m.group(0), text))


def code_span(value: object, *, empty: str = "∅") -> Markup:
    """``value`` verbatim (on one line) in a code span no content can break out of; characters
    that cannot be seen shown as their escape (:func:`evalgate._text.visible`)."""
    text = " ".join(visible(str(value)).split())
    if not text:
        return Markup(empty)
    runs = re.findall(r"`+", text) if "`" in text else ()
    fence = "`" * (max((len(m) for m in runs), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    # GitHub links no mention, reference or URL inside code; an HTML comment opener still counts
    # for a sticky-marker search over the raw body. A table row ends at an unescaped pipe even
    # inside a code span (GFM splits the row first).
    text = text.replace("<!--", "<" + ZWSP + "!--").replace("|", "\\|")
    return Markup(f"{fence}{pad}{text}{pad}{fence}")
