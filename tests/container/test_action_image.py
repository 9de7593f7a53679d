"""The Action's image, run the way GitHub's runner runs a container action.

What the runner does (actions/runner, ContainerActionHandler + DockerCommandManager.DockerRun):
``docker run --rm --workdir /github/workspace`` with the runner's temp dir at
/github/runner_temp, its home at /github/home, the event at /github/workflow/event.json, the
file commands (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, ...) under /github/file_commands, the
checkout at /github/workspace, ``/var/run/docker.sock`` mounted, every input as INPUT_* (with
action.yml's defaults), ACTIONS_RUNTIME_TOKEN in the environment, and the job's network
(``--network host`` here: the local GitHub stand-in and git remote are on loopback). The
checkout belongs to the runner's user, uid 1001; the container runs as root.

The scenario, on the embedded model inside the container, with a HumanEval and an agent
benchmark (sandboxed through the runner's daemon, since bubblewrap cannot create namespaces under
Docker's default seccomp profile): a push to main stores the baseline in the default git-branch
store of the origin; a PR is evaluated against it twice, and its one sticky comment is created,
then updated, on a local GitHub stand-in held to GitHub's OpenAPI description. Afterwards the
runner's user can still ``git fetch`` and ``git clean -ffdx`` its checkout.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_github import TOKEN, FakeGitHub, load_spec, running_fake

from tests.container.conftest import ROOT, docker_socket
from tests.openapi_contract import load_openapi

pytestmark = pytest.mark.container

REPO = "octo-org/evals-demo"
PR = 7
RUNNER_UID = 1001
RUNTIME_TOKEN = "runtime-token-" + secrets.token_hex(8)  # must never reach a sandbox or a file

EVALS = """\
version: 1
models:
  - name: smollm2
    backend: local
    n_threads: 1               # llama.cpp's spinning threads starve on a shared 2-core machine
benchmarks:
  - name: arith
    eval: {num_examples: 8}
  - name: humaneval            # completions run sandboxed (backend: local in its definition)
    eval: {num_examples: 2}
    sampling: {max_tokens: 64}
  - name: sandbox-env          # an agent benchmark whose check inspects the sandbox itself
    kind: agent
    tasks: tasks
    agent: {max_turns: 1}
    sampling: {max_tokens: 32}
sampling: {temperature: 0.0, max_tokens: 24}
eval: {max_concurrent: 4}
"""

# Passes only where the runner's secrets and the host's loopback are out of reach: no
# ACTIONS_RUNTIME_TOKEN or job token in the sandbox's environment (by name, or by value: each
# value is spliced from two halves, so that the check's own text, which results.jsonl records,
# does not hold it), no route to the GitHub stand-in's port (the action's container shares the
# host's network; its sandboxes must not), not root.
CHECK = """\
a={runtime_a}; b={runtime_b}; c={token_a}; d={token_b}; \
! (env; cat /proc/1/environ) 2>/dev/null | tr '\\0' '\\n' \
  | grep -q -e "$a$b" -e "$c$d" -e ACTIONS_RUNTIME_TOKEN -e INPUT_GITHUB_TOKEN \
&& ! python3 -c 'import socket; socket.create_connection(("127.0.0.1", {port}), 3)' 2>/dev/null \
&& test "$(id -u)" != 0
"""


def _halves(secret: str) -> dict[str, str]:
    return {"a": secret[: len(secret) // 2], "b": secret[len(secret) // 2 :]}


@dataclass
class Run:
    code: int
    log: str
    outputs: dict[str, str]
    summary: str
    seconds: float


@dataclass
class Scenario:
    ws: Path
    origin: Path
    github: FakeGitHub
    push_outputs: Path
    runs: dict[str, Run] = field(default_factory=dict)


def _git(cwd: Path, *args: str, user: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.invalid",
           "GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.invalid"}  # fmt: skip
    argv = ["git", *args]
    if user is not None:  # as the runner's user, with a home of its own like the runner's
        env["HOME"] = str(cwd.parent / "runner-home")
        if os.geteuid() != user:
            argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)


def _chown(path: Path) -> None:
    """Give ``path`` to the runner's user (a no-op when this test runs as that user)."""
    if os.geteuid() != RUNNER_UID:
        subprocess.run(["chown", "-R", f"{RUNNER_UID}:{RUNNER_UID}", str(path)], check=True)


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"{proc.args}: {proc.stderr}"
    return proc.stdout.strip()


def _inputs(**given: str) -> dict[str, str]:
    """INPUT_* as the runner sets them: every input of action.yml, defaults filled in."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    values = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    values["github_token"] = TOKEN  # ${{ github.token }}
    values.update(given)
    return {f"INPUT_{name.upper()}": value for name, value in values.items()}


def _read_outputs(path: Path) -> dict[str, str]:
    out, lines, i = {}, path.read_text().splitlines(), 0
    while i < len(lines):  # name<<DELIM / value / DELIM, or name=value
        name, sep, delim = lines[i].partition("<<")
        if not sep:
            key, _, value = lines[i].partition("=")
            out[key], i = value, i + 1
            continue
        end = lines.index(delim, i + 1)
        out[name] = "\n".join(lines[i + 1 : end])
        i = end + 1
    return out


def run_action(
    docker: str, image: str, sc: Scenario, temp: Path, event_name: str, event: dict[str, Any],
    sha: str, ref: str, **inputs: str,
) -> Run:  # fmt: skip
    """One step: fresh file-command files and event, then `docker run` as the runner does."""
    for sub in ("_github_home", "_github_workflow", "_runner_file_commands"):
        (temp / sub).mkdir(parents=True, exist_ok=True)
    (temp / "_github_workflow" / "event.json").write_text(json.dumps(event))
    commands = {}
    for var, prefix in (("GITHUB_OUTPUT", "set_output"), ("GITHUB_STEP_SUMMARY", "step_summary"),
                        ("GITHUB_ENV", "set_env"), ("GITHUB_PATH", "add_path"),
                        ("GITHUB_STATE", "save_state")):  # fmt: skip
        name = f"{prefix}_{uuid.uuid4()}"
        (temp / "_runner_file_commands" / name).write_text("")
        commands[var] = f"/github/file_commands/{name}"
    _chown(temp)
    env = {
        "HOME": "/github/home", "GITHUB_WORKSPACE": "/github/workspace",
        "GITHUB_EVENT_PATH": "/github/workflow/event.json", "GITHUB_EVENT_NAME": event_name,
        "GITHUB_REPOSITORY": REPO, "GITHUB_REPOSITORY_OWNER": REPO.split("/")[0],
        "GITHUB_SHA": sha, "GITHUB_REF": ref, "GITHUB_WORKFLOW": "evalgate",
        "GITHUB_RUN_ID": "4242", "GITHUB_RUN_NUMBER": "1", "GITHUB_JOB": "evalgate",
        "GITHUB_ACTION": "__org_evalgate", "GITHUB_ACTOR": "octocat",
        "GITHUB_API_URL": sc.github.url, "GITHUB_SERVER_URL": "https://github.example",
        "RUNNER_OS": "Linux", "RUNNER_ARCH": "X64", "RUNNER_TEMP": "/github/runner_temp",
        "ACTIONS_RUNTIME_URL": "http://127.0.0.1:9/", "ACTIONS_RUNTIME_TOKEN": RUNTIME_TOKEN,
        **commands, **_inputs(**inputs),
    }  # fmt: skip
    if event_name == "pull_request":
        env |= {"GITHUB_BASE_REF": "main", "GITHUB_HEAD_REF": "feature"}
    argv = [docker, "run", "--name", f"evalgate-ct-{secrets.token_hex(4)}", "--rm",
            "--label", "evalgate-container-test", "--workdir", "/github/workspace"]  # fmt: skip
    for key in env:  # -e NAME: the value travels in the CLI's environment, as the runner does it
        argv += ["-e", key]
    argv += ["-e", "GITHUB_ACTIONS=true", "-e", "CI=true", "--network", "host"]
    argv += ["-v", f"{docker_socket()}:/var/run/docker.sock"]
    argv += ["-v", f"{temp}:/github/runner_temp", "-v", f"{temp}/_github_home:/github/home"]
    argv += ["-v", f"{temp}/_github_workflow:/github/workflow"]
    argv += ["-v", f"{temp}/_runner_file_commands:/github/file_commands"]
    argv += ["-v", f"{sc.ws}:/github/workspace", image]
    t0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env})
    seconds = time.monotonic() - t0
    files = temp / "_runner_file_commands"
    name = commands["GITHUB_OUTPUT"].rsplit("/", 1)[1]
    summary = commands["GITHUB_STEP_SUMMARY"].rsplit("/", 1)[1]
    return Run(
        code=done.returncode,
        log=done.stdout + done.stderr,
        outputs=_read_outputs(files / name),
        summary=(files / summary).read_text(),
        seconds=seconds,
    )


def _pr_event(head: str, base: str) -> dict[str, Any]:
    event = json.loads((ROOT / "tests/github/data/pull_request_event.json").read_text())
    event["number"] = event["pull_request"]["number"] = PR
    event["pull_request"]["head"].update(sha=head, ref="feature")
    event["pull_request"]["base"].update(sha=base, ref="main")
    for repo in (event["repository"], event["pull_request"]["head"]["repo"],
                 event["pull_request"]["base"]["repo"]):  # fmt: skip
        repo["full_name"] = REPO
    event["repository"]["default_branch"] = "main"
    return event


@pytest.fixture(scope="module")
def scenario(docker: str, image: str, git_remote: tuple[Path, str]) -> Iterator[Scenario]:
    if os.geteuid() not in (0, RUNNER_UID):
        pytest.skip(f"container test: needs root or uid {RUNNER_UID} (the runner's user)")
    origin, url = git_remote
    # Not pytest's tmp_path: its parents are private to root, and uid 1001 must reach the checkout.
    base_dir = Path(tempfile.mkdtemp(prefix="evalgate-ct-"))
    base_dir.chmod(0o755)
    spec = load_spec()
    with running_fake(load_openapi(spec), spec) as github:
        ws = base_dir / "repo"
        _ok(_git(base_dir, "clone", "-q", url, str(ws)))
        (ws / "evals.yaml").write_text(EVALS)
        task = ws / "tasks" / "sandbox-env"
        task.mkdir(parents=True)
        port = github.url.rsplit(":", 1)[1]
        r, k = _halves(RUNTIME_TOKEN), _halves(TOKEN)
        check = CHECK.format(runtime_a=r["a"], runtime_b=r["b"], token_a=k["a"], token_b=k["b"],
                             port=port)  # fmt: skip
        (task / "task.yaml").write_text(yaml.safe_dump({
            "description": "The sandbox sees none of the runner's secrets and no host port.",
            "prompt": "Reply with the word done.", "check": {"command": check, "timeout_s": 30},
            "timeout_s": 120, "max_turns": 1,
        }))  # fmt: skip
        (ws / ".gitignore").write_text("evalgate-outputs/\n")
        _ok(_git(ws, "add", "-A"))
        _ok(_git(ws, "commit", "-q", "-m", "evals"))
        _ok(_git(ws, "push", "-q", "origin", "HEAD:main"))
        base = _ok(_git(ws, "rev-parse", "HEAD"))
        sc = Scenario(ws=ws, origin=origin, github=github, push_outputs=base_dir / "push-outputs")
        temp = base_dir / "_temp"
        # The runner's checkout: its user's files; actions/checkout leaves it on the commit.
        _chown(ws)
        push = {"ref": "refs/heads/main", "before": "0" * 40, "after": base,
                "repository": {"full_name": REPO, "default_branch": "main"},
                "head_commit": {"id": base, "message": "evals"}}  # fmt: skip
        sc.runs["push"] = run_action(docker, image, sc, temp, "push", push, base,
                                     "refs/heads/main")  # fmt: skip
        if (ws / "evalgate-outputs").is_dir():  # the PR runs write the same folder
            shutil.copytree(ws / "evalgate-outputs", sc.push_outputs)

        # The PR: a README change; the runner checks out its head (as uid 1001).
        _ok(_git(ws, "checkout", "-q", "-b", "feature", user=RUNNER_UID))
        (ws / "README.md").write_text("A change that does not touch the evals.\n")
        _chown(ws / "README.md")
        _ok(_git(ws, "add", "README.md", user=RUNNER_UID))
        _ok(_git(ws, "commit", "-q", "-m", "readme", user=RUNNER_UID))
        _ok(_git(ws, "push", "-q", "origin", "feature", user=RUNNER_UID))
        head = _ok(_git(ws, "rev-parse", "HEAD", user=RUNNER_UID))
        github.seed_pull(REPO, PR, head, base_sha=base)
        event, ref = _pr_event(head, base), f"refs/pull/{PR}/merge"
        for name in ("pr-1", "pr-2"):
            sc.runs[name] = run_action(docker, image, sc, temp, "pull_request", event, head, ref)
        yield sc
    shutil.rmtree(base_dir, ignore_errors=True)
    assert not github.violations, github.violations


def _host_path(sc: Scenario, reported: str) -> Path:
    """An output path as the next (host) step would open it."""
    if reported.startswith("/github/workspace/"):
        return sc.ws / reported.removeprefix("/github/workspace/")
    return sc.ws / reported


def test_push_to_main_stores_the_baseline(scenario: Scenario) -> None:
    run = scenario.runs["push"]
    assert run.code == 0, run.log[-4000:]
    # No threshold in this evals.yaml and no baseline for a push: stored, and said ungated.
    assert run.outputs["exit_code"] == "0" and run.outputs["verdict"] == "UNGATED"
    listing = _ok(_git(scenario.origin, "ls-tree", "-r", "--name-only", "evalgate-results"))
    base = _ok(_git(scenario.origin, "rev-parse", "main"))
    stored = {p.split("/")[2] for p in listing.split() if p.startswith(f"runs/{base}/")}
    assert {s.split("--")[0] for s in stored} == {"arith", "humaneval", "sandbox-env"}


def test_pr_runs_twice_with_one_sticky_comment(scenario: Scenario) -> None:
    for name in ("pr-1", "pr-2"):
        run = scenario.runs[name]
        assert run.code == int(run.outputs["exit_code"]), run.log[-4000:]
        assert run.code == 0 and run.outputs["verdict"] in {"PASS", "INCONCLUSIVE"}, run.log[-4000:]
        assert "Compared with the baseline" in run.summary
        summary = json.loads(run.outputs["summary"])
        assert {"smollm2/arith", "smollm2/humaneval", "smollm2/sandbox-env"} <= set(summary)
        scorecard = _host_path(scenario, run.outputs["scorecard"])
        assert scorecard.is_file() and "evalgate:" in scorecard.read_text()
    (body,) = scenario.github.bodies(REPO, PR)
    assert "Compared with the baseline" in body
    posts = [e for e in scenario.github.requests("POST") if e.path.endswith("/comments")]
    assert len(posts) == 1  # created once; the second run found it and PATCHed it


def test_sandboxed_benchmarks_ran_in_containers_that_saw_no_secret(scenario: Scenario) -> None:
    run = scenario.runs["push"]
    assert "using the docker backend" in run.log  # bubblewrap cannot create namespaces here
    results = scenario.push_outputs
    rows = {}
    for path in results.rglob("results.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            rows[(path.parent.parent.name.split("--")[0], row["example_id"])] = row
    assert {b for b, _ in rows} == {"arith", "humaneval", "sandbox-env"}
    sandboxed = {k: r for k, r in rows.items() if k[0] != "arith"}
    assert all(r["error"] is None for r in sandboxed.values()), sandboxed
    (env_task,) = [r for k, r in sandboxed.items() if k[0] == "sandbox-env"]
    # Its check passed: no secret, no host port, not root.
    assert env_task["reward"] == 1.0, json.dumps(env_task, indent=1)[-3000:]
    for path in results.rglob("*"):
        if path.is_file():
            assert RUNTIME_TOKEN not in path.read_text(errors="replace"), path


def test_no_sandbox_container_is_left(scenario: Scenario, docker: str) -> None:
    left = _ok(subprocess.run(
        [docker, "ps", "-aq", "--filter", "label=evalgate.sandbox=1"], capture_output=True,
        text=True,
    ))  # fmt: skip
    assert left == ""


def test_the_runner_user_can_still_fetch_and_clean(scenario: Scenario) -> None:
    _ok(_git(scenario.ws, "fetch", "-q", "origin", user=RUNNER_UID))
    _ok(_git(scenario.ws, "clean", "-ffdx", user=RUNNER_UID))
    root_owned = [p for p in scenario.ws.rglob("*") if p.lstat().st_uid != RUNNER_UID]
    assert root_owned == []
