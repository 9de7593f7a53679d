"""Where the Action runs: repository, event, commits and PR, from the runner's environment.

Read from an injected ``environ`` and the event payload at ``GITHUB_EVENT_PATH`` (the webhook
body that triggered the workflow), never from globals, so tests pass real-shaped payloads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.errors import UsageError

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
    event: dict[str, Any]

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
    def run_url(self) -> str:
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> CIContext:
        event: dict[str, Any] = {}
        event_path = environ.get("GITHUB_EVENT_PATH")
        if event_path:
            try:
                event = json.loads(Path(event_path).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise UsageError(
                    f"GITHUB_EVENT_PATH {event_path}: unreadable event ({exc})"
                ) from None
        name = environ.get("GITHUB_EVENT_NAME", "")
        repository = environ.get("GITHUB_REPOSITORY") or event.get("repository", {}).get(
            "full_name", ""
        )
        pr = event.get("pull_request") if name.startswith("pull_request") else None
        if name == "workflow_run":  # publish mode: the PR is named by the trusted payload
            runs = event.get("workflow_run", {}).get("pull_requests") or []
            pr = runs[0] if runs else None
        sha = environ.get("GITHUB_SHA", "")
        base_sha = base_ref = None
        pr_number = None
        is_fork = False
        if pr:
            pr_number = int(pr["number"])
            sha = pr.get("head", {}).get("sha") or sha
            base_sha = pr.get("base", {}).get("sha")
            base_ref = pr.get("base", {}).get("ref") or environ.get("GITHUB_BASE_REF")
            head_repo = (pr.get("head", {}).get("repo") or {}).get("full_name")
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
            default_branch=(event.get("repository") or {}).get("default_branch"),
            workspace=Path(environ.get("GITHUB_WORKSPACE") or "/github/workspace"),
            event=event,
        )
