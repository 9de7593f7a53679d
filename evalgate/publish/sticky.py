"""The sticky scorecard comment: one comment per pull request and key, rewritten on every run.

The comment is found by a hidden HTML marker on its first line, ``<!-- evalgate:sticky:KEY -->``,
searched across every page of the pull request's comments (the first match wins) — among the
comments of the identity that posts (``author``) only: anyone can paste the marker into a comment
of their own, which evalgate must never adopt (it would rewrite it, under the poster's name, or be
steered into editing it). The identity is the workflow's ``GITHUB_TOKEN`` (``github-actions[bot]``)
unless the caller says otherwise (a GitHub App's or a personal token's login).

Bodies are fitted to GitHub's 65,536-character limit: the contents of ``<details>`` blocks go
first (largest first, each replaced by a one-line note), then the text is cut at a line boundary
with a pointer to the full report. The marker is the first line, so it survives any cut.

A token that may not write (a pull request from a fork gets a read-only ``GITHUB_TOKEN``) is not
an error: :func:`upsert_sticky_comment` returns ``degraded=True`` and a notice for the job summary,
and the verdict stands as computed.

GitHub has no conditional create, so two runs of one workflow racing on one pull request could
each find no comment and each create one; the workflow's ``concurrency:`` group (one run per PR,
cancelling the older) prevents that, and the next run then updates the older of the two.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from evalgate.publish.github import GitHubClient, GitHubError, IssueComment

__all__ = [
    "COMMENT_LIMIT",
    "StickyResult",
    "find_sticky_comment",
    "fit_comment",
    "in_progress_body",
    "marker",
    "sticky_key",
    "upsert_sticky_comment",
]

COMMENT_LIMIT = 65_536  # GitHub: "Body is too long (maximum is 65536 characters)"

# Statuses meaning "this token may not comment here", which must not fail the job.
_DEGRADE_STATUSES = frozenset({403, 404, 410})
_KEY_SAFE = frozenset(string.ascii_letters + string.digits + " _.:/@+=()-")
_DETAILS_TAG = re.compile(r"<(/?)details\b[^>]*>", re.IGNORECASE)
_SUMMARY = re.compile(r"<summary\b[^>]*>(.*?)</summary\s*>", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class StickyResult:
    action: Literal["created", "updated", "skipped"]
    comment_id: int | None = None
    html_url: str | None = None
    truncated: bool = False  # the body was cut to fit GitHub's limit
    degraded: bool = False  # no comment could be written; ``notice`` says why
    notice: str | None = None  # for the job summary when degraded
    author: str | None = None  # the login that wrote the comment (GitHub's answer)


def sticky_key(workflow: str, comment_key: str = "") -> str:
    """The key of one sticky comment: the workflow's name, plus the caller's ``comment_key``
    when one workflow posts several scorecards (a matrix, say)."""
    return f"{workflow}/{comment_key}" if comment_key else workflow


def marker(key: str) -> str:
    """The hidden first line that identifies the comment for ``key``.

    The key is percent-encoded outside a safe set, and ``--`` is broken up, because an HTML
    comment must not contain ``--`` or ``>``: a workflow named ``a --> b`` must not end it early.
    """
    key = " ".join(key.split())
    if not key:
        raise ValueError("a sticky comment needs a non-empty key")
    safe = "".join(c if c in _KEY_SAFE else quote(c, safe="") for c in key)
    while "--" in safe:
        safe = safe.replace("--", "-%2D")
    return f"<!-- evalgate:sticky:{safe} -->"


def in_progress_body(*, run_url: str | None = None, title: str = "evalgate") -> str:
    """The placeholder posted when a run starts; the final scorecard replaces it in place."""
    lines = [
        f"## ⏳ {title}: evaluation in progress",
        "",
        "The scorecard will replace this comment when the run finishes.",
    ]
    if run_url:
        lines.append(f"Follow the run: {run_url}")
    return "\n".join(lines) + "\n"


def _details_blocks(text: str) -> list[tuple[int, int]]:
    """Spans of the outermost, balanced ``<details>…</details>`` blocks."""
    spans: list[tuple[int, int]] = []
    depth = 0
    start = 0
    for tag in _DETAILS_TAG.finditer(text):
        if not tag.group(1):
            if depth == 0:
                start = tag.start()
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, tag.end()))
    return spans


def _details_note(block: str, artifact_hint: str | None) -> str:
    found = _SUMMARY.search(block)
    summary = " ".join(re.sub(r"<[^>]+>", "", found.group(1)).split()) if found else ""
    note = f"_{summary or 'Details'}: omitted to fit GitHub's comment size limit"
    return note + (f"; the full report is in {artifact_hint}._" if artifact_hint else "._")


def _drop_details(text: str, limit: int, artifact_hint: str | None) -> str:
    """Replace ``<details>`` blocks by notes, largest first, until ``text`` fits ``limit``."""
    excess = len(text) - limit
    chosen: dict[int, tuple[int, str]] = {}
    for start, end in sorted(_details_blocks(text), key=lambda s: s[0] - s[1]):
        if excess <= 0:
            break
        note = _details_note(text[start:end], artifact_hint)
        if len(note) < end - start:
            chosen[start] = (end, note)
            excess -= end - start - len(note)
    out: list[str] = []
    pos = 0
    for start in sorted(chosen):
        end, note = chosen[start]
        out += [text[pos:start], note]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _cut(text: str, limit: int, artifact_hint: str | None, first_line: int) -> str:
    tail = f"\n\n---\n⚠️ **Truncated** to fit GitHub's {limit:,}-character comment limit."
    tail += f" The full report is in {artifact_hint}.\n" if artifact_hint else "\n"
    room = limit - len(tail) - len("```\n") - len("</details>\n") * 8
    if room <= first_line:
        raise ValueError(f"comment limit {limit} is too small for the marker and the note")
    head = text[:room]
    newline = head.rfind("\n")
    if newline >= first_line:
        head = head[: newline + 1]
    elif not head.endswith("\n"):
        head += "\n"
    if sum(1 for ln in head.splitlines() if ln.lstrip().startswith("```")) % 2:
        head += "```\n"  # a cut inside a code block would swallow the note
    opened = sum(1 for t in _DETAILS_TAG.finditer(head) if not t.group(1))
    closed = sum(1 for t in _DETAILS_TAG.finditer(head) if t.group(1))
    head += "</details>\n" * min(8, max(0, opened - closed))  # the note must not fold away
    return head + tail


def fit_comment(
    body: str,
    *,
    marker_text: str,
    artifact_hint: str | None = None,
    limit: int = COMMENT_LIMIT,
) -> tuple[str, bool]:
    """Return ``(text, truncated)``: ``marker_text`` first, at most ``limit`` characters in all.

    ``artifact_hint`` says where the full report is, e.g. "the `evalgate-report` artifact of
    [this run](URL)"; it goes into every note that stands for removed text.
    """
    first = marker_text + "\n"
    text = first + body.replace(marker_text, "")  # exactly one marker, and first
    if len(text) <= limit:
        return text, False
    text = _drop_details(text, limit, artifact_hint)
    if len(text) > limit:
        text = _cut(text, limit, artifact_hint, len(first))
    assert text.startswith(first) and len(text) <= limit
    return text, True


def find_sticky_comment(
    client: GitHubClient, repo: str, pr_number: int, marker_text: str, author: str | None = None
) -> IssueComment | None:
    """The first comment (oldest) that starts with ``marker_text``, searching every page; only
    ``author``'s comments when given (the Action always gives it)."""
    for comment in client.iter_issue_comments(repo, pr_number):
        if author is not None and comment.user != author:
            continue
        if comment.body.startswith(marker_text):
            return comment
    return None


def _degraded_notice(err: GitHubError, pr_number: int) -> str:
    head = f"evalgate could not comment on pull request #{pr_number}: {err.message}."
    if err.status == 403:
        why = (
            "Pull requests from forks run with a read-only GITHUB_TOKEN, and a job without "
            "`permissions: pull-requests: write` cannot comment either."
        )
    elif err.status == 404:
        why = "The token cannot see this repository or pull request."
    else:
        why = "Issues, and so pull request comments, are disabled on this repository."
    return f"{head} {why} The scorecard is in this job summary instead; the verdict is unaffected."


def _create(
    client: GitHubClient,
    repo: str,
    pr_number: int,
    text: str,
    tag: str,
    attempts: int,
    author: str | None,
) -> tuple[Literal["created", "updated"], IssueComment]:
    """Create the comment; after an answer that leaves it unknown whether GitHub created it,
    look for the marker before trying again, so a retry never makes a second comment."""
    for attempt in range(1, attempts + 1):
        try:
            return "created", client.create_issue_comment(repo, pr_number, text)
        except GitHubError as err:
            if not err.maybe_applied or attempt == attempts:
                raise
        client.backoff(attempt)
        found = find_sticky_comment(client, repo, pr_number, tag, author)
        if found is not None:
            if found.body == text:
                return "created", found
            return "updated", client.update_issue_comment(repo, found.id, text)
    raise AssertionError("unreachable")  # the loop returns or raises on its last attempt


def upsert_sticky_comment(
    client: GitHubClient,
    repo: str,
    pr_number: int,
    body: str,
    *,
    key: str,
    artifact_hint: str | None = None,
    limit: int = COMMENT_LIMIT,
    create_attempts: int = 3,
    author: str | None = None,
) -> StickyResult:
    """Create or update the one comment for ``key`` on pull request ``pr_number`` of ``repo``.

    Call it twice in a run (an :func:`in_progress_body` first, the scorecard last) and the second
    call rewrites the first's comment. A token that may not comment (403, 404, 410 on any call)
    gives ``degraded=True`` and a ``notice`` instead of an exception; every other failure raises
    :class:`~evalgate.publish.github.GitHubError`. ``author``: adopt only that login's comment.
    """
    tag = marker(key)
    text, truncated = fit_comment(body, marker_text=tag, artifact_hint=artifact_hint, limit=limit)
    try:
        existing = find_sticky_comment(client, repo, pr_number, tag, author)
        if existing is not None:
            comment = client.update_issue_comment(repo, existing.id, text)
            action: Literal["created", "updated"] = "updated"
        else:
            action, comment = _create(client, repo, pr_number, text, tag, create_attempts, author)
    except GitHubError as err:
        if err.status in _DEGRADE_STATUSES and not err.rate_limited:
            notice = _degraded_notice(err, pr_number)
            return StickyResult("skipped", truncated=truncated, degraded=True, notice=notice)
        raise
    return StickyResult(
        action, comment.id, comment.html_url, truncated=truncated, author=comment.user
    )
