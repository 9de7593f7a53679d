"""Whether the scorecard may link report.html: only where the job uploads it.

In Actions the report lives in the run's artifacts, but only if the workflow uploads the output
folder (``actions/upload-artifact``): a comment that links "Full report" from a job that uploads
nothing sends every reader to an empty artifacts list. So the link is given when the running
job's own workflow (``GITHUB_WORKFLOW_REF``, read from the checkout) has an upload step whose
``path`` covers the output folder and that runs after a failing gate too (``if: always()``,
``!cancelled()`` or ``failure()``: a FAIL, exit 1, is when the report is wanted), and the
scorecard then names that artifact. ``EVALGATE_REPORT_URL`` is where the user says it is: taken
as given. Anything unknowable (no workflow file, a reusable workflow, an expression in the
path) gives no link rather than a dead one.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from evalgate.run.layout import REPORT_HTML

__all__ = ["ReportLink", "report_link", "uploaded_artifact"]


@dataclass(frozen=True)
class ReportLink:
    """Where report.html can be opened, and the artifact that holds it (None: a URL the user
    gave, ``EVALGATE_REPORT_URL``)."""

    url: str
    artifact: str | None = None


# Conditions under which a step still runs after an earlier step failed (the gate's exit 1).
_AFTER_FAILURE = ("always()", "cancelled()", "failure()")


def _workflow_job(environ: Mapping[str, str]) -> Mapping[str, object] | None:
    """The running job's definition in the workflow file it came from; None if unreadable."""
    ref, job, workspace = (
        environ.get(k) for k in ("GITHUB_WORKFLOW_REF", "GITHUB_JOB", "GITHUB_WORKSPACE")
    )
    if not (ref and job and workspace):
        return None
    # owner/repo/.github/workflows/file.yml@refs/...: the file, relative to the checkout.
    parts = ref.split("@", 1)[0].split("/", 2)
    if len(parts) != 3:
        return None
    path = Path(workspace) / parts[2]
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    jobs = doc.get("jobs") if isinstance(doc, Mapping) else None
    found = jobs.get(job) if isinstance(jobs, Mapping) else None
    return found if isinstance(found, Mapping) else None


def _covers(pattern: str, folder: Path, workspace: Path) -> bool:
    """Whether an upload ``path`` line takes in ``folder``'s report.html."""
    if "${{" in pattern:
        return False  # an expression: unknowable here
    target = os.path.normpath(workspace / os.path.expanduser(pattern))
    report = os.path.normpath(folder / REPORT_HTML)
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatch(report, target) or fnmatch.fnmatch(str(folder), target)
    return report == target or os.path.commonpath([target, report]) == target


def uploaded_artifact(job: Mapping[str, object], folder: Path, workspace: Path) -> str | None:
    """The name of the artifact ``job`` uploads ``folder`` in, even after a failing step
    (``actions/upload-artifact``'s default name is ``artifact``); None when it uploads none."""
    folder, workspace = Path(os.path.normpath(folder)), Path(os.path.normpath(workspace))
    steps = job.get("steps")
    for step in steps if isinstance(steps, list) else ():  # YAML: a list, or not steps at all
        if not isinstance(step, Mapping):
            continue
        uses = step.get("uses")
        if not isinstance(uses, str) or not uses.startswith("actions/upload-artifact@"):
            continue
        if not any(c in str(step.get("if", "")).replace(" ", "") for c in _AFTER_FAILURE):
            continue  # skipped exactly when the gate FAILs
        given = step.get("with")
        if not isinstance(given, Mapping):
            continue
        lines = [s.strip() for s in str(given.get("path", "")).splitlines()]
        if any(s and not s.startswith(("!", "#")) and _covers(s, folder, workspace) for s in lines):
            return str(given.get("name") or "artifact")
    return None


def report_link(environ: Mapping[str, str], output_root: Path) -> ReportLink | None:
    """The scorecard's link to report.html (written under ``output_root``), or None."""
    if url := environ.get("EVALGATE_REPORT_URL"):
        return ReportLink(url)
    server, repo, run = (
        environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
    )
    if not (server and repo and run):
        return None
    job = _workflow_job(environ)
    if job is None:
        return None
    workspace = Path(environ["GITHUB_WORKSPACE"]).resolve()
    artifact = uploaded_artifact(job, output_root.resolve(), workspace)
    if artifact is None:
        return None
    return ReportLink(f"{server.rstrip('/')}/{repo}/actions/runs/{run}#artifacts", artifact)
