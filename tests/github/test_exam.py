"""The PR brings the candidate; the base branch sets the exam (issue 22's table, row by row).

Each test is a pull request an adversarial author would write: the Action runs on a local origin
holding a base commit and the PR's commit, and must end FAIL or ERROR, with the reason in the
comment's first lines. An unchanged PR still PASSes, at the same cost.
"""

from __future__ import annotations

import io
import json
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
from fake_github import FakeGitHub
from test_action import PR, REPO, Workspace, _git, _pr_event

from evalgate.action import run_action

ROOT = Path(__file__).resolve().parents[2]


def _script(body: dict[str, Any], n: int) -> Any:
    """Right on every item, unless the system prompt asks to regress (wrong on even items) or to
    error (a 500 on even items)."""
    i = int(body["messages"][-1]["content"].strip().removeprefix("Q"))
    system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
    if "error" in system and i % 2 == 0:
        return (500, "overloaded", {})
    return "wrong" if "regress" in system and i % 2 == 0 else f"A{i}"


THRESHOLD = "margin: 0.05, thresholds: {qa: {accuracy: 0.9}}"


def _evals(url: str, system: str = "Answer.", extra: str = "", model: str = "",
           gate: str = THRESHOLD) -> str:  # fmt: skip
    return f"""
models:
  - {{name: m, backend: openai, base_url: "{url}", model: org/m{model}}}
benchmarks:
  - {{name: qa, kind: jsonl, path: qa.jsonl, system_prompt: "{system}"}}
gate: {{{gate}}}
eval: {{max_retries: 1, request_timeout_s: 10}}
{extra}"""


class Exam(Workspace):
    """A workspace whose PR commits may change any file, not only evals.yaml."""

    def __init__(self, tmp: Path, url: str, base_evals: str) -> None:
        super().__init__(tmp, url)
        self.base = self.commit(base_evals, "main")
        _git(self.ws, "push", "-q", "origin", "main")

    def pr_files(self, evals: str, files: dict[str, str | Path] | None = None) -> str:
        """Commit the PR: evals.yaml and ``files`` (text, or a Path: a symlink to it)."""
        _git(self.ws, "checkout", "-q", "-B", "feature", self.base)
        for name, content in (files or {}).items():
            path = self.ws / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                path.symlink_to(content)
            else:
                path.write_text(content)
        head = self.commit(evals, "feature")
        _git(self.ws, "push", "-q", "-f", "origin", "feature")
        return head

    def rows(self, answer: Any = None, prompt: Any = None) -> str:
        answer = answer or (lambda i: f"A{i}")
        prompt = prompt or (lambda i: f"Q{i}")
        rows = [{"id": f"q{i:02d}", "prompt": prompt(i), "answer": answer(i)} for i in range(60)]
        return "\n".join(json.dumps(r) for r in rows) + "\n"


@pytest.fixture
def model(scripted_server: Any) -> Any:
    return scripted_server(_script)


@pytest.fixture
def exam(tmp_path: Path, model: Any) -> Exam:
    return Exam(tmp_path, model.base_url, _evals(model.base_url))


def _run_pr(exam: Exam, github: FakeGitHub, pr_event: dict[str, Any], head: str) -> tuple[int, str]:
    env = exam.environ("pull_request", _pr_event(pr_event, exam, head), head,
                       "refs/pull/42/merge", github.url, results_store="none")  # fmt: skip
    out = io.StringIO()
    code = run_action(env, out=out)
    return code, out.getvalue()


def _head_lines(github: FakeGitHub, n: int = 4) -> str:
    (body,) = github.bodies(REPO, PR)
    return "\n".join(body.splitlines()[:n])


def test_an_unchanged_pr_passes_at_the_same_cost(
    exam: Exam, model: Any, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    head = exam.pr_files(_evals(exam.url, system="Answer briefly."))
    code, log = _run_pr(exam, github, pr_event, head)
    assert code == 0, log
    assert "evalgate: PASS" in _head_lines(github)
    assert "changes the exam" not in github.bodies(REPO, PR)[0]
    assert len(model.requests) == 2 * 60  # the baseline's re-run and the PR's: nothing more


def test_answers_edited_in_the_data_file_are_scored_with_the_bases(
    exam: Exam, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    # The model regresses on the even items; the PR "fixes" their answers to what it says.
    data = exam.rows(answer=lambda i: "wrong" if i % 2 == 0 else f"A{i}")
    head = exam.pr_files(_evals(exam.url, system="Please regress."), {"qa.jsonl": data})
    code, log = _run_pr(exam, github, pr_event, head)
    assert code == 1, log
    first = _head_lines(github)
    assert "evalgate: FAIL" in first
    assert "this PR changes the exam (qa: the files of path (qa.jsonl))" in first
    assert "the gate used the base branch's exam" in first


def test_whitespace_added_to_every_prompt_stays_paired_with_the_bases_items(
    exam: Exam, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    # Gated on the baseline alone (no threshold): only the pairing with the base's items decides.
    exam.base = exam.commit(_evals(exam.url, gate="margin: 0.05"), "main")
    _git(exam.ws, "push", "-q", "origin", "main")
    data = exam.rows(prompt=lambda i: f"Q{i} ")
    evals = _evals(exam.url, system="Please regress.", gate="margin: 0.05")
    head = exam.pr_files(evals, {"qa.jsonl": data})
    code, log = _run_pr(exam, github, pr_event, head)
    assert code == 1, log
    assert "evalgate: FAIL" in _head_lines(github)
    assert "30 regressed" in github.bodies(REPO, PR)[0]


def test_a_looser_error_budget_is_the_bases(
    exam: Exam, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    # The model errors on every item it would fail; the PR tolerates 90 % errors, no retries.
    evals = _evals(exam.url, system="Please error.").replace(
        "eval: {max_retries: 1, request_timeout_s: 10}",
        "eval: {max_retries: 0, max_error_rate: 0.9, request_timeout_s: 10}",
    )
    head = exam.pr_files(evals)
    code, log = _run_pr(exam, github, pr_event, head)
    assert code == 3, log  # base's 5 % error budget: an infrastructure error, never a PASS
    body = github.bodies(REPO, PR)[0]
    assert "ERROR" in _head_lines(github, 2) or "could not finish" in _head_lines(github, 2)
    changed = "`eval.max_error_rate` `0.05` → `0.9`, `eval.max_retries` `1` → `0`"
    assert f"this PR changes the exam (qa: {changed})" in body


@pytest.mark.parametrize(
    "model_yaml",
    [
        # the job's own token, to an endpoint the PR chose
        ", api_key_env: INPUT_GITHUB_TOKEN",
        # a secret the base never sends anywhere, to the base's own host
        ", api_key_env: EXTRA_SECRET",
    ],
    ids=["job-token-to-new-host", "new-secret-to-old-host"],
)
def test_a_secret_goes_only_where_the_base_sends_it(
    exam: Exam, model: Any, scripted_server: Any, github: FakeGitHub, pr_event: dict[str, Any],
    model_yaml: str,
) -> None:  # fmt: skip
    thief = scripted_server(_script)
    url = thief.base_url if "INPUT_GITHUB_TOKEN" in model_yaml else exam.url
    head = exam.pr_files(_evals(url, model=model_yaml))
    env = exam.environ("pull_request", _pr_event(pr_event, exam, head), head,
                       "refs/pull/42/merge", github.url, results_store="none")  # fmt: skip
    env["EXTRA_SECRET"] = "s3cr3t-value-never-sent"
    code = run_action(env, out=io.StringIO())
    assert code == 2
    first = _head_lines(github)
    assert "api_key_env: " in first and "refused" in first
    assert thief.requests == [] and model.requests == []  # nothing was sent anywhere


def test_an_old_secret_to_a_new_host_is_refused(
    tmp_path: Path, model: Any, scripted_server: Any, github: FakeGitHub,
    pr_event: dict[str, Any],
) -> None:  # fmt: skip
    base = _evals(model.base_url, model=", api_key_env: PROVIDER_KEY")
    exam = Exam(tmp_path, model.base_url, base)
    thief = scripted_server(_script)
    head = exam.pr_files(base.replace(model.base_url, thief.base_url))
    env = exam.environ("pull_request", _pr_event(pr_event, exam, head), head,
                       "refs/pull/42/merge", github.url, results_store="none")  # fmt: skip
    env["PROVIDER_KEY"] = "provider-key-value"
    assert run_action(env, out=io.StringIO()) == 2
    assert "would send PROVIDER_KEY to http://127.0.0.1" in _head_lines(github)
    assert thief.requests == []


def _agent_pr(exam: Exam, variant: str, files: dict[str, str | Path] | None = None) -> str:
    shutil.copytree(ROOT / "benchmarks" / "agent-basics" / "hello-file",
                    exam.ws / "tasks" / "hello-file")  # fmt: skip
    agent = f"""  - name: ag
    kind: agent
    tasks: tasks
    variants: [{{name: v, {variant}}}]
"""
    evals = _evals(exam.url).replace("benchmarks:\n", "benchmarks:\n" + agent)
    return exam.pr_files(evals, files)


@pytest.mark.parametrize(
    ("variant", "link"),
    [
        ("skills_dir: /root/.ssh", None),
        ("mcp_config: /proc/self/environ", None),
        ("skills_dir: skills", Path("/root/.ssh")),
        ("mcp_config: mcp.json", Path("/proc/self/environ")),
    ],
    ids=["host-skills-dir", "host-mcp-config", "skills-symlink-out", "mcp-symlink-out"],
)
def test_paths_out_of_the_repository_are_refused(
    exam: Exam, model: Any, github: FakeGitHub, pr_event: dict[str, Any], variant: str,
    link: Path | None,
) -> None:  # fmt: skip
    files: dict[str, str | Path] = {}
    if link is not None:
        files[variant.split(": ")[1]] = link
    head = _agent_pr(exam, variant, files)
    code, log = _run_pr(exam, github, pr_event, head)
    assert code == 2, log
    first = _head_lines(github)
    assert "is outside the repository" in first, first
    assert model.requests == []


def test_publishing_and_sandbox_network_are_the_bases(
    exam: Exam, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    extra = "publish: {hf_hub: {repo: any/repo, private: false}}\n"
    head = exam.pr_files(_evals(exam.url, extra=extra))
    code, log = _run_pr(exam, github, pr_event, head)
    assert code == 0, log  # not an error: the base's exam ran, and the comment says so first
    hub = '`publish.hf_hub` `null` → `{"repo": "any/repo", "private": false}`'
    assert f"this PR changes the exam ({hub})" in _head_lines(github)
    assert "hf_hub" not in log  # nothing was pushed anywhere


# -- agent tasks: the sandbox is the base's ------------------------------------------------------

AGENT = r"""#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
cwd = args[args.index("-cwd") + 1] if "-cwd" in args else os.getcwd()
if "-lazy" not in args:
    with open(os.path.join(cwd, "hello.txt"), "w") as fh:
        fh.write("Hello, evalgate!\n")
"""


def _agent_evals(url: str, args: str, sandbox: str) -> str:
    return f"""
models:
  - {{name: m, backend: openai, base_url: "{url}", model: org/m}}
benchmarks:
  - name: ag
    kind: agent
    tasks: tasks
    agent: {{type: command, command: ["./agent.py"{args}]}}
    sandbox: {{{sandbox}}}
gate: {{margin: 0.05}}
"""


_BASE_SANDBOX = "timeout_s: 120, network: none"


def _agent_exam(tmp_path: Path, url: str) -> Exam:
    """A base commit with 24 agent tasks (one group each: enough to decide a regression) and a
    command agent that solves them unless run with -lazy."""
    exam = Exam.__new__(Exam)
    Workspace.__init__(exam, tmp_path, url)
    task = (ROOT / "benchmarks" / "agent-basics" / "hello-file" / "task.yaml").read_text()
    for i in range(24):
        folder = exam.ws / "tasks" / f"hello-{i:02d}"
        folder.mkdir(parents=True)
        (folder / "task.yaml").write_text(task.replace("group: files", f"group: g{i}"))
    agent = exam.ws / "agent.py"
    agent.write_text(AGENT)
    agent.chmod(agent.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    exam.base = exam.commit(_agent_evals(url, "", _BASE_SANDBOX), "main")
    _git(exam.ws, "push", "-q", "origin", "main")
    return exam


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="agent tasks run in bubblewrap")
def test_a_sandbox_change_is_the_bases_and_a_regression_fails(
    tmp_path: Path, model: Any, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    exam = _agent_exam(tmp_path, model.base_url)
    sandbox = "timeout_s: 121, network: none, verifier_network: true"
    head = exam.pr_files(_agent_evals(exam.url, ', "-lazy"', sandbox))
    code, log = _run_pr(exam, github, pr_event, head)
    assert code == 1, log
    first = _head_lines(github)
    assert "evalgate: FAIL" in first
    changed = "`sandbox.timeout_s` `120` → `121`, `sandbox.verifier_network` `false` → `true`"
    assert f"this PR changes the exam (ag: {changed})" in first


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="agent tasks run in bubblewrap")
def test_checks_edited_to_always_pass_are_the_bases(
    tmp_path: Path, model: Any, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    exam = _agent_exam(tmp_path, model.base_url)
    checks: dict[str, str | Path] = {}
    for folder in sorted((exam.ws / "tasks").iterdir()):
        text = (folder / "task.yaml").read_text()
        checks[f"tasks/{folder.name}/task.yaml"] = text.replace(
            "command: 'test -f", "command: 'true ||"
        )
    assert all("true ||" in t for t in checks.values() if isinstance(t, str))
    head = exam.pr_files(_agent_evals(exam.url, ', "-lazy"', _BASE_SANDBOX), checks)
    code, log = _run_pr(exam, github, pr_event, head)
    assert code == 1, log
    first = _head_lines(github)
    assert "evalgate: FAIL" in first
    assert "this PR changes the exam (ag: the files of tasks (tasks))" in first


@pytest.mark.parametrize("target", ["/proc/self/environ", ".ssh/id_ed25519"])
def test_a_symlink_out_of_a_task_folder_is_refused(
    exam: Exam, model: Any, github: FakeGitHub, pr_event: dict[str, Any], target: str
) -> None:
    secret = exam.tmp / target  # the job's HOME; /proc/self/environ stays absolute
    if not secret.exists():
        secret.parent.mkdir(parents=True, exist_ok=True)
        secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    head = _agent_pr(exam, "args: []", {"tasks/hello-file/tests/leak.txt": secret})
    code, log = _run_pr(exam, github, pr_event, head)
    assert code == 2, log
    first = _head_lines(github)
    assert "a symlink out of the task folder" in first, first
    assert not any("BEGIN OPENSSH" in json.dumps(r) for r in model.requests)


# -- publish mode: its outcome is what it did, never the artifact's claim ------------------------


@pytest.mark.parametrize("claimed", ["PASS", "FAIL"])
def test_publish_modes_exit_code_is_what_it_posted(
    exam: Exam, github: FakeGitHub, claimed: str
) -> None:
    from fake_github import Fault
    from test_action import _workflow_run_event

    results = exam.ws / "downloaded"
    results.mkdir()
    (results / "scorecard.md").write_text(f"## evalgate: {claimed}\n\nfrom the artifact\n")
    (results / "verdict.json").write_text(json.dumps({"status": claimed, "exit_code": 0}))
    forbidden = {"message": "Resource not accessible by integration"}
    github.faults.append(Fault("POST", 403, body=forbidden, times=10))
    env = exam.environ("workflow_run", _workflow_run_event(exam), exam.base, "refs/heads/main",
                       github.url, mode="publish", results_dir="downloaded")  # fmt: skip
    code = run_action(env, out=io.StringIO())
    assert code == 3  # nothing was posted: whatever the artifact says, this job did not publish
    outputs = exam.outputs()
    assert outputs["verdict"] == "ERROR" and outputs["reported_verdict"] == claimed
    summary = (exam.tmp / "summary").read_text()
    assert f"verdict as reported by the PR's job: {claimed}" in summary


# -- the merge-base is known, or the run is an error -----------------------------------------------


def test_a_merge_base_git_cannot_find_is_an_error_not_the_base_tip(exam: Exam) -> None:
    from evalgate.action import git as gitops
    from evalgate.errors import InfraError

    _git(exam.ws, "checkout", "-q", "--orphan", "unrelated")
    (exam.ws / "other.txt").write_text("no common history\n")
    _git(exam.ws, "add", "-A")
    _git(exam.ws, "commit", "-q", "-m", "unrelated")
    head = _git(exam.ws, "rev-parse", "HEAD")
    with pytest.raises(InfraError, match=r"shares no history|cannot find where"):
        gitops.merge_base(exam.ws, exam.base, head)
    with pytest.raises(InfraError, match="cannot find where this PR left the base branch"):
        gitops.merge_base(exam.ws, exam.base, "0123456789abcdef" * 2 + "01234567")
    assert gitops.merge_base(exam.ws, exam.base, exam.base) == exam.base


def test_local_hf_data_files_are_read_from_the_bases_tree(tmp_path: Path) -> None:
    from evalgate.action.exam import anchor_local_data, exam_changes, merge
    from evalgate.config.load import load_config

    evals = """
benchmarks:
  - {name: h, kind: hf, dataset: json, data_files: data/h.jsonl, split: train}
"""
    trees = {}
    for side, answer in (("base", "A"), ("pr", "B")):
        root = tmp_path / side
        (root / "data").mkdir(parents=True)
        (root / "data" / "h.jsonl").write_text(json.dumps({"prompt": "Q", "answer": answer}))
        (root / "evals.yaml").write_text(evals)
        trees[side] = anchor_local_data(load_config(root / "evals.yaml"), root)
    (bench,) = merge(trees["base"], trees["pr"]).benchmarks
    assert bench.data_files == str(tmp_path / "base" / "data" / "h.jsonl")
    changes = exam_changes(trees["base"], tmp_path / "base", trees["pr"], tmp_path / "pr")
    assert changes == ["h: the files of data_files (data/h.jsonl)"]


def _config(tmp_path: Path, name: str, models: str) -> Any:
    from evalgate.config.load import load_config

    (tmp_path / name).mkdir()
    path = tmp_path / name / "evals.yaml"
    path.write_text(f"models:\n{models}\nbenchmarks: [arith]\n")
    return load_config(path)


LITELLM = "  - {name: m, backend: litellm, model: openai/gpt-4o-mini, api_key_env: OPENAI_API_KEY"


@pytest.mark.parametrize(
    ("pr", "refused"),
    [
        (LITELLM + "}", None),
        (LITELLM + ", params: {temperature_hint: 1}}", None),
        (LITELLM + ', api_base: "http://127.0.0.1:9/v1"}', "OPENAI_API_KEY to http://127.0.0.1:9"),
        (LITELLM + ", params: {vertex_credentials: os.environ/GITHUB_TOKEN}}", "GITHUB_TOKEN"),
        (LITELLM.replace("OPENAI_API_KEY", "INPUT_GITHUB_TOKEN") + "}", "INPUT_GITHUB_TOKEN"),
        ("  - {name: m, backend: modal-vllm, model: org/m}", "HF_TOKEN to Modal"),
    ],
    ids=["same", "other-params", "new-api-base", "params-env", "renamed-key", "to-modal"],
)
def test_secret_routes_of_litellm_and_modal(tmp_path: Path, pr: str, refused: str | None) -> None:
    from evalgate.action.exam import check_secret_routes
    from evalgate.errors import ConfigError

    base, head = _config(tmp_path, "base", LITELLM + "}"), _config(tmp_path, "pr", pr)
    if refused is None:
        check_secret_routes(base, head, "evals.yaml")
        return
    with pytest.raises(ConfigError, match="refused") as err:
        check_secret_routes(base, head, "evals.yaml")
    assert refused in str(err.value) and "\n" not in str(err.value)


def test_the_jobs_own_token_is_never_a_models_key_even_on_first_adoption(
    exam: Exam, model: Any, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    (exam.ws / "evals.yaml").unlink()
    exam.base = exam.commit_removal()
    head = exam.pr_files(_evals(exam.url, model=", api_key_env: INPUT_GITHUB_TOKEN"))
    code, log = _run_pr(exam, github, pr_event, head)
    assert code == 2, log
    assert "INPUT_GITHUB_TOKEN is the job's own credential" in _head_lines(github)
    assert model.requests == []


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        ("  - {name: v, backend: vllm, model: org/m, chat_template: /etc/passwd}", "/etc/passwd"),
        ("  - {name: v, backend: vllm, model: org/m, chat_template: t.jinja}", None),
    ],
    ids=["host-template", "repo-template"],
)
def test_a_chat_template_outside_the_repository_is_refused(
    tmp_path: Path, line: str, refused: str | None
) -> None:
    from evalgate.action.exam import check_paths
    from evalgate.errors import ConfigError

    config = _config(tmp_path, "pr", line)
    root = config.path.parent
    (root / "t.jinja").write_text("{{ messages }}")
    if refused is None:
        check_paths(config, root, "evals.yaml")
        return
    with pytest.raises(ConfigError, match="is outside the repository") as err:
        check_paths(config, root, "evals.yaml")
    assert refused in str(err.value)
