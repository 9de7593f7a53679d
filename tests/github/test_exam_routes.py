"""Issue 34: every route to a secret is walked, what the PR adds is a proposal, the exam's paths
resolve in the exam tree, and the workflow's inputs cannot change the exam.

Each test is a pull request an adversarial author would write, run through the Action's
entrypoint against a local origin (the harness of ``test_exam.py``): it ends FAIL, ERROR or
refused, with the reason in the comment's first lines, and no secret reaches a host the base
does not send it to.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from fake_github import FakeGitHub
from test_action import _git, _pr_event
from test_exam import Exam, _evals, _head_lines, _script

from evalgate.action import run_action


@pytest.fixture
def model(scripted_server: Any) -> Any:
    return scripted_server(_script)


@pytest.fixture
def exam(tmp_path: Path, model: Any) -> Exam:
    return Exam(tmp_path, model.base_url, _evals(model.base_url))


def _judge(body: dict[str, Any], n: int) -> str:
    return "Looks right.\nVERDICT: PASS"


def _judged_benchmark(url: str, key: str) -> str:
    judge = f'{{name: j, backend: openai, base_url: "{url}", model: j, api_key_env: {key}}}'
    return (
        f"  - {{name: judged, kind: jsonl, path: qa.jsonl, "
        f"scorer: {{type: judge, model: {judge}}}}}\n"
    )


def _with_benchmark(evals: str, entry: str) -> str:
    return evals.replace("benchmarks:\n", "benchmarks:\n" + entry)


@pytest.mark.parametrize("key", ["INPUT_GITHUB_TOKEN", "OPENAI_API_KEY"])
def test_a_judge_the_pr_adds_gets_no_secret_the_base_does_not_send_there(
    exam: Exam, model: Any, scripted_server: Any, github: FakeGitHub, pr_event: dict[str, Any],
    key: str,
) -> None:  # fmt: skip
    thief = scripted_server(_judge)
    head = exam.pr_files(_with_benchmark(_evals(exam.url), _judged_benchmark(thief.base_url, key)))
    env = exam.environ("pull_request", _pr_event(pr_event, exam, head), head,
                       "refs/pull/42/merge", github.url, results_store="none")  # fmt: skip
    env["OPENAI_API_KEY"] = "sk-openai-value-never-sent"
    code = run_action(env, out=io.StringIO())
    assert code == 2
    first = _head_lines(github)
    assert "judged" in first and "scorer.model" in first and key in first, first
    assert thief.requests == [] and model.requests == []


def test_a_litellm_params_base_url_is_a_destination(
    exam: Exam, model: Any, scripted_server: Any, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    thief = scripted_server(_judge)
    base = (
        "models:\n  - {name: m, backend: litellm, model: openai/org-m, api_key_env: PROVIDER_KEY,"
        f' api_base: "{model.base_url}"}}\n'
    )
    evals = _evals(exam.url).split("benchmarks:")[1]
    exam.base = exam.commit(base + "benchmarks:" + evals, "main")
    _git(exam.ws, "push", "-q", "origin", "main")
    for spelling in ("base_url", "Base-URL", "azure_endpoint"):
        pr = base.replace(
            "api_key_env: PROVIDER_KEY,",
            f'api_key_env: PROVIDER_KEY, params: {{{spelling}: "{thief.base_url}"}},',
        )
        head = exam.pr_files(pr + "benchmarks:" + evals)
        env = exam.environ("pull_request", _pr_event(pr_event, exam, head), head,
                           "refs/pull/42/merge", github.url, results_store="none")  # fmt: skip
        env["PROVIDER_KEY"] = "provider-key-value"
        assert run_action(env, out=io.StringIO()) == 2, spelling
        first = _head_lines(github)
        assert "would send PROVIDER_KEY to http://127.0.0.1" in first, (spelling, first)
        assert f":{thief.base_url.split(':')[2].split('/')[0]}" in first
        assert thief.requests == []
