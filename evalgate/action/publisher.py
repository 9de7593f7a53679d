"""What the Action's publisher says besides the scorecard: notices, and outputs later steps can use.

Notices — "the base branch's policy was applied", "no stored baseline", a comment that could not
be posted, an empty token — are said once each (:class:`Notices`), in every place a reader looks:
the PR comment, scorecard.md and the job summary (:func:`with_notices`). A comment the token may
not write is not tried again in the same run: a second try would fail the same way and say so
twice.

Output paths are given relative to the workspace (:func:`portable`): in a container action the
workspace is ``/github/workspace``, a path no later step on the host can open, while a path
relative to the workspace means the same file in both (a step's default working directory is the
workspace; join it with ``${{ github.workspace }}`` elsewhere). A path outside the workspace stays
absolute.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from evalgate.action.context import CIContext
from evalgate.action.inputs import ActionInputs

__all__ = [
    "EMPTY_TOKEN_NOTICE",
    "PATH_OUTPUTS",
    "Notices",
    "missing_token_notice",
    "portable",
    "under_title",
    "with_notices",
]

EMPTY_TOKEN_NOTICE = (
    "the github_token input is empty, so no PR comment was posted: a pull request from a fork "
    "gets no secrets, so `secrets.NAME` is empty there (the default, `github.token`, is always "
    "set); the scorecard is in this job summary"
)

# The outputs that name files: given relative to the workspace.
PATH_OUTPUTS = frozenset({"scorecard", "results_dir", "crash_log"})


class Notices:
    """The run's notices in order, each at most once; a keyed one can be withdrawn."""

    def __init__(self) -> None:
        self._items: dict[str, str] = {}  # key (or the text itself) -> text

    def append(self, text: str, *, key: str | None = None) -> bool:
        """Add ``text``; False when it (or another notice with ``key``) is already there."""
        slot = key or text
        if slot in self._items or text in self._items.values():
            return False
        self._items[slot] = text
        return True

    def discard(self, key: str) -> None:
        self._items.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)


def with_notices(markdown: str, notices: Notices) -> str:
    """``markdown`` with the notices as quoted notes under its title (or first, if untitled):
    near the top, where a long scorecard cut to fit a comment cannot lose them."""
    if not notices:
        return markdown
    # A blank line between notes: consecutive quoted lines would render as one paragraph.
    return under_title(markdown, "\n\n".join(f"> **Note:** {n}" for n in notices) + "\n")


def under_title(markdown: str, block: str) -> str:
    """``markdown`` with ``block`` right under its title (or first, if untitled)."""
    title, newline, rest = markdown.partition("\n")
    if title.startswith("#") and newline:
        return f"{title}\n\n{block}\n{rest.lstrip(chr(10))}"
    return f"{block}\n{markdown}"


def missing_token_notice(ctx: CIContext, inputs: ActionInputs) -> str | None:
    """The notice to give when a PR comment is wanted but cannot be posted for want of a token."""
    wanted = inputs.comment and (ctx.is_pr or inputs.mode == "publish")
    return EMPTY_TOKEN_NOTICE if wanted and not inputs.github_token else None


def portable(outputs: Mapping[str, object], workspace: Path) -> dict[str, object]:
    """``outputs`` with the paths among them (:data:`PATH_OUTPUTS`) relative to ``workspace``."""
    root = os.path.realpath(workspace)
    result = dict(outputs)
    for name in PATH_OUTPUTS & result.keys():
        value = result[name]
        if not value or not isinstance(value, str | os.PathLike):
            continue
        path = os.path.realpath(value)
        if os.path.commonpath([path, root]) == root:
            result[name] = Path(os.path.relpath(path, root)).as_posix()
    return result
