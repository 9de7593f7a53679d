"""Everything the Action writes to GitHub, each channel failing soft and visibly.

Notices — "the base branch's policy was applied", "no stored baseline", a comment that could not
be posted — are said once each, in every place a reader looks: the PR comment, scorecard.md and
the job summary (and a degraded comment also as a ``::notice`` annotation). A comment that the
token may not write is not tried again in the same run: a second try would fail the same way and
say so twice.

Output paths are given relative to the workspace: in a container action the workspace is
``/github/workspace``, a path no later step on the host can open, while a path relative to the
workspace means the same file in both (a step's default working directory is the workspace; join
it with ``${{ github.workspace }}`` elsewhere). A path outside the workspace stays absolute.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from evalgate.action.context import CIContext
from evalgate.action.inputs import ActionInputs
from evalgate.publish import actions
from evalgate.publish.github import GitHubClient, GitHubError
from evalgate.publish.sticky import sticky_key, upsert_sticky_comment

__all__ = ["EMPTY_TOKEN_NOTICE", "Notices", "Publisher", "with_notices"]

EMPTY_TOKEN_NOTICE = (
    "the github_token input is empty, so no PR comment was posted: a pull request from a fork "
    "gets no secrets, so `secrets.NAME` is empty there (the default, `github.token`, is always "
    "set); the scorecard is in this job summary"
)


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
    block = "\n\n".join(f"> **Note:** {n}" for n in notices) + "\n"
    title, newline, rest = markdown.partition("\n")
    if title.startswith("#") and newline:
        return f"{title}\n\n{block}\n{rest.lstrip(chr(10))}"
    return f"{block}\n{markdown}"


class Publisher:
    """The PR comment, the job summary and the step outputs of one Action run."""

    def __init__(
        self, ctx: CIContext, inputs: ActionInputs, environ: Mapping[str, str], out: IO[str]
    ):
        self.ctx, self.inputs, self.out = ctx, inputs, out
        self.env = actions.ActionsEnv.from_environ(environ)
        self.notices = Notices()
        self.client: GitHubClient | None = None
        self._degraded = False  # the token may not comment here: do not try again
        wants_comment = inputs.comment and (ctx.is_pr or inputs.mode == "publish")
        if wants_comment and not inputs.github_token:
            self.notice(EMPTY_TOKEN_NOTICE)
        elif ctx.is_pr and inputs.comment:
            self.client = GitHubClient(inputs.github_token, api_url=ctx.api_url)
        self.key = sticky_key(ctx.workflow, inputs.comment_key)

    def log(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def notice(self, text: str, *, key: str | None = None, level: str = "notice") -> None:
        """A notice for the reader, also shown as an annotation (once, like the notice)."""
        if self.notices.append(text, key=key):
            message = text if text.startswith("evalgate") else f"evalgate: {text}"
            self.log(actions.annotation(level, message))

    def comment(self, body: str) -> None:
        if self.client is None or self.ctx.pr_number is None or self._degraded:
            return
        # An earlier failure to comment is moot once this one posts: not in its body, and gone
        # afterwards; a new failure puts it back.
        self.notices.discard("comment")
        try:
            result = upsert_sticky_comment(
                self.client,
                self.ctx.repository,
                self.ctx.pr_number,
                with_notices(body, self.notices),
                key=self.key,
                artifact_hint=f"the `{self.inputs.output_dir}` artifact of {self.ctx.run_url}",
            )
        except GitHubError as exc:  # a comment is a courtesy: it never changes the verdict
            self.notice(f"could not post the PR comment: {exc}", key="comment", level="warning")
            return
        if result.degraded:
            self._degraded = True
            self.notice(result.notice or "evalgate could not comment on the pull request")

    def scorecard(self, markdown: str, path: Path) -> None:
        """Post the final comment, then write scorecard.md with every notice, that one's too."""
        self.comment(markdown)
        path.write_text(with_notices(markdown, self.notices), encoding="utf-8")

    def finish(self, markdown: str, outputs: Mapping[str, Any]) -> None:
        markdown = with_notices(markdown, self.notices)
        if self.env.summary_path is not None:
            actions.append_summary(self.env.summary_path, markdown)
        if self.env.output_path is not None:
            values = {name: self._portable(value) for name, value in outputs.items()}
            actions.set_outputs(self.env.output_path, values)

    def _portable(self, value: object) -> object:
        """A path as later steps on the host can open it: relative to the workspace."""
        if not isinstance(value, Path):
            return value
        path, workspace = os.path.realpath(value), os.path.realpath(self.ctx.workspace)
        if os.path.commonpath([path, workspace]) != workspace:
            return str(value)
        return Path(os.path.relpath(path, workspace)).as_posix()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
