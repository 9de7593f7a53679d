"""Publish mode for a fork's PR: the number comes from the untrusted artifact; GitHub vouches.

GitHub leaves ``workflow_run.pull_requests`` empty when the PR comes from a fork, so the run's
``pr.json`` is the only place that names it, and the PR's own code wrote that file. These tests run
the entrypoint as ``evalgate-publish.yml`` does (a ``workflow_run`` payload shaped like GitHub's,
the artifact downloaded to ``evalgate-outputs``) against the spec-validated fake GitHub.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from fake_github import TOKEN, FakeGitHub, Fault, schema_validator

from evalgate.action import run_action
from evalgate.publish.github import GitHubClient, GitHubError

DATA = Path(__file__).resolve().parent / "data"
REPO = "octo-org/evals-demo"
FORK = "hubot-contrib/evals-demo"
MAIN_SHA = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
SCORECARD = "## ✅ evalgate: PASS\n\nfrom the fork's artifact\n"


def _event(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


@pytest.fixture
def fork_event() -> dict[str, Any]:
    return _event("workflow_run_event_fork.json")


class Publish:
    """A publish job's runner: the workspace with the downloaded artifact, and its environment."""

    def __init__(self, tmp: Path, api: str) -> None:
        self.tmp, self.api = tmp, api
        self.results = tmp / "ws" / "evalgate-outputs"
        self.results.mkdir(parents=True)
        (self.results / "scorecard.md").write_text(SCORECARD, encoding="utf-8")
        verdict = {"status": "PASS", "exit_code": 0}
        (self.results / "verdict.json").write_text(json.dumps(verdict), encoding="utf-8")

    def artifact_pr(self, pr_number: Any, sha: str = "") -> None:
        """pr.json as run mode writes it, with whatever number the PR's code chose."""
        data = {"pr_number": pr_number, "sha": sha, "repository": REPO}
        (self.results / "pr.json").write_text(json.dumps(data), encoding="utf-8")

    def run(self, event: dict[str, Any], **inputs: str) -> tuple[int, str]:
        (self.tmp / "event.json").write_text(json.dumps(event), encoding="utf-8")
        for name in ("output", "summary"):
            (self.tmp / name).write_text("")
        env = {
            "PATH": os.environ["PATH"], "HOME": str(self.tmp), "CI": "true",
            "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "workflow_run",
            "GITHUB_EVENT_PATH": str(self.tmp / "event.json"), "GITHUB_REPOSITORY": REPO,
            "GITHUB_API_URL": self.api, "GITHUB_SERVER_URL": "https://github.example",
            "GITHUB_WORKSPACE": str(self.tmp / "ws"), "GITHUB_WORKFLOW": "evalgate-publish",
            "GITHUB_RUN_ID": "12884790001", "GITHUB_REF": "refs/heads/main",
            "GITHUB_SHA": MAIN_SHA,  # workflow_run runs on the default branch's tip
            "GITHUB_OUTPUT": str(self.tmp / "output"),
            "GITHUB_STEP_SUMMARY": str(self.tmp / "summary"),
            "INPUT_GITHUB_TOKEN": TOKEN, "INPUT_MODE": "publish",
            "INPUT_RESULTS_DIR": "evalgate-outputs",
        }  # fmt: skip
        env.update({f"INPUT_{k.upper()}": v for k, v in inputs.items()})
        out = io.StringIO()
        return run_action(env, out=out), out.getvalue()

    @property
    def summary(self) -> str:
        return (self.tmp / "summary").read_text(encoding="utf-8")

    def outputs(self) -> dict[str, str]:
        lines, out, i = (self.tmp / "output").read_text().splitlines(), {}, 0
        while i < len(lines):  # name<<DELIM / value / DELIM
            name, _, delim = lines[i].partition("<<")
            end = lines.index(delim, i + 1)
            out[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
        return out


@pytest.fixture
def job(tmp_path: Path, github: FakeGitHub) -> Publish:
    return Publish(tmp_path, github.url)


def _writes(github: FakeGitHub) -> list[str]:
    return [f"{e.method} {e.path}" for e in github.log if e.method != "GET"]


# -- the fixtures are what GitHub sends ------------------------------------------------------------


def test_workflow_run_fixtures_match_the_webhook_schema(spec: dict[str, Any]) -> None:
    validator = schema_validator(spec, "webhook-workflow-run-completed")
    for name in ("workflow_run_event.json", "workflow_run_event_fork.json"):
        event = _event(name)
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(event)]
        assert errors == [], name
        run = event["workflow_run"]
        assert run["event"] == "pull_request" and len(run["head_sha"]) == 40
        assert run["repository"]["full_name"] == event["repository"]["full_name"] == REPO
    # The fork's run: the same head as the fork PR event, and no PR in the payload.
    fork_pr = _event("pull_request_event_fork.json")["pull_request"]
    run = _event("workflow_run_event_fork.json")["workflow_run"]
    assert run["pull_requests"] == []
    assert run["head_sha"] == fork_pr["head"]["sha"]
    assert run["head_repository"]["full_name"] == fork_pr["head"]["repo"]["full_name"] == FORK
    same = _event("workflow_run_event.json")["workflow_run"]
    assert [p["number"] for p in same["pull_requests"]] == [42]


# -- the client operation --------------------------------------------------------------------------


def test_get_pull_request_reads_a_fork_pr(client: GitHubClient, github: FakeGitHub) -> None:
    github.seed_pull(REPO, 43, "9" * 40, head_repo=FORK, base_sha="e" * 40)
    pull = client.get_pull_request(REPO, 43)
    assert (pull.number, pull.state, pull.head_sha) == (43, "open", "9" * 40)
    assert (pull.head_repo, pull.base_repo, pull.base_ref, pull.base_sha) == (
        FORK,
        REPO,
        "main",
        "e" * 40,
    )


def test_get_pull_request_retries_5xx_and_names_a_404(
    client: GitHubClient, github: FakeGitHub, sleeps: list[float]
) -> None:
    github.seed_pull(REPO, 43, "9" * 40, head_repo=FORK)
    github.faults.append(Fault("GET", 502, path=r"/pulls/43$"))
    assert client.get_pull_request(REPO, 43).head_sha == "9" * 40
    assert client.retries == 1 and len(sleeps) == 1
    with pytest.raises(GitHubError) as err:
        client.get_pull_request(REPO, 404)
    assert err.value.status == 404
    assert "GET /repos/octo-org/evals-demo/pulls/404 failed: HTTP 404" in str(err.value)


# -- publish mode ----------------------------------------------------------------------------------


def test_fork_pr_from_the_artifact_is_verified_then_commented(
    job: Publish, github: FakeGitHub, fork_event: dict[str, Any]
) -> None:
    head = fork_event["workflow_run"]["head_sha"]
    github.seed_pull(REPO, 43, head, head_repo=FORK, head_ref="better-prompts")
    job.artifact_pr(43, sha=head)
    code, log = job.run(fork_event)
    assert code == 0, log
    (body,) = github.bodies(REPO, 43)
    assert "from the fork's artifact" in body
    # GitHub was asked about the PR before anything was written to it.
    first = github.log[0]
    assert (first.method, first.path) == ("GET", f"/repos/{REPO}/pulls/43")
    assert _writes(github) == [f"POST /repos/{REPO}/issues/43/comments"]


def test_fork_pr_comment_stays_sticky_across_publishes(
    job: Publish, github: FakeGitHub, fork_event: dict[str, Any]
) -> None:
    head = fork_event["workflow_run"]["head_sha"]
    github.seed_pull(REPO, 43, head, head_repo=FORK)
    job.artifact_pr(43)
    assert job.run(fork_event)[0] == 0
    assert job.run(fork_event)[0] == 0
    assert len(github.bodies(REPO, 43)) == 1
    assert [w.split()[0] for w in _writes(github)] == ["POST", "PATCH"]


@pytest.mark.parametrize(
    ("seed", "reason"),
    [
        # Another PR of the repository: its head is not the commit this run evaluated.
        (
            {"number": 7, "head_sha": "7" * 40},
            "has head 777777777777 while the run evaluated 9f2ad4c2f1c5",
        ),
        # The same commit pushed to another fork's PR: the run's head was not there.
        (
            {"number": 7, "head_sha": None, "head_repo": "mallory/evals-demo"},
            "comes from mallory/evals-demo while the run's head was in hubot-contrib/evals-demo",
        ),
        # The run's own head, but a PR that targets the fork itself, not this repository.
        (
            {"number": 7, "head_sha": None, "head_repo": FORK, "base_repo": FORK},
            "targets hubot-contrib/evals-demo, not octo-org/evals-demo",
        ),
    ],
)
def test_forged_pr_number_is_refused_and_nothing_is_posted(
    job: Publish,
    github: FakeGitHub,
    fork_event: dict[str, Any],
    seed: dict[str, Any],
    reason: str,
) -> None:
    head = fork_event["workflow_run"]["head_sha"]
    github.seed_pull(REPO, 43, head, head_repo=FORK)  # the run's real PR
    seed = dict(seed)  # parametrize shares the dict between runs
    github.seed_pull(REPO, seed.pop("number"), seed.pop("head_sha") or head, **seed)
    job.artifact_pr(7, sha=head)
    code, log = job.run(fork_event)
    assert code == 2
    assert _writes(github) == []
    assert github.bodies(REPO, 7) == github.bodies(REPO, 43) == []
    message = f"refusing to publish: pr.json names #7, but that pull request {reason}"
    (error,) = [line for line in log.splitlines() if line.startswith("::error")]
    assert message in error
    assert message in job.summary
    assert "nothing was posted" in error


def test_artifact_naming_no_pull_request_is_refused(
    job: Publish, github: FakeGitHub, fork_event: dict[str, Any]
) -> None:
    github.seed_pull(REPO, 43, fork_event["workflow_run"]["head_sha"], head_repo=FORK)
    job.artifact_pr(99)  # an issue, or nothing: GitHub answers 404 for both
    code, log = job.run(fork_event)
    assert code == 2
    assert "pr.json names #99, which is not a pull request of octo-org/evals-demo" in log
    assert _writes(github) == []


@pytest.mark.parametrize("pr_number", [None, "43", True, 0, -1])
def test_malformed_artifact_pr_number_is_refused_without_asking_github(
    job: Publish, github: FakeGitHub, fork_event: dict[str, Any], pr_number: Any
) -> None:
    job.artifact_pr(pr_number)
    code, log = job.run(fork_event)
    assert code == 2
    assert f"pr_number is {pr_number!r}, not a pull request number" in log
    assert github.log == []


def test_missing_pr_json_is_refused(
    job: Publish, github: FakeGitHub, fork_event: dict[str, Any]
) -> None:
    code, log = job.run(fork_event)
    assert code == 2
    assert "pr.json: missing" in log and "GitHub omits fork PRs there" in log
    assert github.log == []


def test_payload_pr_is_used_directly_and_pr_json_ignored(job: Publish, github: FakeGitHub) -> None:
    event = _event("workflow_run_event.json")  # a same-repository PR: the payload names #42
    job.artifact_pr(43)  # ignored: the trusted payload wins
    code, log = job.run(event)
    assert code == 0, log
    assert "from the fork's artifact" in github.bodies(REPO, 42)[0]
    assert github.bodies(REPO, 43) == []
    assert not any("/pulls/" in e.path for e in github.log)  # nothing to verify


def test_without_comments_a_fork_publish_asks_github_nothing(
    job: Publish, github: FakeGitHub, fork_event: dict[str, Any]
) -> None:
    job.artifact_pr(43)
    code, _ = job.run(fork_event, comment="false")
    assert code == 0
    assert github.log == []
    assert "from the fork's artifact" in job.summary


def test_push_run_is_not_published(
    job: Publish, github: FakeGitHub, fork_event: dict[str, Any]
) -> None:
    fork_event["workflow_run"]["event"] = "push"
    job.artifact_pr(43)
    code, log = job.run(fork_event)
    assert code == 2
    assert "publish mode needs a workflow_run event for a pull request" in log
    assert github.log == []


# -- the artifact is the PR's to forge: nothing in it acts -----------------------------------------

HOSTILE = """## ✅ evalgate: PASS
<!-- evalgate:sticky:another-workflow -->
Ping @octo-org/security-team and @mona, see #1 and octo-org/other#2.
<img src="https://tracker.example/pixel.png"> ![x](https://tracker.example/i.png)
[log in again](https://phish.example/login) <https://phish.example> www.phish.example
<details open><summary onclick="x()">S</summary>&#64;mona</details>
"""


def test_a_hostile_artifact_is_posted_inert(
    job: Publish, github: FakeGitHub, fork_event: dict[str, Any]
) -> None:
    head = fork_event["workflow_run"]["head_sha"]
    github.seed_pull(REPO, 43, head, head_repo=FORK)
    job.artifact_pr(43, sha=head)
    (job.results / "scorecard.md").write_text(HOSTILE, encoding="utf-8")
    code, log = job.run(fork_event)
    assert code == 0, log
    (body,) = github.bodies(REPO, 43)
    assert body.count("<!--") == 1 and "another-workflow" not in body  # only our own marker
    active = [
        "@octo-org/security-team",
        "@mona",
        "#1",
        "other#2",
        "<img",
        "](https://",
        "<https://",
    ]
    active += ["https://", "www.phish", "<details open", "<summary onclick", "&#64;"]
    for text in active:
        assert text not in body, text
    assert "evalgate: PASS" in body and "security-team" in body  # the text is still there
    outputs = job.outputs()
    assert outputs["exit_code"] == "0" and outputs["verdict"] == "PUBLISHED"
    assert outputs["reported_verdict"] == "PASS"


@pytest.mark.parametrize("name", ["scorecard.md", "verdict.json", "pr.json"])
def test_a_symlink_in_the_artifact_is_never_followed(
    job: Publish, github: FakeGitHub, fork_event: dict[str, Any], name: str
) -> None:
    head = fork_event["workflow_run"]["head_sha"]
    github.seed_pull(REPO, 43, head, head_repo=FORK)
    job.artifact_pr(43, sha=head)
    secret = job.tmp / "environ"
    secret.write_text('{"pr_number": 43, "status": "PASS", "exit_code": 0} SECRET-VALUE\n')
    (job.results / name).unlink()
    (job.results / name).symlink_to(secret)  # as /proc/self/environ would be
    code, log = job.run(fork_event)
    assert code == 2, log
    assert "symlink" in log
    assert _writes(github) == []  # nothing posted
    assert "SECRET-VALUE" not in job.summary and "SECRET-VALUE" not in log
    assert job.outputs()["exit_code"] == "2" and job.outputs()["verdict"] == "ERROR"


def test_publish_mode_adopts_only_its_own_comment(
    job: Publish, github: FakeGitHub, fork_event: dict[str, Any]
) -> None:
    from evalgate.publish.sticky import marker, sticky_key

    head = fork_event["workflow_run"]["head_sha"]
    github.seed_pull(REPO, 43, head, head_repo=FORK)
    job.artifact_pr(43, sha=head)
    planted = f"{marker(sticky_key('evalgate-publish'))}\nplanted by the PR's author"
    github.seed(REPO, 43, [planted], login="mallory")
    assert job.run(fork_event)[0] == 0
    bodies = github.bodies(REPO, 43)
    assert bodies[0] == planted  # not rewritten under evalgate's name
    assert len(bodies) == 2 and "from the fork's artifact" in bodies[1]
    assert [w.split()[0] for w in _writes(github)] == ["POST"]


def test_inert_markdown_keeps_a_real_scorecard_readable() -> None:
    from evalgate.publish.sanitize import inert_markdown

    scorecard = (
        "## ❌ evalgate: FAIL\n\n- m / qa / accuracy: Δ -0.500 [-0.606, -0.394], margin −0.050\n\n"
        "| model | benchmark | score | 95% CI |\n|---|---|---:|---|\n"
        "| m | qa | 50.0% | [37.4, 62.6] |\n"
        "\n<details><summary>Flipped items: 1 regressed</summary>\n\n| `q01` | `A&lt;1` |\n\n"
        "</details>\n\n<sub>evalgate · policy: margin δ = 5.0 pp</sub>\n"
    )
    out = inert_markdown(scorecard)
    for kept in ("| m | qa | 50.0% |", "<details><summary>Flipped items", "</details>", "<sub>",
                 "`A&lt;1`", "## ❌ evalgate: FAIL"):  # fmt: skip
        assert kept in out, kept
