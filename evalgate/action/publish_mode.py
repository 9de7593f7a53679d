"""Publish mode: post the scorecard of a run that a ``pull_request`` job uploaded as an artifact.

The fork-safe half of the two-workflow recipe: it runs on ``workflow_run`` with a write token and
executes nothing from the PR, and everything it reads from the artifact is the PR's to forge.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from evalgate.action.context import CIContext
from evalgate.action.inputs import ActionInputs
from evalgate.errors import EvalgateError, ExitCode
from evalgate.publish.artifact import read_artifact_text
from evalgate.publish.github import GitHubClient
from evalgate.publish.sanitize import inert_markdown
from evalgate.run.layout import SCORECARD, VERDICT

if TYPE_CHECKING:
    from evalgate.action.main import _Publisher as Publisher

__all__ = ["publish_artifact"]


def publish_artifact(ctx: CIContext, inputs: ActionInputs, pub: Publisher) -> int:
    """Post a finished run's scorecard on its PR: the one the trusted event payload names, or
    (for a fork's PR, which GitHub leaves out of the payload) the artifact's, once verified.

    Everything in the artifact was written by code the PR controls: no file in it is followed
    through a symlink (a scorecard.md → /proc/self/environ would post this job's token), and the
    scorecard is posted inert (no mentions, references, links, images, HTML or markers).

    The exit code and outputs say what this job verified and posted (0 and ``PUBLISHED``; 3 when
    the comment could not be posted), never what the artifact's verdict.json claims: that is
    shown as ``reported_verdict``, labelled "as reported by the PR's job".
    """
    results = ctx.workspace / inputs.results_dir
    verdict_file, scorecard = results / VERDICT, results / SCORECARD
    verdict_text = read_artifact_text(verdict_file, what="the run's verdict")
    raw = read_artifact_text(scorecard, what="the run's scorecard")
    if not ctx.is_pr and ctx.pr_run is None:
        raise EvalgateError(
            "publish mode needs a workflow_run event for a pull request (the run's PR is read "
            "from the event, or verified against it)"
        )
    if not ctx.is_pr and inputs.comment and inputs.github_token:
        # pr.json is written by code the PR controls: with_artifact_pr takes its number only if
        # GitHub says that PR's head is the run's commit. Until then nothing can be posted:
        # pub.client stays None, so even the error handler's comment goes nowhere.
        client = GitHubClient(inputs.github_token, api_url=ctx.api_url)
        try:
            repo = ctx.repository
            ctx = ctx.with_artifact_pr(
                results / "pr.json", lambda n: client.get_pull_request(repo, n)
            )
        except BaseException:
            client.close()
            raise
        pub.ctx, pub.client = ctx, client
    status = _artifact_verdict(verdict_text, verdict_file)
    # The artifact's verdict is the PR's to forge: shown, labelled, never this job's outcome.
    pub.notices.append(
        f"verdict as reported by the PR's job: {status}. This job ran nothing from the PR: it "
        "verified which pull request the run belongs to and posted the run's scorecard",
        key="reported",
    )
    markdown = inert_markdown(raw)
    pub.scorecard = markdown
    pub.comment(markdown)
    wanted = pub.client is not None
    code = int(ExitCode.INFRA) if wanted and not pub.posted else 0
    pub.outputs = {
        "verdict": "PUBLISHED" if code == 0 else "ERROR",
        "reported_verdict": status,
        "exit_code": code,
        "scorecard": str(scorecard),
    }
    pub.finish(markdown, pub.outputs)
    return code


def _artifact_verdict(text: str, path: Path) -> str:
    """The status an uploaded verdict.json claims, checked for shape only."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    status = data.get("status") if isinstance(data, dict) else None
    code = data.get("exit_code") if isinstance(data, dict) else None
    if status not in ("PASS", "FAIL", "INCONCLUSIVE", "ERROR", "UNGATED") or code not in range(5):
        raise EvalgateError(f"{path.name}: not an evalgate verdict (status {status!r})")
    return str(status)
