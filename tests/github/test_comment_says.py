"""The PR comment says what happened: the report it links was uploaded, the exam-change note
names each changed field, and the baseline line names the merge-base and why it was re-run.

Each test runs the Action on a real git workspace against the spec-validated fake GitHub and
reads the comment it posted (``tests/github/test_action.py``'s helpers)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_github import FakeGitHub
from test_action import PR, REPO, Workspace, _evals, _git, _pr_env, _store_baseline
from test_action import ws as ws

from evalgate.action import run_action
from evalgate.action.workflow_inputs import _is_evalgate
from evalgate.report.link import uploaded_artifact

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "workflows" / "evalgate.yml"
ARTIFACTS = "https://github.example/octo-org/evals-demo/actions/runs/7#artifacts"


def _run(env: dict[str, str]) -> tuple[int, str]:
    out = io.StringIO()
    return run_action(env, out=out), out.getvalue()


def _with_workflow(env: dict[str, str], job: str) -> dict[str, str]:
    """The environment of ``job`` of the workflow committed at the PR's head."""
    return {
        **env,
        "GITHUB_WORKFLOW_REF": f"{REPO}/.github/workflows/evalgate.yml@refs/pull/{PR}/merge",
        "GITHUB_JOB": job,
    }


def _pr_with_workflow(ws: Workspace, workflow: str, system: str = "Answer briefly.") -> str:
    folder = ws.ws / ".github" / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "evalgate.yml").write_text(workflow)
    return ws.pr(_evals(ws.url, system=system))


def _without_upload(text: str) -> str:
    doc = yaml.safe_load(text)
    for job in doc["jobs"].values():
        job["steps"] = [s for s in job["steps"] if "upload-artifact" not in s.get("uses", "")]
    return yaml.safe_dump(doc)


def test_the_copied_workflow_uploads_the_artifact_the_comment_links(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    head = _pr_with_workflow(ws, EXAMPLE.read_text(), system="Please regress.")
    env = _with_workflow(_pr_env(ws, github, pr_event, head, results_store="none"), "evalgate")
    code, log = _run(env)
    assert code == 1, log  # a FAIL: the upload step still runs (if: always())
    (body,) = github.bodies(REPO, PR)
    assert f"📄 [Full report]({ARTIFACTS}): report.html in this run's `evalgate-outputs` " in body
    assert "is not linked" not in log


@pytest.mark.parametrize(
    "change",
    [
        _without_upload,  # the job uploads nothing
        lambda t: t.replace("        if: always()  #", "        #"),  # skipped when it FAILs
        lambda t: t.replace("path: evalgate-outputs", "path: other-folder"),  # not the outputs
    ],
    ids=["no-upload", "not-after-failure", "another-folder"],
)
def test_a_job_that_does_not_upload_the_report_gets_no_link(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any], change: Any
) -> None:
    workflow = change(EXAMPLE.read_text())
    assert workflow != EXAMPLE.read_text()
    head = _pr_with_workflow(ws, workflow)
    env = _with_workflow(_pr_env(ws, github, pr_event, head, results_store="none"), "evalgate")
    code, log = _run(env)
    assert code == 0, log
    (body,) = github.bodies(REPO, PR)
    assert "Full report" not in body and "#artifacts" not in body, body
    assert "::notice::evalgate: report.html is not linked from the comment" in log
    summary = (ws.tmp / "summary").read_text()
    assert "evalgate: PASS" in summary and "#artifacts" not in summary


def _run_mode_jobs(path: Path) -> list[tuple[str, dict[str, Any], str]]:
    """(job id, job, output folder) of each job that runs evalgate in run mode on a PR."""
    doc = yaml.safe_load(path.read_text())
    out = []
    for name, job in doc["jobs"].items():
        if "== 'push'" in str(job.get("if", "")):
            continue  # the default branch's baseline job: no PR comment
        for step in job["steps"]:
            given = step.get("with") or {}
            if _is_evalgate(step.get("uses", ""), None, local=True) and (
                given.get("mode", "run") == "run"
            ):
                out.append((name, job, given.get("output_dir", "evalgate-outputs")))
    return out


WORKFLOWS = sorted((ROOT / "examples" / "workflows").glob("*.yml")) + sorted(
    (ROOT / ".github" / "workflows").glob("evalgate*.yml")
)


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_example_pr_job_uploads_the_outputs_it_links(path: Path, tmp_path: Path) -> None:
    for name, job, folder in _run_mode_jobs(path):
        assert uploaded_artifact(job, tmp_path / folder, tmp_path), f"{path.name}: job {name}"


def test_the_example_workflows_have_pr_jobs() -> None:
    assert sum(len(_run_mode_jobs(p)) for p in WORKFLOWS) >= 3  # the test above checks some


def test_a_report_url_the_user_gives_is_linked_as_given(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    """EVALGATE_REPORT_URL is where the user says the report is: linked as given."""
    _store_baseline(ws, github)
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    env = {**_pr_env(ws, github, pr_event, head), "EVALGATE_REPORT_URL": "https://r.example/x"}
    code, log = _run(env)
    assert code == 0, log
    (body,) = github.bodies(REPO, PR)
    assert "📄 [Full report](https://r.example/x): per-item diffs" in body


# -- the baseline line: the merge-base, and why it was re-run -------------------------------


def _baseline_line(body: str) -> str:
    (line,) = [ln for ln in body.splitlines() if ln.startswith("<sub>m / qa: baseline ")]
    return line


@pytest.mark.parametrize(
    ("inputs", "why"),
    [
        ({"results_store": "none"}, "no result store (`results_store: none`)"),
        ({"baseline": "rerun"}, "`baseline: rerun`"),
        ({}, "nothing usable stored for it or its ancestors (`m/qa`)"),  # an empty store
    ],
    ids=["no-store", "rerun", "nothing-stored"],
)
def test_a_rerun_baseline_names_the_merge_base_and_why(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any], inputs: dict[str, str], why: str
) -> None:
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    code, log = _run(_pr_env(ws, github, pr_event, head, **inputs))
    assert code == 0, log
    (body,) = github.bodies(REPO, PR)
    expected = f"baseline the merge-base commit `{ws.base[:12]}` (re-run for this PR: {why})"
    assert expected in _baseline_line(body), body


def test_a_stored_baseline_says_whether_it_is_the_merge_bases(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    _store_baseline(ws, github)
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    code, log = _run(_pr_env(ws, github, pr_event, head))
    assert code == 0, log
    line = _baseline_line(github.bodies(REPO, PR)[0])
    assert f"baseline commit `{ws.base[:12]}`, the merge-base, stored " in line, line

    # main moves on without storing (say its push job was cancelled): the PR branched from the
    # new commit is compared with the stored ancestor, and the line names both.
    stored = ws.base
    _git(ws.ws, "checkout", "-q", "main")
    (ws.ws / "notes.txt").write_text("unrelated\n")
    ws.base = ws.commit((ws.ws / "evals.yaml").read_text(), "main")
    _git(ws.ws, "push", "-q", "origin", "main")
    head = ws.pr(_evals(ws.url, system="Answer briefly."), name="feature-2")
    code, log = _run(_pr_env(ws, github, pr_event, head))
    assert code == 0, log
    line = _baseline_line(github.bodies(REPO, PR)[0])
    nearest = f"the nearest stored ancestor of the merge-base `{ws.base[:12]}`"
    assert f"baseline commit `{stored[:12]}`, {nearest}, stored " in line, line
