"""Publish mode posts a scorecard that a pull request's job wrote: make it inert first.

The artifact is the PR's to forge. Posted as-is with the repository's token, it could ping
``@org/team``, cross-reference ``#123``, embed ``<img src=…>`` (a tracking pixel on every reader),
link anywhere, or carry another workflow's sticky marker (which would then adopt and overwrite
this comment, or let this one overwrite theirs). :func:`inert_markdown` keeps what a scorecard
needs — headings, tables, emphasis, the ``<details>``/``<summary>``/``<sub>`` tags evalgate writes
— and disarms the rest. It errs on the side of showing an escape character inside a code span
rather than parsing Markdown as GitHub might not.
"""

from __future__ import annotations

import re

from evalgate.report._escape import neutralise

__all__ = ["inert_markdown"]

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
# Exactly the tags the scorecard template writes, without attributes: `<details open>` or
# `<sub onclick=…>` are escaped like any other HTML.
_ALLOWED_TAG = re.compile(r"</?(?:details|summary|sub|br|b)>")
_ENTITY = re.compile(r"&(?:lt|gt|amp|quot|#39);")
_SPECIAL = re.compile(r"[<&\[\]]")


def _escape(match: re.Match[str], text: str) -> str:
    char = match.group(0)
    at = match.start()
    if char == "<" and _ALLOWED_TAG.match(text, at):
        return char
    if char == "&":
        # An entity that spells "@" or "#" (&#64;) would mention once decoded: only the few
        # evalgate's own escaping writes are kept.
        return char if _ENTITY.match(text, at) else "&amp;"
    if char == "<":
        return "&lt;"
    return "\\" + char  # [ and ]: no link, image or reference can start


def inert_markdown(text: str) -> str:
    """``text`` with every mention, reference, link, image, HTML tag and comment disarmed."""
    text = _COMMENT.sub("", text.replace("\r\n", "\n"))
    text = _SPECIAL.sub(lambda m: _escape(m, text), text)
    return neutralise(text)
