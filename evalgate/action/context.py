"""Where the Action runs: repository, event, commits and PR, from the runner's environment.

Read from an injected ``environ`` and the event payload at ``GITHUB_EVENT_PATH`` (the webhook
body that triggered the workflow), never from globals, so tests pass real-shaped payloads.

Publish mode runs on ``workflow_run``, whose payload names the run's PR in ``pull_requests`` —
except for a PR from a fork, where GitHub leaves it empty. Then the number can only come from the
untrusted artifact (``pr.json``), and :meth:`CIContext.with_artifact_pr` accepts it only once
GitHub confirms that this repository's PR of that number has the run's head commit: a forged
number cannot redirect the comment to another PR.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from evalgate.errors import UsageError
from evalgate.publish.artifact import read_artifact_text
from evalgate.publish.github import GitHubError, PullRequest

__all__ = ["CIContext"]


@dataclass(frozen=True)
class CIContext:
    event_name: str
    repository: str
    api_url: str
    server_url: str
    workflow: str
    run_id: str
    sha: str  # the commit evaluated (for a PR: its head, not the synthetic merge commit)
    ref: str
    base_sha: str | None  # PR only: the base branch's tip when the PR event fired
    base_ref: str | None
    pr_number: int | None
    is_fork: bool
    default_branch: str | None
    workspace: Path
    event: dict[str, object]  # the webhook payload, as GitHub wrote it (JSON)

    @property
    def is_pr(self) -> bool:
        return self.pr_number is not None

    @property
    def on_default_branch(self) -> bool:
        return (
            self.event_name == "push"
            and self.default_branch is not None
            and self.ref == f"refs/heads/{self.default_branch}"
        )

    @property
    def pr_run(self) -> dict[str, object] | None:
        """The trusted ``workflow_run`` object when this is a finished run of a PR workflow."""
        run = _object(self.event, "workflow_run") if self.event_name == "workflow_run" else {}
        return run if str(run.get("event", "")).startswith("pull_request") else None

    @property
    def run_url(self) -> str:
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> CIContext:
        event: dict[str, object] = {}
        event_path = environ.get("GITHUB_EVENT_PATH")
        if event_path:
            try:
                event = _object(json.loads(Path(event_path).read_text(encoding="utf-8")))
            except (OSError, ValueError) as exc:
                raise UsageError(
                    f"GITHUB_EVENT_PATH {event_path}: unreadable event ({exc})"
                ) from exc
        name = environ.get("GITHUB_EVENT_NAME", "")
        repository = environ.get("GITHUB_REPOSITORY") or _text(event, "repository", "full_name")
        pr = _object(event, "pull_request") if name.startswith("pull_request") else {}
        if name == "workflow_run":  # publish mode: the PR is named by the trusted payload
            runs = _object(event, "workflow_run").get("pull_requests")
            pr = _object(runs[0]) if isinstance(runs, list) and runs else {}
        sha = environ.get("GITHUB_SHA", "")
        base_sha = base_ref = None
        pr_number = None
        is_fork = False
        if pr:
            pr_number = int(str(pr["number"]))
            sha = _text(pr, "head", "sha") or sha
            base_sha = _text(pr, "base", "sha") or None
            base_ref = _text(pr, "base", "ref") or environ.get("GITHUB_BASE_REF")
            head_repo = _text(pr, "head", "repo", "full_name")
            is_fork = bool(head_repo) and head_repo != repository
        return cls(
            event_name=name,
            repository=repository,
            api_url=(environ.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/"),
            server_url=(environ.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/"),
            workflow=environ.get("GITHUB_WORKFLOW", "evalgate"),
            run_id=environ.get("GITHUB_RUN_ID", ""),
            sha=sha,
            ref=environ.get("GITHUB_REF", ""),
            base_sha=base_sha,
            base_ref=base_ref,
            pr_number=pr_number,
            is_fork=is_fork,
            default_branch=_text(event, "repository", "default_branch") or None,
            workspace=Path(environ.get("GITHUB_WORKSPACE") or "/github/workspace"),
            event=event,
        )

    def with_artifact_pr(self, pr_json: Path, fetch: Callable[[int], PullRequest]) -> CIContext:
        """This context with the PR that ``pr_json`` names, once GitHub vouches for it.

        ``fetch`` reads a PR of this repository from the API. The number is accepted only when
        that PR's head is the commit the trusted payload says the run evaluated; anything else
        raises :class:`UsageError` before a comment could be posted.
        """
        run = self.pr_run
        if run is None:
            raise UsageError(
                "publish mode needs a workflow_run event of a pull_request run (the PR is "
                "verified against the run's head commit from the event)"
            )
        run_sha = _text(run, "head_sha")
        number = _artifact_pr_number(pr_json)
        try:
            pull = fetch(number)
        except GitHubError as exc:
            if exc.status == 404:
                raise UsageError(
                    f"refusing to publish: {pr_json.name} names #{number}, which is not a pull "
                    f"request of {self.repository}"
                ) from exc
            raise
        run_repo = _text(run, "head_repository", "full_name")
        if pull.base_repo != self.repository:
            problem = f"targets {pull.base_repo}, not {self.repository}"
        elif not run_sha or pull.head_sha != run_sha:
            # Also what a push to the PR after the run looks like: its newer run will publish.
            problem = f"has head {pull.head_sha[:12]} while the run evaluated {run_sha[:12]}"
        elif run_repo and pull.head_repo and pull.head_repo != run_repo:
            problem = f"comes from {pull.head_repo} while the run's head was in {run_repo}"
        else:
            return dataclasses.replace(
                self,
                pr_number=pull.number,
                sha=pull.head_sha,
                base_sha=pull.base_sha,
                base_ref=pull.base_ref,
                is_fork=pull.head_repo != self.repository,
            )
        raise UsageError(
            f"refusing to publish: {pr_json.name} names #{number}, but that pull request "
            f"{problem} (a stale or forged artifact; nothing was posted)"
        )


def _object(payload: object, *keys: str) -> dict[str, object]:
    """The JSON object at ``keys`` in ``payload``; empty where one is missing or not an object
    (a field GitHub leaves out, or null)."""
    value: object = payload
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


def _text(payload: dict[str, object], *keys: str) -> str:
    """The string at ``keys`` in ``payload``; "" where it is missing or not a string."""
    *parents, leaf = keys
    value = _object(payload, *parents).get(leaf)
    return value if isinstance(value, str) else ""


def _artifact_pr_number(pr_json: Path) -> int:
    """The PR number the run wrote to ``pr.json``: untrusted, so only its shape is checked here."""
    why = (
        "the workflow_run payload names no PR (GitHub omits fork PRs there), so publish mode "
        "reads it from the run's pr.json"
    )
    text = read_artifact_text(pr_json, what=why, limit=64 * 1024)  # never through a symlink
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{pr_json}: unreadable ({type(exc).__name__}); {why}") from exc
    number = data.get("pr_number") if isinstance(data, dict) else None
    # bool is an int to Python; a JSON true is no PR number.
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise UsageError(f"{pr_json}: pr_number is {number!r}, not a pull request number")
    return number
