"""The Action end to end: real git repositories, the spec-validated fake GitHub, a scripted model.

Each test runs the entrypoint with the environment a runner gives a container action: INPUT_*,
GITHUB_EVENT_PATH with a real-shaped payload, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, a workspace.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_github import TOKEN, FakeGitHub, Fault

from evalgate.action import run_action

REPO = "octo-org/evals-demo"
PR = 42
N = 60


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.invalid",
           "GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.invalid"}  # fmt: skip
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, f"git {args}: {proc.stderr}"
    return proc.stdout.strip()


def _script(body: dict[str, Any], n: int) -> str:
    """Right on every item, unless the system prompt asks to regress (then wrong on half)."""
    i = int(body["messages"][-1]["content"].removeprefix("Q"))
    system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
    return "wrong" if "regress" in system and i % 2 == 0 else f"A{i}"


def _evals(url: str, system: str = "Answer.", gate: str = "margin: 0.05") -> str:
    return f"""
models:
  - {{name: m, backend: openai, base_url: "{url}", model: org/m}}
benchmarks:
  - {{name: qa, kind: jsonl, path: qa.jsonl, system_prompt: "{system}"}}
gate: {{{gate}}}
"""


class Workspace:
    def __init__(self, tmp: Path, url: str) -> None:
        self.tmp, self.url = tmp, url
        self.origin = tmp / "origin.git"
        _git(tmp, "init", "--bare", "-b", "main", str(self.origin))
        self.ws = tmp / "ws"
        _git(tmp, "clone", str(self.origin), str(self.ws))
        rows = [{"id": f"q{i:02d}", "prompt": f"Q{i}", "answer": f"A{i}"} for i in range(N)]
        (self.ws / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        (self.ws / ".gitignore").write_text("evalgate-outputs/\n")
        self.base = self.commit(_evals(url), "main")
        _git(self.ws, "push", "-q", "origin", "main")

    def commit(self, evals: str, branch: str) -> str:
        (self.ws / "evals.yaml").write_text(evals)
        _git(self.ws, "add", "-A")
        _git(self.ws, "commit", "-q", "-m", f"change on {branch}")
        return _git(self.ws, "rev-parse", "HEAD")

    def commit_removal(self) -> str:
        _git(self.ws, "add", "-A")
        _git(self.ws, "commit", "-q", "-m", "no evals.yaml yet")
        _git(self.ws, "push", "-q", "origin", "main")
        return _git(self.ws, "rev-parse", "HEAD")

    def pr(self, evals: str, name: str = "feature") -> str:
        _git(self.ws, "checkout", "-q", "-B", name, self.base)
        head = self.commit(evals, name)
        _git(self.ws, "push", "-q", "-f", "origin", name)
        return head

    def environ(self, event_name: str, event: dict[str, Any], sha: str, ref: str, api: str,
                **inputs: str) -> dict[str, str]:  # fmt: skip
        (self.tmp / "event.json").write_text(json.dumps(event))
        for name in ("output", "summary"):
            (self.tmp / name).write_text("")
        env = {
            "PATH": os.environ["PATH"], "HOME": str(self.tmp), "CI": "true",
            "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": event_name,
            "GITHUB_EVENT_PATH": str(self.tmp / "event.json"), "GITHUB_REPOSITORY": REPO,
            "GITHUB_API_URL": api, "GITHUB_SERVER_URL": "https://github.example",
            "GITHUB_WORKSPACE": str(self.ws), "GITHUB_WORKFLOW": "evals", "GITHUB_RUN_ID": "7",
            "GITHUB_SHA": sha, "GITHUB_REF": ref,
            "GITHUB_OUTPUT": str(self.tmp / "output"),
            "GITHUB_STEP_SUMMARY": str(self.tmp / "summary"),
            "INPUT_GITHUB_TOKEN": TOKEN, "INPUT_CONFIG": "evals.yaml", "INPUT_COMMENT": "true",
        }  # fmt: skip
        env.update({f"INPUT_{k.upper()}": v for k, v in inputs.items()})
        return env

    def trust_inputs(self) -> None:
        """Commit to main a workflow whose evalgate step takes `baseline` and `results_store`
        from expressions: the base's own workflow passes them, so a PR's run may use them (a PR
        cannot pass inputs its base's workflows do not: tests/github/test_exam_routes.py)."""
        step = {
            "uses": "org/evalgate@v1",
            "with": {"baseline": "${{ vars.BASELINE }}", "results_store": "${{ vars.STORE }}"},
        }
        workflow = {"on": "pull_request", "jobs": {"evals": {"runs-on": "ubuntu-latest",
                                                             "steps": [step]}}}  # fmt: skip
        (self.ws / ".github" / "workflows").mkdir(parents=True, exist_ok=True)
        (self.ws / ".github" / "workflows" / "evalgate.yml").write_text(json.dumps(workflow))
        _git(self.ws, "checkout", "-q", "main")
        self.base = self.commit((self.ws / "evals.yaml").read_text(), "main")
        _git(self.ws, "push", "-q", "origin", "main")

    def outputs(self) -> dict[str, str]:
        text = (self.tmp / "output").read_text()
        out, lines, i = {}, text.splitlines(), 0
        while i < len(lines):  # name<<DELIM / value / DELIM
            name, _, delim = lines[i].partition("<<")
            end = lines.index(delim, i + 1)
            out[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
        return out


def _push_event(ws: Workspace) -> dict[str, Any]:
    return {"ref": "refs/heads/main", "after": ws.base,
            "repository": {"full_name": REPO, "default_branch": "main"}}  # fmt: skip


def _pr_event(template: dict[str, Any], ws: Workspace, head: str) -> dict[str, Any]:
    event = json.loads(json.dumps(template))
    event["number"] = event["pull_request"]["number"] = PR
    event["pull_request"]["head"]["sha"] = head
    event["pull_request"]["base"]["sha"] = ws.base
    event["pull_request"]["base"]["ref"] = "main"
    event["repository"]["full_name"] = REPO
    event["pull_request"]["head"]["repo"]["full_name"] = REPO
    event["pull_request"]["base"]["repo"]["full_name"] = REPO
    return event


@pytest.fixture
def ws(tmp_path: Path, scripted_server: Any) -> Workspace:
    return Workspace(tmp_path, scripted_server(_script).base_url)


def _run(env: dict[str, str]) -> tuple[int, str]:
    out = io.StringIO()
    return run_action(env, out=out), out.getvalue()


def _store_baseline(ws: Workspace, github: FakeGitHub) -> None:
    env = ws.environ("push", _push_event(ws), ws.base, "refs/heads/main", github.url)
    code, log = _run(env)
    assert code == 0, log
    listing = _git(ws.origin, "ls-tree", "-r", "--name-only", "evalgate-results")
    assert f"runs/{ws.base}/qa--m/results.jsonl" in listing.split()


def test_push_stores_baseline_then_pr_is_gated_with_one_sticky_comment(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    _store_baseline(ws, github)
    # The push has no baseline and the policy sets no threshold: stored, and said ungated.
    assert ws.outputs()["verdict"] == "UNGATED"
    assert github.requests("POST") == []  # a push has no PR to comment on

    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    env = ws.environ("pull_request", _pr_event(pr_event, ws, head), head, "refs/pull/42/merge",
                     github.url)  # fmt: skip
    code, log = _run(env)
    assert code == 0, log
    (body,) = github.bodies(REPO, PR)  # "in progress" was rewritten in place
    assert "evalgate: PASS" in body and "Compared with the baseline" in body
    assert f"baseline commit `{ws.base[:12]}`" in body
    assert "the PR changed: prompt" in body
    assert len(github.requests("POST")) == 1 and len(github.requests("PATCH")) == 1
    outputs = ws.outputs()
    assert outputs["verdict"] == "PASS" and outputs["exit_code"] == "0"
    assert json.loads(outputs["summary"]) == {"m/qa": {"accuracy": 1.0}}
    assert "evalgate: PASS" in (ws.tmp / "summary").read_text()
    assert f"::add-mask::{TOKEN}" in log

    # The PR regresses: the same comment is updated to FAIL, the step fails.
    head2 = ws.pr(_evals(ws.url, system="Please regress."))
    env = ws.environ("pull_request", _pr_event(pr_event, ws, head2), head2, "refs/pull/42/merge",
                     github.url)  # fmt: skip
    code, log = _run(env)
    assert code == 1
    (body,) = github.bodies(REPO, PR)
    assert "evalgate: FAIL" in body and "30 regressed, 0 improved" in body
    assert ws.outputs()["verdict"] == "FAIL"
    assert "::error title=evalgate FAIL%3A m/qa/accuracy::" in log


def test_pr_cannot_loosen_its_own_gate(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    _store_baseline(ws, github)
    # The PR tries both: a 60-point margin, and no baseline comparison at all.
    head = ws.pr(
        _evals(ws.url, system="Please regress.", gate="margin: 0.6") + "baseline: {mode: none}\n"
    )
    env = ws.environ("pull_request", _pr_event(pr_event, ws, head), head, "refs/pull/42/merge",
                     github.url)  # fmt: skip
    code, _ = _run(env)
    assert code == 1  # judged with the base branch's 5-point margin, not the PR's 60
    summary = (ws.tmp / "summary").read_text()
    assert "the base branch's policy" in summary and "was applied" in summary
    # Each changed field, with both values: not just the sections' names.
    changed = "`gate.margin` `0.05` → `0.6`; `baseline.mode` `auto` → `none`"
    assert f"this PR changes the exam ({changed}): the gate used the base branch's exam" in summary
    body = github.bodies(REPO, PR)[0]
    assert "margin δ = 5.0 pp" in body and "Compared with the baseline" in body


def test_read_only_token_degrades_to_the_summary(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    _store_baseline(ws, github)
    head = ws.pr(_evals(ws.url, system="Please regress."))
    forbidden = {"message": "Resource not accessible by integration"}
    github.faults.append(Fault("POST", 403, body=forbidden, times=10))
    env = ws.environ("pull_request", _pr_event(pr_event, ws, head), head, "refs/pull/42/merge",
                     github.url)  # fmt: skip
    code, _ = _run(env)
    assert code == 1  # the verdict is unchanged by the missing comment
    assert github.bodies(REPO, PR) == []
    summary = (ws.tmp / "summary").read_text()
    assert "evalgate: FAIL" in summary and "**Note:**" in summary


def test_rerun_baseline_without_a_store(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    head = ws.pr(_evals(ws.url, system="Please regress."))
    env = ws.environ("pull_request", _pr_event(pr_event, ws, head), head, "refs/pull/42/merge",
                     github.url, results_store="none", comment="false")  # fmt: skip
    code, log = _run(env)
    assert code == 1, log
    verdict = json.loads((ws.ws / "evalgate-outputs" / "verdict.json").read_text())
    (comp,) = verdict["comparisons"]
    assert comp["base_origin"] == {
        "commit": ws.base, "rerun": True, "merge_base": ws.base, "why": "no-store"
    }  # fmt: skip
    assert github.requests() == []  # comment: false


def test_publish_mode_posts_without_running_anything(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    results = ws.ws / "downloaded"
    results.mkdir()
    (results / "scorecard.md").write_text("## ❌ evalgate: FAIL\n\nfrom the artifact\n")
    (results / "verdict.json").write_text(json.dumps({"status": "FAIL", "exit_code": 1}))
    event = {"workflow_run": {"head_sha": "a" * 40, "event": "pull_request",
                              "pull_requests": [{"number": PR, "head": {"sha": "a" * 40},
                                                 "base": {"sha": ws.base, "ref": "main"}}]},
             "repository": {"full_name": REPO, "default_branch": "main"}}  # fmt: skip
    env = ws.environ("workflow_run", event, ws.base, "refs/heads/main", github.url,
                     mode="publish", results_dir="downloaded")  # fmt: skip
    code, _ = _run(env)
    # The job's outcome is what it did (posted), never what the artifact claims (FAIL).
    assert code == 0
    (body,) = github.bodies(REPO, PR)
    assert "from the artifact" in body
    assert "verdict as reported by the PR's job: FAIL" in "\n".join(body.splitlines()[:4])
    outputs = ws.outputs()
    assert outputs["verdict"] == "PUBLISHED" and outputs["reported_verdict"] == "FAIL"


def test_bad_config_is_reported_everywhere(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    head = ws.pr("benchmarks: [nope]\n")
    env = ws.environ("pull_request", _pr_event(pr_event, ws, head), head, "refs/pull/42/merge",
                     github.url)  # fmt: skip
    code, log = _run(env)
    assert code == 2
    assert "::error title=evalgate::" in log and "unknown benchmark 'nope'" in log
    assert "unknown benchmark 'nope'" in (ws.tmp / "summary").read_text()


def test_entrypoint_runs_as_the_container_would(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    """The Dockerfile's ENTRYPOINT (python -m evalgate action), as a process with that env."""
    _store_baseline(ws, github)
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    env = ws.environ("pull_request", _pr_event(pr_event, ws, head), head, "refs/pull/42/merge",
                     github.url)  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "evalgate", "action"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "evalgate: PASS" in github.bodies(REPO, PR)[0]
    assert "Traceback" not in proc.stderr


# -- the base branch's policy: a PR cannot dodge it --------------------------------------------

GATED = "margin: 0.05, thresholds: {qa: {accuracy: 0.9}}"


def _pr_env(ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any], head: str,
            **inputs: str) -> dict[str, str]:  # fmt: skip
    return ws.environ("pull_request", _pr_event(pr_event, ws, head), head, "refs/pull/42/merge",
                      github.url, **inputs)  # fmt: skip


def test_notices_reach_the_comment_the_scorecard_and_the_summary_once(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    # The PR changes its gate policy, and nothing is stored for its merge-base.
    ws.trust_inputs()
    head = ws.pr(_evals(ws.url, gate="margin: 0.2"))
    code, log = _run(_pr_env(ws, github, pr_event, head, baseline="stored"))
    assert code == 0, log
    policy = "**Policy:** the base branch's policy ("
    missing = f"no stored baseline at {ws.base[:12]}"
    (body,) = github.bodies(REPO, PR)
    scorecard = (ws.ws / "evalgate-outputs" / "scorecard.md").read_text()
    summary = (ws.tmp / "summary").read_text()
    for text in (body, scorecard, summary):
        assert text.count(policy) == 1 and text.count(missing) == 1, text


def test_a_degraded_comment_is_tried_once_and_noticed_once(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    forbidden = {"message": "Resource not accessible by integration"}
    github.faults.append(Fault("POST", 403, body=forbidden, times=10))
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    code, log = _run(_pr_env(ws, github, pr_event, head, results_store="none"))
    assert code == 0, log
    assert len(github.requests("POST")) == 1  # the final scorecard is not tried again
    notice = "could not comment on pull request #42"
    assert (ws.tmp / "summary").read_text().count(notice) == 1
    assert (ws.ws / "evalgate-outputs" / "scorecard.md").read_text().count(notice) == 1
    assert log.count(f"::notice::evalgate {notice}") == 1


@pytest.mark.parametrize("mode", ["run", "publish"])
def test_an_empty_token_skips_the_comment_with_a_notice(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any], mode: str
) -> None:
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    if mode == "run":  # a fork's PR: `github_token: ${{ secrets.BOT_TOKEN }}` arrives empty
        env = _pr_env(ws, github, pr_event, head, results_store="none", github_token="")
        scorecard = ws.ws / "evalgate-outputs" / "scorecard.md"
    else:
        scorecard = _downloaded_artifact(ws)
        env = ws.environ("workflow_run", _workflow_run_event(ws), ws.base, "refs/heads/main",
                         github.url, mode="publish", results_dir="downloaded",
                         github_token="")  # fmt: skip
    code, log = _run(env)
    assert code == 0, log  # publish: posted to the summary; the artifact's FAIL is not its own
    assert github.requests() == []
    notice = "the github_token input is empty"
    assert (ws.tmp / "summary").read_text().count(notice) == 1
    assert log.count(notice) == 1
    if mode == "run":
        assert scorecard.read_text().count(notice) == 1


def _downloaded_artifact(ws: Workspace) -> Path:
    results = ws.ws / "downloaded"
    results.mkdir()
    (results / "scorecard.md").write_text("## ❌ evalgate: FAIL\n\nfrom the artifact\n")
    (results / "verdict.json").write_text(json.dumps({"status": "FAIL", "exit_code": 1}))
    return results / "scorecard.md"


def _workflow_run_event(ws: Workspace) -> dict[str, Any]:
    return {"workflow_run": {"head_sha": "a" * 40, "event": "pull_request",
                             "pull_requests": [{"number": PR, "head": {"sha": "a" * 40},
                                                "base": {"sha": ws.base, "ref": "main"}}]},
            "repository": {"full_name": REPO, "default_branch": "main"}}  # fmt: skip


def test_output_paths_are_relative_to_the_workspace(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    """In a container the workspace is /github/workspace, a path no later host step can open:
    outputs name files relative to the workspace, as the steps after see it."""
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    code, log = _run(_pr_env(ws, github, pr_event, head, results_store="none", comment="false"))
    assert code == 0, log
    outputs = ws.outputs()
    assert outputs["scorecard"] == "evalgate-outputs/scorecard.md"
    assert outputs["results_dir"] == "evalgate-outputs"
    assert (ws.ws / outputs["scorecard"]).is_file()

    _downloaded_artifact(ws)
    env = ws.environ("workflow_run", _workflow_run_event(ws), ws.base, "refs/heads/main",
                     github.url, mode="publish", results_dir="downloaded")  # fmt: skip
    _run(env)
    assert ws.outputs()["scorecard"] == "downloaded/scorecard.md"


# -- as GitHub runs a docker action: root, on a checkout owned by the runner's user ------------

RUNNER = 1001  # the uid of GitHub's hosted runner user


def _as_runner(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "LC_ALL": "C"}
    cmd = ["setpriv", f"--reuid={RUNNER}", f"--regid={RUNNER}", "--clear-groups", *argv]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)


def _root_owned(tree: Path) -> list[str]:
    found = [tree] if tree.lstat().st_uid == 0 else []
    for root, dirs, files in os.walk(tree):
        for name in dirs + files:
            if (Path(root) / name).lstat().st_uid == 0:
                found.append(Path(root) / name)
    return [str(p.relative_to(tree)) for p in found]


@pytest.fixture
def runner_tmp() -> Iterator[Path]:
    """A folder the runner's uid can reach (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="evalgate-runner-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to act as the runner's user",
)
def test_leaves_no_root_owned_file_in_the_runners_checkout(
    runner_tmp: Path, scripted_server: Any, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    ws = Workspace(runner_tmp, scripted_server(_script).base_url)
    ws.trust_inputs()

    def chown(uid: int) -> None:
        subprocess.run(["chown", "-R", f"{uid}:{uid}", str(runner_tmp)], check=True)

    def checkout() -> None:  # what actions/checkout, running as the runner's user, leaves
        chown(RUNNER)

    checkout()
    env = ws.environ("push", _push_event(ws), ws.base, "refs/heads/main", github.url)
    code, log = _run(env)  # the default git-branch store: fetch, write objects, push
    assert code == 0, log
    assert _root_owned(ws.ws) == []

    chown(0)  # a developer pushes a PR (the test's own git runs as root)
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    checkout()
    for baseline in ("stored", "rerun"):  # the store's cache; a worktree of the base commit
        code, log = _run(_pr_env(ws, github, pr_event, head, baseline=baseline))
        assert code == 0, log
        assert _root_owned(ws.ws) == []
        # The Action's own git read the checkout too: the base branch's policy, the baseline.
        summary = (ws.tmp / "summary").read_text()
        assert "the base branch has no" not in summary
        assert f"commit `{ws.base[:12]}`" in summary, summary

    for argv in (["git", "fetch", "origin"], ["git", "clean", "-ffdx"]):
        proc = _as_runner(ws.ws, *argv)
        assert proc.returncode == 0, f"{argv}: {proc.stderr}"
    assert not (ws.ws / "evalgate-outputs").exists()


def test_a_comment_failure_overcome_later_leaves_no_notice(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    """The "in progress" comment is refused once; the scorecard then posts: nothing to notice."""
    invalid = {"message": "Validation Failed", "documentation_url": "https://docs.github.com"}
    github.faults.append(Fault("POST", 422, body=invalid, times=1))
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    code, log = _run(_pr_env(ws, github, pr_event, head, results_store="none"))
    assert code == 0, log
    assert "::warning::evalgate: could not comment: " in log  # said when it happened
    (body,) = github.bodies(REPO, PR)
    for text in (body, (ws.tmp / "summary").read_text(),
                 (ws.ws / "evalgate-outputs" / "scorecard.md").read_text()):  # fmt: skip
        assert "evalgate: PASS" in text and "**Note:**" not in text


def test_notices_go_under_the_title_once_each() -> None:
    from evalgate.action.publisher import Notices, with_notices

    notices = Notices()
    assert (
        with_notices("## ✅ evalgate: PASS\n\nbody\n", notices) == "## ✅ evalgate: PASS\n\nbody\n"
    )
    assert notices.append("first") and notices.append("failed", key="comment")
    assert not notices.append("first") and not notices.append("again", key="comment")
    text = with_notices("## ✅ evalgate: PASS\n\nbody\n", notices)
    assert text == (
        "## ✅ evalgate: PASS\n\n> **Note:** first\n\n> **Note:** failed\n\nbody\n"
    )  # near the top: a scorecard cut to fit a comment keeps them
    notices.discard("comment")
    assert with_notices("untitled\n", notices) == "> **Note:** first\n\nuntitled\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create files another uid owns")
def test_ownership_goes_back_to_each_folders_owner_and_only_what_the_run_made(
    runner_tmp: Path,
) -> None:
    from evalgate.action.workspace import restoring_ownership

    ws, home, mine = runner_tmp / "ws", runner_tmp / "home", runner_tmp / "root-owned"
    for folder in (ws, home, mine):
        folder.mkdir()
    subprocess.run(["chown", f"{RUNNER}:{RUNNER}", str(ws), str(home)], check=True)
    (ws / "before").write_text("root's before the run\n")
    with restoring_ownership(ws, home, mine, None):
        (ws / "out" / "deep").mkdir(parents=True)
        (ws / "out" / "deep" / "file").write_text("x\n")
        (ws / "link").symlink_to("/etc/hostname")
        (home / ".cache").mkdir()
        (mine / "new").write_text("in a folder root owns: left alone\n")
    owners = {p: p.lstat().st_uid for p in [*ws.rglob("*"), *home.rglob("*"), *mine.rglob("*")]}
    assert owners.pop(ws / "before") == 0 and owners.pop(mine / "new") == 0
    assert set(owners.values()) == {RUNNER}, owners
    assert Path("/etc/hostname").stat().st_uid == 0  # a link is changed, never its target


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown a checkout to another uid")
def test_the_actions_git_fetches_a_missing_base_commit_as_root(runner_tmp: Path) -> None:
    """actions/checkout's default depth-1 checkout lacks the base commit: the Action fetches it,
    as root, from a remote (a local folder here) that belongs to the runner's user."""
    from evalgate.action import git as gitops

    origin, seed = runner_tmp / "origin.git", runner_tmp / "seed"
    _git(runner_tmp, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(runner_tmp, "clone", "-q", str(origin), str(seed))
    shas = []
    for text in ("gate: {margin: 0.05}\n", "gate: {margin: 0.5}\n"):
        (seed / "evals.yaml").write_text(text)
        _git(seed, "add", "-A")
        _git(seed, "commit", "-q", "-m", text)
        shas.append(_git(seed, "rev-parse", "HEAD"))
    _git(seed, "push", "-q", "origin", "main")
    ws = runner_tmp / "ws"
    _git(runner_tmp, "clone", "-q", "--depth=1", origin.as_uri(), str(ws))
    subprocess.run(["chown", "-R", f"{RUNNER}:{RUNNER}", str(runner_tmp)], check=True)

    base, head = shas
    assert gitops.show_file(ws, base, "evals.yaml") == "gate: {margin: 0.05}\n"
    assert gitops.merge_base(ws, base, head) == base


def test_path_outputs_become_workspace_relative_others_stay() -> None:
    from evalgate.action.publisher import portable

    ws = Path("/github/workspace")
    outputs = {
        "scorecard": "/github/workspace/sub/out/scorecard.md",
        "results_dir": ws / "out",
        "crash_log": "/tmp/elsewhere/crash.log",  # outside the workspace: stays absolute
        "summary": "/github/workspace/x",  # not a path output
        "verdict": "PASS",
    }
    assert portable(outputs, ws) == {
        "scorecard": "sub/out/scorecard.md",
        "results_dir": "out",
        "crash_log": "/tmp/elsewhere/crash.log",
        "summary": "/github/workspace/x",
        "verdict": "PASS",
    }


def test_fetching_a_missing_commit_keeps_a_full_clone_full(tmp_path: Path) -> None:
    """The base moved on after the checkout: the Action fetches it, and the clone stays whole
    (a --depth fetch would have made it shallow for every later step of the job)."""
    from evalgate.action import git as gitops

    origin, seed, ws = tmp_path / "origin.git", tmp_path / "seed", tmp_path / "ws"
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(tmp_path, "clone", "-q", str(origin), str(seed))
    (seed / "evals.yaml").write_text("v0\n")
    _git(seed, "add", "-A")
    for i in range(60):  # more history than the Action's fetch depth of 50
        _git(seed, "commit", "-q", "--allow-empty", "-m", f"v{i}")
    _git(seed, "push", "-q", "origin", "main")
    _git(tmp_path, "clone", "-q", origin.as_uri(), str(ws))
    (seed / "evals.yaml").write_text("later\n")
    _git(seed, "commit", "-q", "-am", "later")
    _git(seed, "push", "-q", "origin", "main")

    assert gitops.show_file(ws, _git(seed, "rev-parse", "HEAD"), "evals.yaml") == "later\n"
    assert _git(ws, "rev-parse", "--is-shallow-repository") == "false"


def _bench(name: str, system: str = "Answer.") -> str:
    return f'  - {{name: {name}, kind: jsonl, path: qa.jsonl, system_prompt: "{system}"}}\n'


@pytest.mark.parametrize(
    "pr_benchmarks",
    [
        # renamed: same data, a name the base's threshold and baseline do not know
        _bench("qa-renamed", "Please regress."),
        # removed: only the other benchmark is left, unchanged (it alone would PASS)
        _bench("other"),
    ],
    ids=["renamed", "removed"],
)
def test_dropping_or_renaming_a_gated_benchmark_fails(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any], pr_benchmarks: str
) -> None:
    models = f'models:\n  - {{name: m, backend: openai, base_url: "{ws.url}", model: org/m}}\n'
    base = models + "benchmarks:\n" + _bench("qa") + _bench("other") + f"gate: {{{GATED}}}\n"
    ws.base = ws.commit(base, "main")
    _git(ws.ws, "push", "-q", "origin", "main")
    head = ws.pr(models + "benchmarks:\n" + pr_benchmarks + "gate: {margin: 0.5}\n")
    code, log = _run(_pr_env(ws, github, pr_event, head, results_store="none"))
    assert code == 1, log
    (body,) = github.bodies(REPO, PR)
    assert "evalgate: FAIL" in body
    assert "qa: removed by this PR; base policy requires it" in body
    assert "was applied, except result store none (the workflow's `results_store` input)" in body
    assert ws.outputs()["verdict"] == "FAIL" and ws.outputs()["exit_code"] == "1"
    verdict = json.loads((ws.ws / "evalgate-outputs" / "verdict.json").read_text())
    assert verdict["status"] == "FAIL"
    assert any(c["kind"] == "policy" and c["benchmark"] == "qa" for c in verdict["checks"])


def test_a_scorer_change_cannot_pass(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    base_bench = '{name: qa, kind: jsonl, path: qa.jsonl, system_prompt: "Answer."}'
    loose = base_bench.replace("}", ", scorer: {type: contains}}")
    head = ws.pr(_evals(ws.url).replace(base_bench, loose))
    code, log = _run(_pr_env(ws, github, pr_event, head, results_store="none"))
    (body,) = github.bodies(REPO, PR)
    # Not an error: the run is scored by the base's scorer, and the comment says so first.
    first = body.split("\n\n")[1]
    scorer = '`scorer` `{"type": "exact"}` → `{"type": "contains"}`'
    assert f"this PR changes the exam (qa: {scorer}): the gate used the base branch's exam" in first
    run_config = next((ws.ws / "evalgate-outputs" / "evals").rglob("run_config.json"))
    assert json.loads(run_config.read_text())["benchmark"]["scorer"]["type"] == "exact"
    assert code == 0, log


def test_an_unreadable_base_policy_is_an_error_not_the_prs_policy(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    head = ws.pr(_evals(ws.url, system="Please regress.", gate="margin: 0.9"))
    event = _pr_event(pr_event, ws, head)
    event["pull_request"]["base"]["sha"] = "0123456789abcdef" * 2 + "01234567"  # not fetchable
    env = ws.environ("pull_request", event, head, "refs/pull/42/merge", github.url)
    code, log = _run(env)
    assert code == 3, log
    assert ws.outputs()["verdict"] == "ERROR" and ws.outputs()["exit_code"] == "3"
    (body,) = github.bodies(REPO, PR)
    assert "could not finish" in body and "fails closed" in body
    assert "in progress" not in body


def test_first_adoption_runs_on_the_prs_policy_and_says_so(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    (ws.ws / "evals.yaml").unlink()
    ws.base = ws.commit_removal()
    head = ws.pr(_evals(ws.url))
    code, log = _run(_pr_env(ws, github, pr_event, head, results_store="none"))  # baseline: auto
    assert code == 0, log
    (body,) = github.bodies(REPO, PR)
    assert "the base branch has no evals.yaml (first adoption)" in body
    assert "base branch's policy (" not in body


# -- crashes never look like verdicts ----------------------------------------------------------


def test_a_crash_exits_4_with_a_crash_log_and_replaces_the_comment(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    def broken_server(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError(f"a bug next to the token {TOKEN}")

    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    out = io.StringIO()
    code = run_action(_pr_env(ws, github, pr_event, head, results_store="none"),
                      out=out, server_factory=broken_server)  # fmt: skip
    assert code == 4
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("evalgate:")]
    assert len(lines) == 1 and "internal error (ZeroDivisionError" in lines[0]
    assert "Traceback" not in err and TOKEN not in err
    crash = ws.ws / "evalgate-outputs" / "crash.log"
    log = crash.read_text()
    assert "Traceback" in log and "broken_server" in log and TOKEN not in log
    (body,) = github.bodies(REPO, PR)  # "in progress" replaced by the crash
    assert "evalgate crashed" in body and "in progress" not in body and TOKEN not in body
    outputs = ws.outputs()
    assert outputs["verdict"] == "ERROR" and outputs["exit_code"] == "4"
    assert outputs["crash_log"] == "evalgate-outputs/crash.log"  # workspace-relative, as every path


def test_an_error_after_the_scorecard_still_reports_it_complete(
    ws: Workspace, github: FakeGitHub, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store's folder should be")
    env = ws.environ("push", _push_event(ws), ws.base, "refs/heads/main", github.url,
                     results_store=f"local:{blocker}/store")  # fmt: skip
    code, log = _run(env)
    assert code in (3, 4), log
    outputs = ws.outputs()
    assert outputs["verdict"] == "ERROR" and outputs["exit_code"] == str(code)
    assert outputs["scorecard"].endswith("scorecard.md") and "m/qa" in outputs["summary"]
    summary = (ws.tmp / "summary").read_text()
    assert "could not finish" in summary or "crashed" in summary
    assert "### Scores" in summary  # the complete scorecard, not only the error


@pytest.mark.parametrize(
    ("file", "text", "where"),
    [
        ("run_config.json", "[]", "run_config.json: not a JSON object"),  # not a run config
        ("results.jsonl", "[1, 2]\n", "results.jsonl:1: not a JSON object"),
        ("results.jsonl", '{"rollout": 0}\n', "results.jsonl:1: example_id"),
    ],
)
def test_a_corrupt_stored_baseline_is_one_line(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any], tmp_path: Path,
    capfd: pytest.CaptureFixture[str], file: str, text: str, where: str,
) -> None:  # fmt: skip
    """The stored baseline goes through the run directory's one loader, as `--baseline` does."""
    ws.trust_inputs()
    store = tmp_path / "store"
    env = ws.environ("push", _push_event(ws), ws.base, "refs/heads/main", github.url,
                     results_store=f"local:{store}")  # fmt: skip
    assert _run(env)[0] == 0
    (damaged,) = store.rglob(file)
    damaged.write_text(text)
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    code, _ = _run(_pr_env(ws, github, pr_event, head, results_store=f"local:{store}"))
    err = capfd.readouterr().err
    assert code == 3
    assert "Traceback" not in err and "is corrupt" in err and "delete it" in err
    assert where in err


def test_a_cancelled_run_replaces_the_comment_and_says_so(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    def cancelled(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt  # what SIGTERM becomes in the CLI

    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    with pytest.raises(KeyboardInterrupt):
        run_action(_pr_env(ws, github, pr_event, head, results_store="none"),
                   out=io.StringIO(), server_factory=cancelled)  # fmt: skip
    (body,) = github.bodies(REPO, PR)
    assert "evalgate was cancelled" in body and "in progress" not in body
    assert ws.outputs()["exit_code"] == "130" and ws.outputs()["verdict"] == "ERROR"


def test_unreadable_inputs_still_write_the_exit_code(ws: Workspace, github: FakeGitHub) -> None:
    env = ws.environ("push", _push_event(ws), ws.base, "refs/heads/main", github.url,
                     mode="bogus")  # fmt: skip
    code, log = _run(env)
    assert code == 2, log
    assert ws.outputs() == {"verdict": "ERROR", "exit_code": "2"}
    assert "input mode" in (ws.tmp / "summary").read_text()


def test_workflow_overrides_apply_to_the_base_policy_as_well(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    # A candidate override in the workflow changes the measurement on both sides alike: no
    # "changed by this PR". (One on an exam field, eval.rollouts say, is a FAIL: test_exam_routes.)
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    env = _pr_env(ws, github, pr_event, head, results_store="none",
                  overrides="sampling.max_tokens=64")  # fmt: skip
    code, log = _run(env)
    assert code == 0, log
    (body,) = github.bodies(REPO, PR)
    assert "cannot PASS" not in body and "evalgate: PASS" in body


def test_a_personal_token_keeps_updating_its_own_comment(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    github.poster = "mona"  # github_token is mona's PAT, comment_author left at its default
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    code, log = _run(_pr_env(ws, github, pr_event, head, results_store="none"))
    assert code == 0, log
    (body,) = github.bodies(REPO, PR)  # "in progress" (by mona) was rewritten, not duplicated
    assert "evalgate: PASS" in body
    assert "set the input `comment_author: mona`" in (ws.tmp / "summary").read_text()


def test_pr_cannot_raise_the_base_branchs_budget(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    """The base's budget caps are a ceiling: a PR that lifts them runs under the base's, and
    the scorecard says which cap it tried to raise."""
    base = ws.commit(_evals(ws.url) + "budget: {tokens: 100}\n", "main")
    _git(ws.ws, "push", "-q", "origin", "main")
    ws.base = base
    head = ws.pr(_evals(ws.url) + "budget: {tokens: 1000000}\n")
    code, log = _run(_pr_env(ws, github, pr_event, head, baseline="none"))
    assert code == 3, log  # stopped by the base's 100-token cap, not the PR's million
    verdict = json.loads((ws.ws / "evalgate-outputs" / "verdict.json").read_text())
    assert "budget: tokens 100 reached" in json.dumps(verdict)
    assert "tokens 1,000,000 > 100" in (ws.tmp / "summary").read_text()


def test_a_rate_limit_it_cannot_wait_out_stops_all_writes_for_the_run(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    """GitHub asks to wait an hour: writing again seconds later (the final scorecard) is what
    its secondary limits punish, so the run writes nothing more and says so once."""
    limited = {"message": "You have exceeded a secondary rate limit."}
    github.faults.append(Fault("POST", 403, limited, {"retry-after": "3600"}, times=50))
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    code, log = _run(_pr_env(ws, github, pr_event, head, results_store="none"))
    assert code == 0, log
    writes = [r for r in github.requests() if r.method in ("POST", "PATCH", "PUT", "DELETE")]
    assert len(writes) == 1, writes  # the "in progress" comment only, never tried again
    summary = (ws.tmp / "summary").read_text()
    assert summary.count("refused the PR comment") == 1, summary


def test_the_policy_note_goes_under_the_title_not_after_the_footer(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    code, log = _run(_pr_env(ws, github, pr_event, head, results_store="none"))
    assert code == 0, log
    (body,) = github.bodies(REPO, PR)
    scorecard = (ws.ws / "evalgate-outputs" / "scorecard.md").read_text()
    for text in (body, scorecard, (ws.tmp / "summary").read_text()):
        policy = text.index("> **Policy:**")
        assert policy < text.index("<sub>evalgate "), text  # above the footer
        assert text.index("## ") < policy < text.index("###"), text  # under the title


def test_a_baseline_stored_by_another_scoring_version_is_evaluated_again(
    ws: Workspace, github: FakeGitHub, pr_event: dict[str, Any], tmp_path: Path
) -> None:
    """After an evalgate upgrade that changes how items are scored or identified, a stored
    baseline cannot pair with the PR's run; `baseline: auto` evaluates the merge-base again
    instead of failing every PR until the default branch stores a new one."""
    ws.trust_inputs()
    store = tmp_path / "store"
    env = ws.environ("push", _push_event(ws), ws.base, "refs/heads/main", github.url,
                     results_store=f"local:{store}")  # fmt: skip
    assert _run(env)[0] == 0
    (config,) = store.rglob("run_config.json")
    recorded = json.loads(config.read_text())
    recorded["fingerprint"]["measurement"]["scoring_version"] = 0
    config.write_text(json.dumps(recorded))
    head = ws.pr(_evals(ws.url, system="Answer briefly."))
    code, log = _run(_pr_env(ws, github, pr_event, head, results_store=f"local:{store}"))
    assert code == 0, log
    assert "running the baseline at" in log
    verdict = json.loads((ws.ws / "evalgate-outputs" / "verdict.json").read_text())
    assert verdict["comparisons"] and all(c["comparable"] for c in verdict["comparisons"])
